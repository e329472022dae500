// Package procstat reads the CPU time processes used, from /proc (Linux), for benchmarks that
// report CPU per event of the whole path, the stores' server processes included.
package procstat

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Self is the user and system CPU time of this process.
func Self() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// CPU is the user and system CPU time of process pid, zero when it cannot be read.
func CPU(pid int) time.Duration {
	fields := stat(pid)
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	const clockTicks = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / clockTicks
}

// TreeCPU is the CPU time of process pid and of its children alive now (Postgres' backends).
func TreeCPU(pid int) time.Duration {
	total := CPU(pid)
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		child, err := strconv.Atoi(filepath.Base(d))
		if err != nil || child == pid {
			continue
		}
		if fields := stat(child); len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			total += CPU(child)
		}
	}
	return total
}

// PIDFile reads the process id on the first line of a pid file (Postgres' postmaster.pid has
// more lines after it).
func PIDFile(path string) (int, bool) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	return pid, err == nil
}

// stat returns the fields of /proc/<pid>/stat after the command name, which is in
// parentheses and may hold spaces: state, parent pid, ...
func stat(pid int) []string {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	s := string(raw)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
}

// Machine is the CPU time all of this machine's cores have been busy (everything but idle and
// I/O wait) and the time they existed, from /proc/stat: across an interval, busy/total is how
// saturated the machine was, which tells a pipeline that stalls from one short of cores.
func Machine() (busy, total time.Duration) {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	fields := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	if len(fields) < 9 || fields[0] != "cpu" {
		return 0, 0
	}
	const clockTicks = 100 // USER_HZ on Linux
	var ticks [8]int64
	for i := range ticks {
		ticks[i], _ = strconv.ParseInt(fields[i+1], 10, 64)
	}
	idle := ticks[3] + ticks[4]
	var all int64
	for _, t := range ticks {
		all += t
	}
	return time.Duration(all-idle) * time.Second / clockTicks, time.Duration(all) * time.Second / clockTicks
}

// LoadAverage is the machine's 1, 5 and 15 minute load averages, for benchmarks to show how
// busy the machine was beside their figures.
func LoadAverage() string {
	raw, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// RSS is the resident memory of process pid now (VmRSS), PeakRSS the most it has had
// (VmHWM); zero when they cannot be read.
func RSS(pid int) uint64     { return statusBytes(pid, "VmRSS:") }
func PeakRSS(pid int) uint64 { return statusBytes(pid, "VmHWM:") }

// RSSAnon and RSSFile split RSS now: anonymous pages (the Go heap, stacks, the runtime's own)
// and pages of mapped files (the binary, memory-mapped databases), which the kernel can drop
// and read again under pressure.
func RSSAnon(pid int) uint64 { return statusBytes(pid, "RssAnon:") }
func RSSFile(pid int) uint64 { return statusBytes(pid, "RssFile:") }

// MappedRSS is the resident memory of process pid's mappings of files whose names end with
// suffix (from /proc/<pid>/smaps); zero when it cannot be read.
func MappedRSS(pid int, suffix string) uint64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	if err != nil {
		return 0
	}
	var total uint64
	in := false
	for _, line := range strings.Split(string(raw), "\n") {
		fields := strings.Fields(line)
		switch {
		case len(fields) >= 5 && strings.Contains(fields[0], "-"): // a mapping's header
			in = len(fields) >= 6 && strings.HasSuffix(fields[len(fields)-1], suffix)
		case in && len(fields) == 3 && fields[0] == "Rss:":
			kb, _ := strconv.ParseUint(fields[1], 10, 64)
			total += kb << 10
		}
	}
	return total
}

// statusBytes reads a field in kB of /proc/<pid>/status.
func statusBytes(pid int, field string) uint64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
