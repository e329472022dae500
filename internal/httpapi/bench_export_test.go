package httpapi_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/conversions"
	"github.com/partnerstream/partnerstream/internal/procstat"
	"github.com/partnerstream/partnerstream/internal/stats"
)

const benchExportRows = 1_000_000

// benchExportStart is the occurred_at of the oldest row; row i occurred i seconds later.
var benchExportStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// BenchmarkExportMemory is `make bench-export`: an advertiser with 1,000,000 conversions
// exports the newest 10,000, 100,000 and all of them as CSV over real HTTP on loopback, read
// by a client in the same process that counts the rows. While each export runs, the heap in
// use and the process's RSS are sampled; it reports their peak growth over the idle process
// before the export, rows per second and CPU µs per row, and, as the same-run baselines, the
// peak heap against the 10,000-row export's (flat memory: about 1) and the CPU against
// reading the same rows from Postgres with the cursor alone (what CSV and HTTP add).
func BenchmarkExportMemory(b *testing.B) {
	f := newConversionsFixture(b)
	f.srv.MountExports(f.svc, stats.New(f.ch, f.chDB, stats.Options{}))
	seedExportRows(b, f)
	base := f.serve(b)
	var heap10k float64
	for _, n := range []int{10_000, 100_000, benchExportRows} {
		from := benchExportStart.Add(time.Duration(benchExportRows-n) * time.Second).Format(time.RFC3339)
		b.Run(strconv.Itoa(n)+"-rows", func(b *testing.B) {
			for range b.N {
				drainCPU := cpuOf(func() { drainExportRows(b, f.svc, f.advID, from, n) })
				var got, size int
				var firstByte time.Duration
				m := measure(func() {
					got, size, firstByte = downloadRows(b, base+"/api/v1/conversions.csv?from="+url.QueryEscape(from), f.adv)
				})
				if got != n {
					b.Fatalf("exported %d rows, want %d", got, n)
				}
				if n == 10_000 {
					heap10k = m.peakHeapMB
				}
				b.ReportMetric(float64(n)/m.wall.Seconds(), "rows/s")
				b.ReportMetric(float64(firstByte.Microseconds())/1000, "first-byte-ms")
				b.ReportMetric(float64(size)/(1<<20), "file-MB")
				b.ReportMetric(float64(m.cpu.Microseconds())/float64(n), "cpu-µs/row")
				b.ReportMetric(m.peakHeapMB, "peak-heap-MB")
				b.ReportMetric(m.peakRSSMB, "peak-rss-MB")
				b.ReportMetric(m.peakHeapMB/heap10k, "heap-vs-10k")
				b.ReportMetric(float64(m.cpu)/float64(drainCPU), "cpu-vs-cursor")
			}
		})
	}
}

// seedExportRows inserts benchExportRows conversions of the fixture's program, each with its
// commission, in Postgres, with text that quotes and guards do work on.
func seedExportRows(b *testing.B, f *conversionsFixture) {
	b.Helper()
	ctx := context.Background()
	start := time.Now()
	if _, err := f.db.Exec(ctx, `INSERT INTO conversions (id, program_id, advertiser_id, affiliate_id, link_id, click_id, sub1,
			clicked_at, external_id, type, amount, currency, occurred_at, source, created_at)
		SELECT 'cnv_' || lpad(i::text, 26, '0'), $1, $2, $3, 'lnk_bench', 'clk_' || lpad(i::text, 26, '0'),
			CASE WHEN i % 10 = 0 THEN '=cmd' ELSE 'newsletter, spring' END, $4::timestamptz + i * interval '1 second',
			'order-' || i, 'sale', 1000 + i % 5000, 'EUR', $4::timestamptz + i * interval '1 second', 'api', now()
		FROM generate_series(0, $5 - 1) AS i`, f.program, f.advID, f.affID, benchExportStart, benchExportRows); err != nil {
		b.Fatal(err)
	}
	if _, err := f.db.Exec(ctx, `INSERT INTO commissions (id, conversion_id, program_id, advertiser_id, affiliate_id, occurred_at,
			amount, currency, rule_type, rule_value, status, version, created_at, updated_at)
		SELECT 'cms_' || substr(id, 5), id, program_id, advertiser_id, affiliate_id, occurred_at, amount / 10, currency,
			'percent', 1000, 'pending', 1, created_at, created_at FROM conversions WHERE program_id = $1`, f.program); err != nil {
		b.Fatal(err)
	}
	if _, err := f.db.Exec(ctx, `ANALYZE conversions; ANALYZE commissions`); err != nil {
		b.Fatal(err)
	}
	b.Logf("seeded %d conversions in %s", benchExportRows, time.Since(start).Round(time.Second))
}

// drainExportRows reads the rows with the cursor alone: the baseline.
func drainExportRows(b *testing.B, svc *conversions.Service, advertiser, from string, want int) {
	b.Helper()
	t, _ := time.Parse(time.RFC3339, from)
	rows, err := svc.ConversionRows(context.Background(), conversions.Viewer{CompanyID: advertiser}, conversions.Filter{From: t})
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
	}
	if rows.Err() != nil || n != want {
		b.Fatalf("drained %d rows, %v; want %d", n, rows.Err(), want)
	}
}

// downloadRows GETs an export and counts its rows (lines after the header); it also returns
// the file's size and how long its first bytes took to arrive.
func downloadRows(b *testing.B, u, key string) (rows, size int, firstByte time.Duration) {
	b.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	req.Header.Set("x-api-key", key)
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		body, _ := io.ReadAll(resp.Body)
		b.Fatalf("GET %s: %d %s", u, resp.StatusCode, body)
	}
	lines := 0
	buf := make([]byte, 64<<10)
	r := bufio.NewReaderSize(resp.Body, 64<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 && firstByte == 0 {
			firstByte = time.Since(start)
		}
		lines += bytes.Count(buf[:n], []byte{'\n'})
		size += n
		if err == io.EOF {
			return lines - 1, size, firstByte
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}

type measurement struct {
	wall, cpu             time.Duration
	peakHeapMB, peakRSSMB float64
}

// measure runs fn and samples the heap in use and RSS meanwhile, every 10 ms; the peaks are
// growths over the values right before (after a GC).
func measure(fn func()) measurement {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heap0, rss0 := ms.HeapInuse, procstat.RSS(os.Getpid())
	peakHeap, peakRSS := heap0, rss0
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			runtime.ReadMemStats(&ms)
			peakHeap, peakRSS = max(peakHeap, ms.HeapInuse), max(peakRSS, procstat.RSS(os.Getpid()))
		}
	})
	start := time.Now()
	cpu := cpuOf(fn)
	wall := time.Since(start)
	close(stop)
	wg.Wait()
	mb := func(v uint64) float64 { return float64(v) / (1 << 20) }
	return measurement{wall: wall, cpu: cpu, peakHeapMB: mb(peakHeap - heap0), peakRSSMB: mb(peakRSS - min(rss0, peakRSS))}
}

// cpuOf is the process's user and system CPU time spent while fn ran.
func cpuOf(fn func()) time.Duration {
	before := procstat.Self()
	fn()
	return procstat.Self() - before
}
