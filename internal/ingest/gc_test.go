package ingest

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

func TestTuneGCLeavesAnOperatorsGOGC(t *testing.T) {
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })

	t.Setenv("GOGC", "150")
	TuneGC()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with GOGC set, the GC percent became %d, want it left at 100", got)
	}

	t.Setenv("GOGC", "")
	TuneGC()
	if got := debug.SetGCPercent(100); got != GCPercent {
		t.Errorf("without GOGC, the GC percent is %d, want %d", got, GCPercent)
	}
}

func TestCgroupMemoryLimit(t *testing.T) {
	root := t.TempDir()
	write := func(path, content string) string {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	// A pod's container, in a cgroup namespace of its own (/) and seen from the host's.
	write(filepath.Join(root, "memory.max"), "1073741824\n")
	write(filepath.Join(root, "kubepods/pod1/c1/memory.max"), "536870912\n")
	write(filepath.Join(root, "unlimited/memory.max"), "max\n")
	for _, c := range []struct {
		name, procCgroup string
		want             int64
		ok               bool
	}{
		{"namespaced", "0::/\n", 1 << 30, true},
		{"a path", "12:memory:/ignored\n0::/kubepods/pod1/c1\n", 512 << 20, true},
		{"no limit", "0::/unlimited\n", 0, false},
		{"no memory.max", "0::/missing\n", 0, false},
		{"cgroup v1 only", "4:memory:/kubepods/pod1/c1\n", 0, false},
	} {
		proc := write(filepath.Join(t.TempDir(), "cgroup"), c.procCgroup)
		got, ok := cgroupMemoryLimit(proc, root)
		if got != c.want || ok != c.ok {
			t.Errorf("%s: got %d, %v; want %d, %v", c.name, got, ok, c.want, c.ok)
		}
	}
	if _, ok := cgroupMemoryLimit(filepath.Join(root, "absent"), root); ok {
		t.Error("without /proc/self/cgroup, a limit was found")
	}
}

func TestTuneGCSetsTheMemoryLimitFromTheContainersUnlessGOMEMLIMIT(t *testing.T) {
	gcPercent, limit := debug.SetGCPercent(100), debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetGCPercent(gcPercent); debug.SetMemoryLimit(limit) })
	root := t.TempDir()
	proc := filepath.Join(root, "cgroup")
	if err := os.WriteFile(proc, []byte("0::/\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "memory.max"), []byte("1073741824\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	debug.SetMemoryLimit(123 << 20)
	t.Setenv("GOMEMLIMIT", "123MiB")
	tuneGC(proc, root)
	if got := debug.SetMemoryLimit(-1); got != 123<<20 {
		t.Errorf("with GOMEMLIMIT set, the memory limit became %d, want it left at %d", got, 123<<20)
	}

	t.Setenv("GOMEMLIMIT", "")
	tuneGC(proc, root)
	share := MemoryLimitShare
	if got, want := debug.SetMemoryLimit(-1), int64(float64(1<<30)*share); got != want {
		t.Errorf("in a container limited to 1 GiB, the memory limit is %d, want %d", got, want)
	}
}
