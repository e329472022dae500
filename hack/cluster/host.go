package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// The kernel settings that the kubelet, kube-proxy and the CNI plugins change (the kubelet
// sets vm.overcommit_memory=1 and kernel.panic*, the bridge plugin turns on ip_forward,
// kube-proxy may touch route_localnet and conntrack): their values before `up` are restored
// by `down`.
var sysctlPrefixes = []string{
	"net/ipv4/ip_forward", "net/ipv4/conf/all/", "net/ipv4/conf/default/", "net/ipv4/conf/lo/",
	"net/ipv6/conf/all/", "net/ipv6/conf/default/", "net/bridge/", "net/netfilter/nf_conntrack_max",
	"net/netfilter/nf_conntrack_tcp_timeout_", "vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic",
	"kernel/keys/",
}

// hostPaths are where containerd, the CNI library and the kubelet write outside the
// directories they are given; `down` removes the ones that did not exist before `up`.
var hostPaths = []string{"/var/lib/cni", "/run/containerd", "/var/log/containers", "/var/log/pods",
	"/etc/cni", "/var/lib/kubelet", "/run/netns", "/var/run/netns", "/etc/kubernetes"}

// snapshot is the state of the host that `down` puts back.
type snapshot struct {
	Sysctls  map[string]string `json:"sysctls"`
	IPTables map[string]string `json:"iptables"` // iptables-save / ip6tables-save output
	Absent   []string          `json:"absent"`   // hostPaths that did not exist
}

func (l layout) snapshotPath() string { return l.path("host-before.json") }

func takeSnapshot() (snapshot, error) {
	s := snapshot{Sysctls: map[string]string{}, IPTables: map[string]string{}}
	err := filepath.WalkDir("/proc/sys", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		key := strings.TrimPrefix(path, "/proc/sys/")
		if !hasAnyPrefix(key, sysctlPrefixes) {
			return nil
		}
		info, err := d.Info()
		if err != nil || info.Mode().Perm()&0o200 == 0 {
			return nil // read-only
		}
		b, err := os.ReadFile(path)
		if err == nil {
			s.Sysctls[key] = strings.TrimSpace(string(b))
		}
		return nil
	})
	if err != nil {
		return s, err
	}
	for _, tool := range []string{"iptables", "ip6tables"} {
		out, err := sh(tool + "-save")
		if err != nil {
			return s, err
		}
		s.IPTables[tool] = normalizeRules(out)
	}
	for _, p := range hostPaths {
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			s.Absent = append(s.Absent, p)
		}
	}
	return s, nil
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

var counters = regexp.MustCompile(`\[\d+:\d+\]`)

// normalizeRules drops the comments (they carry times) and the packet counters.
func normalizeRules(save string) string {
	var b strings.Builder
	sc := bufio.NewScanner(strings.NewReader(save))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		b.WriteString(counters.ReplaceAllString(line, "[0:0]"))
		b.WriteByte('\n')
	}
	return b.String()
}

func saveSnapshot(l layout, s snapshot) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(l.snapshotPath(), b, 0o644)
}

func loadSnapshot(l layout) (snapshot, error) {
	var s snapshot
	b, err := os.ReadFile(l.snapshotPath())
	if err != nil {
		return s, err
	}
	return s, json.Unmarshal(b, &s)
}

// restoreSysctls writes back every saved setting that differs now.
func restoreSysctls(before snapshot) error {
	var e errs
	for key, want := range before.Sysctls {
		path := filepath.Join("/proc/sys", key)
		b, err := os.ReadFile(path)
		if err != nil || strings.TrimSpace(string(b)) == want {
			continue
		}
		e.add("restore "+key, os.WriteFile(path, []byte(want), 0o644))
	}
	return e.err()
}

