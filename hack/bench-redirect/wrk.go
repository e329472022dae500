package main

import (
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"time"
)

type wrkResult struct {
	rps      float64
	p50, p99 time.Duration
	requests int64
	errors   int64 // socket errors and non-2xx/3xx answers
	clicks   counters
	// CPU time of this process (the servers) and of the broker process during the run.
	serverCPU, brokerCPU time.Duration
	// CPU time of wrk itself.
	wrkCPU time.Duration
	// produce is the latency of the recorder's produce requests during the run.
	produce histogram
}

// cpuPerRequest is the CPU the whole loop spends on one request (server, broker and load
// generator), in microseconds.
func (r wrkResult) cpuPerRequest() float64 {
	return r.perRequest(r.serverCPU + r.brokerCPU + r.wrkCPU)
}

// perRequest is a CPU time per answered request, in microseconds.
func (r wrkResult) perRequest(d time.Duration) float64 {
	if r.requests == 0 {
		return 0
	}
	return float64(d.Microseconds()) / float64(r.requests)
}

var (
	reRPS      = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	rePct      = regexp.MustCompile(`(?m)^\s+(50|99)%\s+([0-9.]+)(us|ms|s)\s*$`)
	reRequests = regexp.MustCompile(`(\d+) requests in`)
	reNon2xx   = regexp.MustCompile(`Non-2xx or 3xx responses: (\d+)`)
	reSocket   = regexp.MustCompile(`Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)`)
)

func runWrk(bin, url string, threads, conns int, d time.Duration) (wrkResult, error) {
	args := []string{"-t" + strconv.Itoa(threads), "-c" + strconv.Itoa(conns), "-d" + strconv.Itoa(int(d.Seconds())) + "s",
		"--latency", "--timeout", "5s", url}
	if forwardedFor != "" {
		args = append(args, "-H", "X-Forwarded-For: "+forwardedFor)
	}
	cmd := exec.Command(bin, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return wrkResult{}, fmt.Errorf("wrk: %w\n%s", err, out)
	}
	r, err := parseWrk(string(out))
	r.wrkCPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return r, err
}

func parseWrk(out string) (wrkResult, error) {
	var r wrkResult
	m := reRPS.FindStringSubmatch(out)
	if m == nil {
		return r, errors.New("wrk: no Requests/sec in its output:\n" + out)
	}
	r.rps, _ = strconv.ParseFloat(m[1], 64)
	for _, p := range rePct.FindAllStringSubmatch(out, -1) {
		v, _ := strconv.ParseFloat(p[2], 64)
		unit := map[string]time.Duration{"us": time.Microsecond, "ms": time.Millisecond, "s": time.Second}[p[3]]
		d := time.Duration(v * float64(unit))
		if p[1] == "50" {
			r.p50 = d
		} else {
			r.p99 = d
		}
	}
	if m := reRequests.FindStringSubmatch(out); m != nil {
		r.requests, _ = strconv.ParseInt(m[1], 10, 64)
	}
	if m := reNon2xx.FindStringSubmatch(out); m != nil {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		r.errors += n
	}
	if m := reSocket.FindStringSubmatch(out); m != nil {
		for _, s := range m[1:] {
			n, _ := strconv.ParseInt(s, 10, 64)
			r.errors += n
		}
	}
	return r, nil
}
