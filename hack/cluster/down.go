package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// down stops the cluster and undoes what `up` did to the host, then checks that nothing is
// left. It goes on after each failure, so one stuck step does not leave the rest behind, and
// keeps the logs (<dir>/logs) for whoever wants to read them.
func down(_ context.Context, l layout) error {
	before, err := loadSnapshot(l)
	if errors.Is(err, fs.ErrNotExist) {
		step("no cluster in %s", l.dir)
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", l.snapshotPath(), err)
	}
	var e errs
	// The kubelet first, so it restarts nothing; then the pods' processes and their shims.
	e.add("kubelet", stop(l, "kubelet", 10*time.Second))
	for _, pid := range processesInCgroup("/kubepods") {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	for _, pid := range processesMatching("containerd-shim", "-address "+l.containerdSock()) {
		e.add("containerd shim", terminate(pid, 2*time.Second))
	}
	for _, name := range []string{"containerd", "kube-proxy", "coredns", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"} {
		e.add(name, stop(l, name, 10*time.Second))
	}
	// Pod network namespaces, volumes, container root filesystems: all mounted under dir.
	for _, m := range mountsUnder(l.dir) {
		if err := syscall.Unmount(m, 0); err != nil {
			e.add("unmount "+m, syscall.Unmount(m, syscall.MNT_DETACH))
		}
	}
	if linkExists(bridgeName) {
		if out, _ := sh("ip", "-o", "link", "show", "master", bridgeName); out != "" {
			for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
				if f := strings.Fields(line); len(f) > 1 {
					_, _ = sh("ip", "link", "del", strings.SplitN(strings.TrimSuffix(f[1], ":"), "@", 2)[0])
				}
			}
		}
		_, err := sh("ip", "link", "del", bridgeName)
		e.add("bridge", err)
	}
	if hasNodeAddress() {
		_, err := sh("ip", "addr", "del", nodeIP+"/32", "dev", "lo")
		e.add("node address", err)
	}
	e.add("iptables", restoreIPTables(before))
	e.add("kernel settings", restoreSysctls(before))
	for _, d := range cgroupDirs() {
		if err := syscall.Rmdir(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
			e.add("cgroup "+d, err)
		}
	}
	// What the CNI library and the kubelet keep outside any directory they are given: ours
	// in folders that were there before, the folders themselves otherwise.
	results, _ := filepath.Glob("/var/lib/cni/results/" + cniNetwork + "-*")
	for _, r := range results {
		e.add("cni cache", removeIfExists(r))
	}
	links, _ := filepath.Glob("/var/log/containers/*")
	for _, p := range links {
		if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, l.dir+"/") {
			e.add("container log link", removeIfExists(p))
		}
	}
	for _, p := range before.Absent {
		e.add("remove "+p, removeIfExists(p))
	}

	e.add("leftovers", leftovers(l, before))
	if err := e.err(); err != nil {
		return err
	}
	// Everything but the logs goes: the next `up` starts from nothing.
	entries, _ := os.ReadDir(l.dir)
	for _, ent := range entries {
		if ent.Name() != "logs" {
			e.add("remove", removeIfExists(filepath.Join(l.dir, ent.Name())))
		}
	}
	if err := e.err(); err != nil {
		return err
	}
	step("down; the host is as it was (logs kept in %s)", l.path("logs"))
	return nil
}

// leftovers checks the host against the snapshot and names whatever `down` did not undo.
func leftovers(l layout, before snapshot) error {
	var left []string
	if pids := processesOf(l); len(pids) > 0 {
		left = append(left, fmt.Sprintf("processes %v (of %s)", pids, l.dir))
	}
	if pids := processesInCgroup("/kubepods"); len(pids) > 0 {
		left = append(left, fmt.Sprintf("pod processes %v", pids))
	}
	if m := mountsUnder(l.dir); len(m) > 0 {
		left = append(left, fmt.Sprintf("mounts %v", m))
	}
	if linkExists(bridgeName) {
		left = append(left, "bridge "+bridgeName)
	}
	if hasNodeAddress() {
		left = append(left, "address "+nodeIP+" on lo")
	}
	if d := cgroupDirs(); len(d) > 0 {
		left = append(left, fmt.Sprintf("cgroups %v", d))
	}
	for _, p := range before.Absent {
		if _, err := os.Lstat(p); err == nil {
			left = append(left, p)
		}
	}
	now, err := takeSnapshot()
	if err != nil {
		return err
	}
	for key, want := range before.Sysctls {
		if got, ok := now.Sysctls[key]; ok && got != want {
			left = append(left, fmt.Sprintf("kernel setting %s = %s (was %s)", key, got, want))
		}
	}
	for tool, want := range before.IPTables {
		if now.IPTables[tool] != want {
			left = append(left, tool+" rules differ from before `up`")
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("left behind: %s", strings.Join(left, "; "))
	}
	return nil
}