// restoreIPTables puts back the rules saved before `up`: every table that exists now is
// replaced with its saved content (an empty table when it did not exist before).
func restoreIPTables(before snapshot) error {
	var e errs
	for _, tool := range []string{"iptables", "ip6tables"} {
		now, err := sh(tool + "-save")
		if err != nil {
			e.add(tool, err)
			continue
		}
		if normalizeRules(now) == before.IPTables[tool] {
			continue
		}
		saved := tables(before.IPTables[tool])
		var in strings.Builder
		for _, name := range sortedKeys(tables(now)) {
			block, ok := saved[name]
			if !ok {
				block = "*" + name + "\nCOMMIT\n"
			}
			in.WriteString(block)
		}
		cmd := exec.Command(tool + "-restore")
		cmd.Stdin = strings.NewReader(in.String())
		if out, err := cmd.CombinedOutput(); err != nil {
			e.add(tool+"-restore", fmt.Errorf("%w: %s", err, out))
		}
	}
	return e.err()
}

// tables splits a save into its table blocks ("*filter ... COMMIT"), by table name.
func tables(save string) map[string]string {
	out := map[string]string{}
	var name string
	var b strings.Builder
	for _, line := range strings.Split(save, "\n") {
		switch {
		case strings.HasPrefix(line, "*"):
			name = line[1:]
			b.Reset()
			b.WriteString(line + "\n")
		case line == "COMMIT" && name != "":
			b.WriteString("COMMIT\n")
			out[name] = b.String()
			name = ""
		case name != "" && !strings.HasPrefix(line, "#") && line != "":
			b.WriteString(line + "\n")
		}
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// setUpNetwork puts the node address on lo and the egress guard in FORWARD.
func setUpNetwork() error {
	if !hasNodeAddress() {
		if _, err := sh("ip", "addr", "add", nodeIP+"/32", "dev", "lo"); err != nil {
			return err
		}
	}
	return guardEgress()
}

// guardEgress (re)inserts, first in FORWARD, a chain that drops whatever a pod sends out of
// the bridge to another interface, and whatever comes from another interface to the bridge.
// kube-proxy and the kubelet insert their own FORWARD rules at the top when they start, so
// `up` calls this again once they run.
func guardEgress() error {
	_, _ = sh("iptables", "-N", egressChain)
	if _, err := sh("iptables", "-F", egressChain); err != nil {
		return err
	}
	for _, rule := range [][]string{
		{"-i", bridgeName, "-o", bridgeName, "-j", "RETURN"},
		{"-i", bridgeName, "-j", "DROP"},
		{"-o", bridgeName, "-j", "DROP"},
	} {
		if _, err := sh("iptables", append([]string{"-A", egressChain}, rule...)...); err != nil {
			return err
		}
	}
	for {
		if _, err := sh("iptables", "-D", "FORWARD", "-j", egressChain); err != nil {
			break
		}
	}
	_, err := sh("iptables", "-I", "FORWARD", "1", "-j", egressChain)
	return err
}

func hasNodeAddress() bool {
	out, _ := sh("ip", "-4", "addr", "show", "dev", "lo")
	return strings.Contains(out, " "+nodeIP+"/32 ")
}

func linkExists(name string) bool {
	_, err := sh("ip", "link", "show", "dev", name)
	return err == nil
}

// mountsUnder lists the mount points at or below dir, deepest first.
func mountsUnder(dir string) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var points []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		p := unescapeMount(f[4])
		if within(p, dir) {
			points = append(points, p)
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	return points
}

// unescapeMount decodes the octal escapes of /proc/self/mountinfo (\040 is a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

// cgroupDirs lists the kubelet's cgroup directories (every v1 hierarchy), deepest first.
func cgroupDirs() []string {
	var dirs []string
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods")
	if d := "/sys/fs/cgroup/kubepods"; isDir(d) {
		roots = append(roots, d)
	}
	for _, root := range roots {
		_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
	}
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	return dirs
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

func removeIfExists(path string) error {
	if err := os.RemoveAll(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
