package journey

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSoak runs the platform at a steady click and conversion rate for SOAK_DURATION (make
// soak: 10 minutes by default) and checks that no component grows: resident memory, Go heap
// and goroutines of the last quarter of the run stay within bounds of the second quarter
// (the first is warm-up), and ingest keeps up. It skips without SOAK_DURATION.
func TestSoak(t *testing.T) {
	raw := os.Getenv("SOAK_DURATION")
	if raw == "" {
		t.Skip("set SOAK_DURATION (make soak) to run the soak")
	}
	duration, err := time.ParseDuration(raw)
	if err != nil || duration < time.Minute {
		t.Fatalf("journey: SOAK_DURATION=%q: want a duration of at least 1m", raw)
	}
	every := 5 * time.Second
	if duration < 4*time.Minute {
		every = 2 * time.Second
	}
	s := newStack(t)
	w := setUp(t, s)
	// About 4 x 20 = 80 clicks/s and two conversions per second (one approved).
	l := w.startLoad(t, 50*time.Millisecond)

	samples := map[string][]sample{}
	scrapeErrors := map[string][]string{}
	var maxLag float64
	end := time.Now().Add(duration)
	for tick := time.NewTicker(every); time.Now().Before(end); <-tick.C {
		for _, p := range append(s.components(), s.broker) {
			sm := sample{at: time.Now(), rss: rssBytes(p.pid()), heap: -1, goroutines: -1}
			if p != s.broker { // the broker has no /metrics
				m, err := s.scrape(p.name)
				if err != nil {
					scrapeErrors[p.name] = append(scrapeErrors[p.name], err.Error())
				} else {
					sm.heap, sm.goroutines = m["go_memstats_heap_inuse_bytes"], m["go_goroutines"]
					if p == s.ingest {
						sm.lag = m["partnerstream_ingest_lag_seconds"]
						maxLag = max(maxLag, sm.lag)
					}
				}
			}
			samples[p.name] = append(samples[p.name], sm)
		}
	}
	l.stop()
	writeSamples(t, s.dir, samples)

	t.Logf("soak of %v, a sample every %v; averages of the second and the last quarter:", duration, every)
	for _, name := range []string{"api", "ingest", "deliver", "controller", "kafka"} {
		ss := samples[name]
		q2, q4 := quarter(ss, 1), quarter(ss, 3)
		t.Logf("  %-10s RSS %s -> %s MiB   Go heap in use %s -> %s MiB   goroutines %s -> %s   (%d samples, %d failed scrapes)",
			name, num(q2.rss/(1<<20)), num(q4.rss/(1<<20)), num(q2.heap/(1<<20)), num(q4.heap/(1<<20)),
			num(q2.goroutines), num(q4.goroutines), len(ss), len(scrapeErrors[name]))
		// Flat: the last quarter within 25 % (plus a little slack for small processes) of the
		// second; a leak of a steady load grows linearly and fails this over ten minutes.
		check := func(what string, a, b, slack float64) {
			if a >= 0 && b >= 0 && b > a*1.25+slack {
				t.Errorf("journey: %s %s grew from %.0f to %.0f", name, what, a, b)
			}
		}
		check("resident memory", q2.rss, q4.rss, 16<<20)
		check("heap", q2.heap, q4.heap, 8<<20)
		check("goroutines", q2.goroutines, q4.goroutines, 20)
		if errs := scrapeErrors[name]; len(errs) > 0 {
			t.Errorf("journey: %s: %d of %d scrapes of /metrics failed, first: %s", name, len(errs), len(ss), firstLine(errs[0]))
		}
	}
	t.Logf("  ingest lag: at most %.1f s", maxLag)
	if maxLag > 30 {
		t.Errorf("journey: ingest lag reached %.1f s", maxLag)
	}
	l.verify(t, "soak")
}

type sample struct {
	at                         time.Time
	rss, heap, goroutines, lag float64
}

// quarter averages the q-th quarter (0..3) of the samples, skipping failed scrapes.
func quarter(ss []sample, q int) sample {
	from, to := len(ss)*q/4, len(ss)*(q+1)/4
	var avg sample
	var n, nm float64
	for _, s := range ss[from:to] {
		avg.rss += s.rss
		n++
		if s.heap >= 0 {
			avg.heap += s.heap
			avg.goroutines += s.goroutines
			nm++
		}
	}
	if n > 0 {
		avg.rss /= n
	}
	if nm > 0 {
		avg.heap /= nm
		avg.goroutines /= nm
	} else {
		avg.heap, avg.goroutines = -1, -1
	}
	return avg
}

// rssBytes reads a process's resident set size from /proc.
func rssBytes(pid int) float64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64)
			return kb * 1024
		}
	}
	return 0
}

// writeSamples keeps the series as CSV beside the logs, for plotting.
func writeSamples(t testing.TB, dir string, samples map[string][]sample) {
	var b strings.Builder
	b.WriteString("component,unix_seconds,rss_bytes,heap_inuse_bytes,goroutines,ingest_lag_seconds\n")
	for name, ss := range samples {
		for _, s := range ss {
			fmt.Fprintf(&b, "%s,%d,%.0f,%.0f,%.0f,%.3f\n", name, s.at.Unix(), s.rss, s.heap, s.goroutines, s.lag)
		}
	}
	path := filepath.Join(dir, "soak.csv")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Errorf("journey: write %s: %v", path, err)
		return
	}
	t.Logf("samples in %s", path)
}

// num formats a figure, "n/a" for one that could not be read.
func num(v float64) string {
	if v < 0 {
		return "  n/a"
	}
	return fmt.Sprintf("%5.1f", v)
}

// firstLine squeezes an error onto one line of at most 300 bytes.
func firstLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + " ..."
	}
	return s
}
