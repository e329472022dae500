package httpapi_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/ids"
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
// end to end (real HTTP on loopback with an API key, attribution, and the commit of the
// conversion, its commission and two outbox events in Postgres) with 16 clients, for signed
// click ids (attributed from the id and the link in Postgres) beside plain ids (looked up in
// ClickHouse's click_index), in the same run. The sides alternate for benchRounds rounds and
// the medians are compared, because the shared machine and ClickHouse's merges move a single
// pass. CPU per conversion sums this process (clients and api), Postgres and ClickHouse.
func BenchmarkRegisterConversion(b *testing.B) {
	f := newConversionsFixture(b)
	base := f.serve(b)
	link := f.link(b, f.program)
	at := time.Now().Add(-time.Hour)
	sides := []struct {
		name  string
		click func(n int) []string
	}{
		{"plain", func(n int) []string { return f.clicks(b, f.program, at, n) }},
		{"signed", func(n int) []string {
			out := make([]string, n)
			for i := range out {
				var err error
				if out[i], err = f.keys.Mint(link, at); err != nil {
					b.Fatal(err)
				}
			}
			return out
		}},
	}
	rates := map[string][]float64{}
	cpu := map[string][]float64{}
	b.ResetTimer()
	for round := range b.N * benchRounds {
		for _, side := range sides {
			clicks := side.click(benchConversions)
			self0, pg0, ch0 := procstat.Self(), postgresCPU(), chtest.ServerCPU()
			began := time.Now()
			f.registerAll(b, base, clicks)
			elapsed := time.Since(began)
			per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(len(clicks)) }
			self, pg, ch := per(procstat.Self()-self0), per(postgresCPU()-pg0), per(chtest.ServerCPU()-ch0)
			rates[side.name] = append(rates[side.name], float64(len(clicks))/elapsed.Seconds())
			cpu[side.name] = append(cpu[side.name], self+pg+ch)
			b.Logf("round %d, %s click ids: %.0f conversions/s; CPU µs per conversion %.0f (clients and api %.0f, Postgres %.0f, ClickHouse %.0f)",
				round+1, side.name, rates[side.name][round], self+pg+ch, self, pg, ch)
		}
	}
	b.StopTimer()
	var rows, events int
	_ = f.db.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM conversions), (SELECT count(*) FROM outbox)`).Scan(&rows, &events)
	if want := b.N * benchRounds * len(sides) * benchConversions; rows != want || events != 2*want {
		b.Fatalf("%d rows and %d events for %d conversions", rows, events, want)
	}
	signed, plain := median(rates["signed"]), median(rates["plain"])
	b.ReportMetric(signed, "signed-conversions/s")
	b.ReportMetric(plain, "plain-conversions/s")
	b.ReportMetric(signed/plain, "signed/plain")
	b.ReportMetric(median(cpu["signed"]), "signed-cpu-µs/conversion")
	b.ReportMetric(median(cpu["plain"]), "plain-cpu-µs/conversion")
	b.Logf("median of %d rounds of %d: signed click ids %.0f conversions/s (%.0f CPU µs each), plain ids through ClickHouse %.0f/s (%.0f µs): %.2fx",
		benchRounds, benchConversions, signed, median(cpu["signed"]), plain, median(cpu["plain"]), signed/plain)
}

// link inserts a tracking link of program for the fixture's affiliate.
func (f *conversionsFixture) link(t testing.TB, program string) string {
	t.Helper()
	id := ids.New(ids.Link)
	if _, err := f.db.Exec(context.Background(), `INSERT INTO tracking_links (id, code, partnership_id, program_id, affiliate_id, advertiser_id)
		SELECT $1, $2, id, program_id, affiliate_id, advertiser_id FROM partnerships WHERE program_id = $3 AND affiliate_id = $4`,
		id, strings.ToUpper(id[len(id)-12:]), program, f.affID); err != nil {
		t.Fatal(err)
	}
	return id
}

// registerAll registers a conversion for each click with benchClients clients at once.
func (f *conversionsFixture) registerAll(b *testing.B, base string, clicks []string) {
	var wg sync.WaitGroup
	next := make(chan string)
	for range benchClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for clk := range next {
				if status, body := f.post(base, f.adv, fmt.Sprintf(`{"click_id": %q, "external_id": %q, "amount": "42.50"}`, clk, clk)); status != 201 {
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
