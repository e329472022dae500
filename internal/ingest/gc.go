package ingest

import (
	"bufio"
	"bytes"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// GCPercent is the garbage collector's target (GOGC) that TuneGC sets. Ingest allocates
// batch-sized buffers for every insert (the ClickHouse driver's columns) while its live heap
// stays small, so at Go's default of 100 the collector runs every few batches. 200 buys a
// measurable share of ingest's CPU for more memory; 400 saved little more for half as much
// memory again (figures in docs/stats.md).
const GCPercent = 200

// MemoryLimitShare is the share of its container's memory limit that TuneGC gives the Go
// runtime as its soft limit (GOMEMLIMIT). GOGC=200 lets the heap grow to three times what is
// live, and what is live grows with the hour's unique-click decisions: near the limit the
// collector must run more often rather than the container be killed. The rest is for what the
// runtime does not count: the mapped databases' pages, which the kernel can drop, and the
// binary's.
const MemoryLimitShare = 0.9

// TuneGC sets the garbage collector of a process that runs ingest alone to GCPercent, unless
// the operator set GOGC, and its soft memory limit to MemoryLimitShare of the container's
// memory limit (cgroup v2), unless the operator set GOMEMLIMIT or there is no limit.
func TuneGC() { tuneGC("/proc/self/cgroup", "/sys/fs/cgroup") }

func tuneGC(procCgroup, cgroupRoot string) {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(GCPercent)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		if limit, ok := cgroupMemoryLimit(procCgroup, cgroupRoot); ok {
			debug.SetMemoryLimit(int64(float64(limit) * MemoryLimitShare))
		}
	}
}

// cgroupMemoryLimit is the memory limit of this process's cgroup v2 (memory.max of the path
// /proc/self/cgroup names under the unified hierarchy at root); false when there is none or
// it cannot be read (cgroup v1: set GOMEMLIMIT).
func cgroupMemoryLimit(procCgroup, root string) (int64, bool) {
	raw, err := os.ReadFile(procCgroup)
	if err != nil {
		return 0, false
	}
	lines := bufio.NewScanner(bytes.NewReader(raw))
	for lines.Scan() {
		path, ok := strings.CutPrefix(lines.Text(), "0::")
		if !ok {
			continue
		}
		data, err := os.ReadFile(filepath.Join(root, filepath.Clean("/"+path), "memory.max"))
		if err != nil {
			return 0, false
		}
		limit, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
		if err != nil || limit <= 0 || limit == math.MaxInt64 { // "max": no limit
			return 0, false
		}
		return limit, true
	}
	return 0, false
}
