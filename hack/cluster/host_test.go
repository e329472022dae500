package main

import "testing"

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
