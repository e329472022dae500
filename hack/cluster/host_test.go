package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

func TestTheSnapshotHoldsTheKernelSettingsTheClusterChanges(t *testing.T) {
	s, err := takeSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	// The kubelet sets these two, the bridge plugin the third: `down` must know their values.
	for _, key := range []string{"vm/overcommit_memory", "kernel/panic", "net/ipv4/ip_forward"} {
		if _, ok := s.Sysctls[key]; !ok {
			t.Errorf("the snapshot has no %s (it has %d settings)", key, len(s.Sysctls))
		}
	}
	if _, ok := s.IPTables["iptables"]; !ok {
		t.Error("the snapshot has no iptables rules")
	}
}

func TestTablesSplitsASaveByTable(t *testing.T) {
	save := "*nat\n:PREROUTING ACCEPT [0:0]\n-A PREROUTING -j X\nCOMMIT\n*filter\n:INPUT ACCEPT [0:0]\nCOMMIT\n"
	got := tables(normalizeRules(save))
	if len(got) != 2 || got["nat"] != "*nat\n:PREROUTING ACCEPT [0:0]\n-A PREROUTING -j X\nCOMMIT\n" || got["filter"] != "*filter\n:INPUT ACCEPT [0:0]\nCOMMIT\n" {
		t.Errorf("tables(%q) = %q", save, got)
	}
}

// A `make run` of the same checkout runs etcd and kube-apiserver from the cluster's assets
// directory (bin/k8s) with their state elsewhere: they are not the cluster's leftovers, and
// `down` must not fail on them. The cluster's own processes are found however they run.
func TestLeftoverProcessesAreTheClustersOnly(t *testing.T) {
	root := t.TempDir()
	l := layout{dir: filepath.Join(root, ".local", "cluster"), assets: filepath.Join(root, "bin", "k8s")}
	elsewhere := filepath.Join(root, ".local", "kube")
	for _, d := range []string{l.dir, l.assets, elsewhere} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A shell copied into the assets directory stands for etcd: it keeps running (it waits
	// for its sleep) with the arguments and working directory it was given.
	etcd := filepath.Join(l.assets, "etcd")
	sh, err := os.ReadFile("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(etcd, sh, 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(dir string, args ...string) int {
		cmd := exec.Command(etcd, append([]string{"-c", "sleep 60; :", "etcd"}, args...)...)
		cmd.Dir = dir
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd.Process.Pid
	}
	run(root, "--data-dir", filepath.Join(elsewhere, "etcd")) // make run's
	named := run(l.dir, "--data-dir", filepath.Join(l.dir, "etcd"))
	unnamed := run(l.dir)

	got := processesOf(l)
	slices.Sort(got)
	want := []int{named, unnamed}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("processesOf = %v, want the cluster's %v and not make run's", got, want)
	}
}
