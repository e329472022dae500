package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/procstat"
	"github.com/partnerstream/partnerstream/internal/testenv/chtest"
)

// Sizes of `make bench-conversions`: conversions per side and round, rounds, and clients.
const (
	benchConversions = 2000
	benchRounds      = 3
	benchClients     = 16
)

// BenchmarkRegisterConversion is `make bench-conversions`: conversions registered per second
// end to end (real HTTP on loopback with an API key, attribution from the signed click id and
// the link in Postgres, and the commit of the conversion, its commission and two outbox
// events) with 16 clients. The baseline, in the same run, is the same requests sent again:
// each is a repeat of its external id, answered 200 with the first conversion, which costs
// everything but the writes. The sides alternate for benchRounds rounds and the medians are
// compared, because the shared machine moves a single pass. CPU per conversion sums this
// process (clients and api) and Postgres.
func BenchmarkRegisterConversion(b *testing.B) {
	f := newConversionsFixture(b)
	base := f.serve(b)
	at := time.Now().Add(-time.Hour)
	rates := map[string][]float64{}
	cpu := map[string][]float64{}
	dbSize := func() (n int64) {
		if err := f.db.QueryRow(context.Background(), `SELECT pg_database_size(current_database())`).Scan(&n); err != nil {
			b.Fatal(err)
		}
		return n
	}
	sizeBefore := dbSize()
	b.ResetTimer()
	for round := range b.N * benchRounds {
		clicks := f.clicks(b, f.program, at, benchConversions)
		for _, side := range []struct {
			name   string
			status int
		}{{"new", http.StatusCreated}, {"repeat", http.StatusOK}} {
			self0, pg0, ch0 := procstat.Self(), postgresCPU(), chtest.ServerCPU()
			began := time.Now()
			f.registerAll(b, base, clicks, side.status)
			elapsed := time.Since(began)
			per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(len(clicks)) }
			self, pg, ch := per(procstat.Self()-self0), per(postgresCPU()-pg0), per(chtest.ServerCPU()-ch0)
			rates[side.name] = append(rates[side.name], float64(len(clicks))/elapsed.Seconds())
			cpu[side.name] = append(cpu[side.name], self+pg)
			b.Logf("round %d, %s conversions: %.0f/s; CPU µs per conversion %.0f (clients and api %.0f, Postgres %.0f; ClickHouse %.0f more)",
				round+1, side.name, rates[side.name][round], self+pg, self, pg, ch)
			if side.name == "new" {
				f.decideClicks(b, len(clicks))
			}
		}
	}
	b.StopTimer()
	var rows, events int
	_ = f.db.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM conversions), (SELECT count(*) FROM outbox)`).Scan(&rows, &events)
	if want := b.N * benchRounds * benchConversions; rows != want || events != 2*want {
		b.Fatalf("%d rows and %d events for %d conversions", rows, events, want)
	}
	// What a conversion costs Postgres's disk with its click, commission and outbox events
	// (for the sizing guide, docs/helm.md); deliveries add their own rows.
	_, _ = f.db.Exec(context.Background(), `CHECKPOINT`)
	perConversion := float64(dbSize()-sizeBefore) / float64(rows)
	b.ReportMetric(perConversion, "pg-bytes/conversion")
	created, repeated := median(rates["new"]), median(rates["repeat"])
	b.ReportMetric(created, "conversions/s")
	b.ReportMetric(repeated, "repeats/s")
	b.ReportMetric(created/repeated, "new/repeat")
	b.ReportMetric(median(cpu["new"]), "cpu-µs/conversion")
	b.ReportMetric(median(cpu["repeat"]), "cpu-µs/repeat")
	b.Logf("median of %d rounds of %d: %.0f conversions/s (%.0f CPU µs each), repeats %.0f/s (%.0f µs): %.2fx; Postgres grew %.0f bytes per conversion",
		benchRounds, benchConversions, created, median(cpu["new"]), repeated, median(cpu["repeat"]), created/repeated, perConversion)
}

// decideClicks runs the api's click loop (conversions.ClickRules) over the n conversions just
// registered, apart from registering them: its cost per conversion, in the log.
func (f *conversionsFixture) decideClicks(b *testing.B, n int) {
	self0, pg0, ch0 := procstat.Self(), postgresCPU(), chtest.ServerCPU()
	began := time.Now()
	settled := 0
	for {
		k, err := f.svc.DecideClicks(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if k == 0 {
			break
		}
		settled += k
	}
	if settled != n {
		b.Fatalf("the click loop settled %d of %d conversions", settled, n)
	}
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(n) }
	b.Logf("  the click loop over them: %.0f/s; CPU µs per conversion %.0f (api %.0f, Postgres %.0f, ClickHouse %.0f)",
		float64(n)/time.Since(began).Seconds(), per(procstat.Self()-self0)+per(postgresCPU()-pg0)+per(chtest.ServerCPU()-ch0),
		per(procstat.Self()-self0), per(postgresCPU()-pg0), per(chtest.ServerCPU()-ch0))
}

// registerAll registers a conversion for each click with benchClients clients at once.
func (f *conversionsFixture) registerAll(b *testing.B, base string, clicks []string, want int) {
	var wg sync.WaitGroup
	next := make(chan string)
	for range benchClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for clk := range next {
				if status, body := f.post(base, f.adv, fmt.Sprintf(`{"click_id": %q, "external_id": %q, "amount": "42.50"}`, clk, clk)); status != want {
					b.Errorf("register: %d %v", status, body)
				}
			}
		}()
	}
	for _, clk := range clicks {
		next <- clk
	}
	close(next)
	wg.Wait()
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// postgresCPU sums the CPU of the postmaster that hack/test.sh started under the worktree's
// .local and of its backends (which live as long as the pool's connections); zero when the
// tests use a server elsewhere.
func postgresCPU() time.Duration {
	if pid, ok := procstat.PIDFile(filepath.Join("..", "..", ".local", "postgres", "data", "postmaster.pid")); ok {
		return procstat.TreeCPU(pid)
	}
	return 0
}
