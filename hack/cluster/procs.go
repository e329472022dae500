package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// start runs a cluster process detached from this one (its own session, so it outlives `up`
// and a Ctrl-C of the terminal), logging to <dir>/logs/<name>.log, and records its pid.
func start(l layout, name, bin string, args ...string) error {
	if err := os.MkdirAll(l.path("logs"), 0o755); err != nil {
		return err
	}
	if err := os.MkdirAll(l.path("pids"), 0o755); err != nil {
		return err
	}
	logf, err := os.OpenFile(l.path("logs", name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = l.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	pid := cmd.Process.Pid
	_ = cmd.Process.Release()
	return os.WriteFile(l.path("pids", name+".pid"), []byte(strconv.Itoa(pid)), 0o644)
}

// alive reports whether the recorded process of name still runs.
func alive(l layout, name string) (int, bool) {
	b, err := os.ReadFile(l.path("pids", name+".pid"))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return 0, false
	}
	return pid, syscall.Kill(pid, 0) == nil
}

// stop sends SIGTERM to the recorded process of name and SIGKILL after grace.
func stop(l layout, name string, grace time.Duration) error {
	pid, ok := alive(l, name)
	if ok {
		if err := terminate(pid, grace); err != nil {
			return fmt.Errorf("stop %s: %w", name, err)
		}
	}
	_ = os.Remove(l.path("pids", name+".pid"))
	return nil
}

// terminate stops one process: SIGTERM, then SIGKILL after grace; it waits until it is gone.
func terminate(pid int, grace time.Duration) error {
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if !running(pid) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for range 100 {
		if !running(pid) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("pid %d survived SIGKILL", pid)
}

// running is true while pid exists and is not a zombie (a detached child of a process that
// has not reaped it yet counts as gone).
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// processes lists the pids of the processes other than this one for which match holds.
func processes(match func(pid int) bool) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err == nil && pid != self && match(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func cmdline(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.ReplaceAll(string(b), "\x00", " ")
}

// processesMatching lists the pids whose command line contains every one of the words.
func processesMatching(words ...string) []int {
	return processes(func(pid int) bool {
		c := cmdline(pid)
		all := c != ""
		for _, w := range words {
			all = all && strings.Contains(c, w)
		}
		return all
	})
}

// processesOf lists the cluster's processes: those whose arguments name its state directory
// (everything `start` runs, and the containerd shims), and any binary of the assets directory
// working in that directory, where `start` runs each. A binary of the assets directory
// elsewhere is not the cluster's: `make run` runs its etcd and kube-apiserver from the same
// bin/k8s, with their state in another directory, and may run beside the cluster.
func processesOf(l layout) []int {
	return processes(func(pid int) bool {
		if strings.Contains(cmdline(pid), l.dir+"/") {
			return true
		}
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		cwd, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
		return within(exe, l.assets) && cwd == l.dir
	})
}

func within(path, dir string) bool { return path == dir || strings.HasPrefix(path, dir+"/") }

// processesInCgroup lists the pids whose cgroup path (any hierarchy) starts with prefix.
func processesInCgroup(prefix string) []int {
	return processes(func(pid int) bool {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if err != nil {
			return false
		}
		for _, line := range strings.Split(string(b), "\n") {
			parts := strings.SplitN(line, ":", 3)
			if len(parts) == 3 && strings.HasPrefix(parts[2], prefix) {
				return true
			}
		}
		return false
	})
}

// waitFor polls check every 250 ms until it succeeds or ctx ends; the last error is returned.
func waitFor(ctx context.Context, what string, check func(ctx context.Context) error) error {
	var last error
	for {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		last = check(c)
		cancel()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not ready: %w", what, last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// sh runs a host command and returns its combined output; the error names the command.
func sh(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}
