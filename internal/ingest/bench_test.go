package ingest

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/enrich"
	"github.com/partnerstream/partnerstream/internal/enrich/enrichtest"
	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/kafka"
	"github.com/partnerstream/partnerstream/internal/procstat"
	"github.com/partnerstream/partnerstream/internal/stats"
	"github.com/partnerstream/partnerstream/internal/testenv"
	"github.com/partnerstream/partnerstream/internal/testenv/chtest"
)

// benchEvents is how many clicks the throughput benchmark moves.
const benchEvents = 300_000

// benchClick is a click as the redirect records it, with realistic field sizes and a mix of
// inputs for enrichment like a busy program's: 20,000 visitors, each with an address of its
// own (public IPv4 in RIR-assigned blocks, one in ten IPv6) and one of benchUserAgents (the
// major browsers, phones, tablets and bots, in several versions: 240 distinct), a referrer
// from one of 2,100 pages of 300 sites (none for a third of clicks), and the landing URL of
// its link (3,000 distinct, with UTM parameters). So a fetch of 20,000 clicks meets a few
// hundred new user agents and thousands of new addresses at the start, and repeats after.
func benchClick(i int, at time.Time) events.Click {
	v := i % 20000
	link, aff := i%3000, i%1000
	c := events.Click{
		ClickID: fmt.Sprintf("clk_%026d", i), OccurredAt: at, LinkID: fmt.Sprintf("lnk_%026d", link),
		ProgramID: fmt.Sprintf("prg_%026d", i%20), AffiliateID: fmt.Sprintf("co_%026d", aff), AdvertiserID: "co_bench",
		Sub1: fmt.Sprintf("s%d", i%5), IP: benchAddress(v), Country: "",
		LandingURL: fmt.Sprintf("https://shop%d.example/landing/%d?utm_source=aff%d&utm_medium=cpa&utm_campaign=spring-%d", link%20, link, aff, link%50),
		UserAgent:  benchUserAgents[v%len(benchUserAgents)], Visitor: fmt.Sprintf("v%021d", v),
	}
	if v%3 != 0 {
		c.Referrer = fmt.Sprintf("https://www.site%d.example.co.uk/reviews/%d", v%300, i%7)
	}
	return c
}

// benchFirstOctets are /8s the RIRs assign (no private, reserved or multicast ones).
var benchFirstOctets = []int{1, 5, 14, 23, 24, 27, 31, 36, 37, 41, 46, 49, 50, 58, 62, 64, 66, 68, 70, 72, 77, 78, 80, 81, 82,
	84, 86, 88, 90, 92, 94, 98, 101, 102, 104, 105, 109, 110, 112, 114, 116, 118, 121, 151, 154, 176, 177, 178, 179, 180,
	181, 185, 186, 187, 188, 189, 190, 193, 195, 196, 197, 200, 201, 202, 203, 210, 212, 213, 217, 218, 220, 222}

func benchAddress(v int) string {
	h := uint32(v) * 2654435761 // spreads neighbouring visitors over the space
	if v%10 == 9 {
		return fmt.Sprintf("2a0%d:%x:%x::%x", h%10, h>>16, h&0xffff, v)
	}
	return fmt.Sprintf("%d.%d.%d.%d", benchFirstOctets[int(h%uint32(len(benchFirstOctets)))], h>>8&0xff, h>>16&0xff, 1+h>>24%254)
}

// benchASNetworks are the networks of the ASN database the benchmarks generate (there is no
// openly licensed one in MaxMind's format to ship): a /16 in each of the first 64 of every
// /8 of benchFirstOctets, a quarter of the benchmark's IPv4 addresses, each its own AS.
func benchASNetworks() (nets []enrichtest.Network) {
	for i, first := range benchFirstOctets {
		for second := range 64 {
			n := uint32(i*64 + second + 1)
			nets = append(nets, enrichtest.Network{CIDR: fmt.Sprintf("%d.%d.0.0/16", first, second), ASN: 64512 + n%1000, Org: fmt.Sprintf("Example Networks %d", n)})
		}
	}
	return nets
}

// benchUserAgents are real user agents of the major browsers and bots, each in a few versions.
var benchUserAgents = func() (uas []string) {
	templates := []string{
		"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/%d.0.0.0 Safari/537.36",
		"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/%d.0.0.0 Safari/537.36 Edg/%[1]d.0.0.0",
		"Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:%d.0) Gecko/20100101 Firefox/%[1]d.0",
		"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.%d Safari/605.1.15",
		"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/%d.0.0.0 Safari/537.36",
		"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/%d.0.0.0 Safari/537.36",
		"Mozilla/5.0 (iPhone; CPU iPhone OS 17_%d like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.0 Mobile/15E148 Safari/604.1",
		"Mozilla/5.0 (iPhone; CPU iPhone OS 17_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/%d.0.6778.73 Mobile/15E148 Safari/604.1",
		"Mozilla/5.0 (iPad; CPU OS 17_%d like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.6 Mobile/15E148 Safari/604.1",
		"Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/%d.0.0.0 Mobile Safari/537.36",
		"Mozilla/5.0 (Linux; Android 14; SAMSUNG SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/%d.0 Chrome/122.0.0.0 Mobile Safari/537.36",
		"Mozilla/5.0 (Linux; Android 13; SM-X700) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/%d.0.0.0 Safari/537.36",
		"Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/%d.0.6778.39 Mobile Safari/537.36",
		"Mozilla/5.0 (compatible; Googlebot/2.%d; +http://www.google.com/bot.html)",
		"Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; bingbot/2.%d; +http://www.bing.com/bingbot.htm) Chrome/116.0.1938.76 Safari/537.36",
		"facebookexternalhit/1.%d (+http://www.facebook.com/externalhit_uatext.php)",
	}
	for _, t := range templates {
		for v := range 15 {
			uas = append(uas, fmt.Sprintf(t, 117+v))
		}
	}
	return uas
}()

// benchEnrichOptions are the benchmarks' enrichment: the image's country database and a
// generated ASN database.
func benchEnrichOptions(b *testing.B) enrich.Options {
	return enrich.Options{GeoIPDB: testenv.Require(b, testenv.EnvGeoIPDB), ASNDB: enrichtest.ASN(b, benchASNetworks()...)}
}

// openBenchDB is a migrated database of its own.
func openBenchDB(b *testing.B) *env {
	b.Helper()
	addr, db, conn := chtest.Migrated(b)
	return &env{addr: addr, db: db, conn: conn}
}

// BenchmarkIngestThroughput is part of `make bench-ingest`: events per second from the topic
// to queryable rows (clicks and rollups), beside clickhouse-go's raw batch insert of the same
// rows into the same schema in the same run, in batches of the same size and built the same
// (fastest) way, column by column. Both pay for the materialized views; only ingest also
// fetches, decodes and deduplicates, on the same two cores as ClickHouse and, here, the
// embedded Kafka broker. The ingester runs in a process of its own, so its CPU time per event
// is ingest's alone; the raw insert's is this process's while it inserts.
func BenchmarkIngestThroughput(b *testing.B) {
	ctx := context.Background()
	at := time.Now().UTC().Truncate(time.Second)
	clicks := make([]clickRecord, benchEvents)
	msgs := make([]kafka.Record, benchEvents)
	// The raw insert stores the rows ingest stores: enriched the same way.
	enr, err := enrich.New(benchEnrichOptions(b))
	if err != nil {
		b.Fatal(err)
	}
	defer enr.Close()
	session := enr.NewSession()
	for i := range clicks {
		c := benchClick(i, at)
		clicks[i] = newClickRecord(Click{Click: c, Enriched: session.Enrich(c.IP, c.UserAgent, c.Referrer, c.LandingURL),
			Partition: int32(i % 6), Offset: int64(i / 6)})
		body, _ := json.Marshal(c)
		msgs[i] = kafka.Record{Key: []byte(c.Visitor), Value: body}
	}

	// ClickHouse's background merges make one pass of either side swing by half on two
	// cores, so the sides alternate for benchRounds and the medians are compared.
	var rawRates, ingestRates, ratios, rawCPU, ingestCPU, brokerCPU, rawCH, ingestCH, rawBusy, ingestBusy []float64
	var rawCHMerged, ingestCHMerged []float64
	var memory benchMemories
	for range b.N * benchRounds {
		// The baseline: the same rows, already in memory, straight into ClickHouse.
		raw := openBenchDB(b)
		quiesce(b)
		began, m := time.Now(), startMeter()
		for off := 0; off < len(clicks); off += DefaultBatchSize {
			part := clicks[off:min(off+DefaultBatchSize, len(clicks))]
			block := newClickBlock(len(part))
			for i := range part {
				block.add(&part[i])
			}
			if err := block.insert(ctx, raw.conn, raw.db); err != nil {
				b.Fatal(err)
			}
		}
		rawRates = append(rawRates, float64(len(clicks))/time.Since(began).Seconds())
		self, ch, busy := m.stop(len(clicks))
		rawCPU, rawCH, rawBusy = append(rawCPU, self), append(rawCH, ch), append(rawBusy, busy)
		rawCHMerged = append(rawCHMerged, m.merged(b, len(clicks)))

		// Ingest: the same clicks on the topic, to queryable rows.
		e := newEnv(b)
		e.produce(b, kafka.TopicClicks, msgs)
		quiesce(b)
		ing := e.startBenchIngester(b)
		ing.waitReceived(b)
		first, m, ingCPU := time.Now(), startMeter(), ing.cpu(b)
		ing.waitStored(b, len(clicks))
		ingestRates = append(ingestRates, float64(len(clicks))/time.Since(first).Seconds())
		ingestCPU = append(ingestCPU, perEvent(ing.cpu(b)-ingCPU, len(clicks)))
		self, ch, busy = m.stop(len(clicks))
		if got := e.count(b, "SELECT sum(clicks) FROM "+e.db+".clicks_daily"); got != uint64(len(clicks)) {
			b.Fatalf("the rollup counts %d clicks, want %d", got, len(clicks))
		}
		brokerCPU, ingestCH, ingestBusy = append(brokerCPU, self), append(ingestCH, ch), append(ingestBusy, busy)
		originRows := e.originRows(b)
		ingestCHMerged = append(ingestCHMerged, m.merged(b, len(clicks)))
		b.Logf("round %d: the rollups by origin hold %.2f rows per click as inserted, %.2f once merged", len(ingestCPU),
			float64(originRows)/float64(len(clicks)), float64(e.originRows(b))/float64(len(clicks)))
		ing.stop(b)
		memory.add(ing.memory, len(clicks))
		r := len(rawRates) - 1
		ratios = append(ratios, ingestRates[r]/rawRates[r])
		b.Logf("round %d: raw batch insert %.0f rows/s (%.2f µs CPU/row, ClickHouse %.2f µs/row, %.2f with the merges after, cores %.0f%% busy); "+
			"ingest %.0f events/s (%.0f%%), ingester %.2f µs CPU/event (%s), broker %.2f µs/event, ClickHouse %.2f µs/event, %.2f with the merges after, cores %.0f%% busy",
			r+1, rawRates[r], rawCPU[r], rawCH[r], rawCHMerged[r], rawBusy[r], ingestRates[r], 100*ratios[r], ingestCPU[r], memory.round(r), brokerCPU[r],
			ingestCH[r], ingestCHMerged[r], ingestBusy[r])
	}
	memory.report(b, "ingest-")
	rawRate, ingestRate := median(rawRates), median(ingestRates)
	b.ReportMetric(rawRate, "raw-rows/s")
	b.ReportMetric(ingestRate, "ingest-events/s")
	b.ReportMetric(100*median(ratios), "%-of-raw")
	b.ReportMetric(median(ingestCPU), "ingest-cpu-µs/event")
	b.ReportMetric(median(rawCPU), "raw-cpu-µs/row")
	b.ReportMetric(median(ingestCH), "ingest-clickhouse-cpu-µs/event")
	b.ReportMetric(median(rawCH), "raw-clickhouse-cpu-µs/row")
	b.Logf("%d clicks, median of %d rounds: raw batch insert %.0f rows/s; ingest %.0f events/s from the first fetched message; "+
		"ingest/raw per round, median %.0f%%; ingester memory (medians): %s; CPU: ingester %.2f µs/event, raw insert %.2f µs/row, broker %.2f µs/event; "+
		"ClickHouse server: %.2f µs/event for ingest, %.2f µs/row for the raw insert (%.2f and %.2f with the merges they leave); cores busy: %.0f%% during ingest, %.0f%% during the raw insert (load average %s)",
		len(clicks), len(rawRates), rawRate, ingestRate, 100*median(ratios), memory.medians(), median(ingestCPU), median(rawCPU), median(brokerCPU),
		median(ingestCH), median(rawCH), median(ingestCHMerged), median(rawCHMerged), median(ingestBusy), median(rawBusy), procstat.LoadAverage())
}

// benchMemories gathers the rounds' benchMemory of ingesters, in MiB, and allocations in bytes
// per event.
type benchMemories struct {
	peakRSS, anon, file, mapped, heap, live, kept, alloc []float64
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }

func (ms *benchMemories) add(m benchMemory, events int) {
	ms.peakRSS, ms.anon, ms.file = append(ms.peakRSS, mib(m.PeakRSS)), append(ms.anon, mib(m.PeakRSSAnon)), append(ms.file, mib(m.PeakRSSFile))
	ms.mapped, ms.heap, ms.live = append(ms.mapped, mib(m.MappedDBs)), append(ms.heap, mib(m.PeakHeap)), append(ms.live, mib(m.PeakLive))
	ms.kept, ms.alloc = append(ms.kept, mib(m.Kept)), append(ms.alloc, float64(m.Allocated)/float64(events))
}

const memoryFormat = "peak RSS %.0f MiB (anonymous %.0f, files %.0f, of which the databases %.1f at the end), " +
	"peak heap %.0f MiB (live after a collection %.0f, kept at the end %.1f), %.0f bytes allocated per event"

func (ms *benchMemories) round(r int) string {
	return fmt.Sprintf(memoryFormat, ms.peakRSS[r], ms.anon[r], ms.file[r], ms.mapped[r], ms.heap[r], ms.live[r], ms.kept[r], ms.alloc[r])
}

func (ms *benchMemories) medians() string {
	return fmt.Sprintf(memoryFormat, median(ms.peakRSS), median(ms.anon), median(ms.file), median(ms.mapped), median(ms.heap),
		median(ms.live), median(ms.kept), median(ms.alloc))
}

func (ms *benchMemories) report(b *testing.B, prefix string) {
	b.ReportMetric(median(ms.peakRSS), prefix+"peak-rss-MiB")
	b.ReportMetric(median(ms.heap), prefix+"peak-heap-MiB")
	b.ReportMetric(median(ms.alloc), prefix+"alloc-B/event")
}

// BenchmarkIngestMemory is part of `make bench-ingest`: the ingester's memory draining
// benchEvents clicks with enrichment as the image ships it (its country and ASN databases)
// and without enrichment, alternating for benchRounds, each on a topic and database of its
// own: peak RSS and how it splits between anonymous memory and mapped files (the binary, the
// databases), the heap's peak and live size, what stays after the drain, and allocations per
// event. INGEST_BENCH_MEMPROFILE=<file> writes each side's heap profile to <file>.<side> as
// its ingester stops (the last round's).
func BenchmarkIngestMemory(b *testing.B) {
	at := time.Now().UTC().Truncate(time.Second)
	msgs := make([]kafka.Record, benchEvents)
	for i := range msgs {
		c := benchClick(i, at)
		body, _ := json.Marshal(c)
		msgs[i] = kafka.Record{Key: []byte(c.Visitor), Value: body}
	}
	image := enrich.Options{GeoIPDB: testenv.Require(b, testenv.EnvGeoIPDB), ASNDB: testenv.Require(b, testenv.EnvASNDB)}
	sides := []struct {
		name string
		cfg  benchChild
	}{{"enriched", benchChild{Enrich: image}}, {"unenriched", benchChild{NoEnrich: true}}}
	memory := make([]benchMemories, len(sides))
	for range b.N * benchRounds {
		for s, side := range sides {
			e := newEnv(b)
			e.produce(b, kafka.TopicClicks, msgs)
			quiesce(b)
			cfg := side.cfg
			if p := os.Getenv(envBenchMemProfile); p != "" {
				cfg.MemProfile = p + "." + side.name
			}
			ing := e.startBenchIngesterWith(b, cfg)
			ing.waitReceived(b)
			ing.waitStored(b, len(msgs))
			ing.stop(b)
			memory[s].add(ing.memory, len(msgs))
			b.Logf("round %d, %s: %s", len(memory[s].peakRSS), side.name, memory[s].round(len(memory[s].peakRSS)-1))
		}
	}
	for s, side := range sides {
		memory[s].report(b, side.name+"-")
		b.Logf("%s, medians of %d rounds: %s", side.name, len(memory[s].peakRSS), memory[s].medians())
	}
}

// originRows is how many rows the clicks' rollups by origin hold (migrations 0012, 0013).
func (e *env) originRows(b *testing.B) uint64 {
	return e.count(b, "SELECT count() FROM "+e.db+".clicks_origin_daily") + e.count(b, "SELECT count() FROM "+e.db+".clicks_origin_small_daily")
}

// quiesce waits until ClickHouse has finished the background merges of the side before, so
// that each side's accounting holds its own work (and what its own inserts start).
func quiesce(b *testing.B) {
	b.Helper()
	const window = 250 * time.Millisecond
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		cpu := chtest.ServerCPU()
		time.Sleep(window)
		if chtest.ServerCPU()-cpu <= window/20 {
			return
		}
	}
	b.Log("ClickHouse stayed busy for 20s; measuring anyway")
}

// meter accounts one side of the throughput benchmark: this process's CPU time, the
// ClickHouse server's, and how busy all of the machine's cores were (a side that leaves
// cores idle is stalling, not short of CPU).
type meter struct {
	self, ch, busy, total time.Duration
}

func startMeter() meter {
	busy, total := procstat.Machine()
	return meter{self: procstat.Self(), ch: chtest.ServerCPU(), busy: busy, total: total}
}

// stop returns this process's and ClickHouse's CPU µs per event, and the percentage of the
// machine's cores that were busy.
func (m meter) stop(events int) (self, ch, busyPercent float64) {
	busy, total := procstat.Machine()
	if total > m.total {
		busyPercent = 100 * float64(busy-m.busy) / float64(total-m.total)
	}
	return perEvent(procstat.Self()-m.self, events), perEvent(chtest.ServerCPU()-m.ch, events), busyPercent
}

// merged waits for ClickHouse's merges to finish and returns its CPU µs per event since the
// meter started: all the work a side caused, where stop has only what fell within it.
func (m meter) merged(b *testing.B, events int) float64 {
	quiesce(b)
	return perEvent(chtest.ServerCPU()-m.ch, events)
}

// BenchmarkIngestSteady is part of `make bench-ingest`: ingest at its defaults reading a live
// topic at a steady rate, as in production, rather than draining a backlog. It reports the
// ingester's CPU time per event, from just before the first click to the last one queryable:
// what the fetch settings are compared by (INGEST_BENCH_FETCH_MIN_BYTES,
// INGEST_BENCH_FETCH_MAX_WAIT), since a fetch answered with one message costs about as much
// as one answered with hundreds.
func BenchmarkIngestSteady(b *testing.B) {
	const (
		rate     = 3000 // clicks per second
		duration = 20 * time.Second
		tick     = 10 * time.Millisecond
	)
	ctx := context.Background()
	for range b.N {
		e := newEnv(b)
		ing := e.startBenchIngester(b)
		w := kafka.NewProducer(e.kafka, kafka.TopicClicks, kafka.ProducerOptions{})
		at := time.Now().UTC()
		produce := func(from, n int) {
			msgs := make([]kafka.Record, n)
			for i := range msgs {
				c := benchClick(from+i, at)
				body, _ := json.Marshal(c)
				msgs[i] = kafka.Record{Key: []byte(c.Visitor), Value: body}
			}
			if err := kafka.FirstError(w.Produce(ctx, msgs)); err != nil {
				b.Error(err)
			}
		}
		// Warm up: the group has joined once a first click is visible.
		produce(-1, 1)
		query := "SELECT count() FROM " + e.db + ".clicks"
		for e.count(b, query) == 0 {
			time.Sleep(10 * time.Millisecond)
		}

		n := int(duration/tick) * (rate * int(tick) / int(time.Second))
		began, cpu, ingCPU := time.Now(), procstat.Self(), ing.cpu(b)
		t := time.NewTicker(tick)
		for i := 0; i < n; i += rate * int(tick) / int(time.Second) {
			<-t.C
			produce(i, rate*int(tick)/int(time.Second))
		}
		t.Stop()
		for e.count(b, query) < uint64(n+1) {
			time.Sleep(10 * time.Millisecond)
		}
		elapsed := time.Since(began)
		cpuPerEvent, brokerPerEvent := perEvent(ing.cpu(b)-ingCPU, n), perEvent(procstat.Self()-cpu, n)
		w.Close()
		ing.stop(b)
		b.ReportMetric(cpuPerEvent, "ingest-cpu-µs/event")
		b.ReportMetric(brokerPerEvent, "broker-producer-cpu-µs/event")
		b.Logf("%d clicks at %d/s in %s: ingester %.2f µs CPU/event (%.1f%% of a core); broker and producer %.2f µs/event",
			n, rate, elapsed.Round(time.Millisecond), cpuPerEvent, 100*cpuPerEvent*rate/1e6, brokerPerEvent)
	}
}

const benchRounds = 3

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkClickToVisible is the last part of `make bench-ingest`: clicks produced at a
// steady rate with ingest running at its defaults (10,000 messages or 1 s per batch), each on
// a link of its own, and the stats polled until each link shows its click. It reports the
// latency from the produce call to the click counting in the stats.
func BenchmarkClickToVisible(b *testing.B) {
	const (
		rate     = 200 // clicks per second
		duration = 15 * time.Second
		poll     = 25 * time.Millisecond
	)
	ctx := context.Background()
	for range b.N {
		e := newEnv(b)
		stop := testenv.Run(b, e.service(b, benchFetchOptions(b)))
		q := stats.New(e.conn, e.db, stats.Options{})
		scope := stats.Scope{CompanyID: "co_bench", Kind: identity.Advertiser}
		w := kafka.NewProducer(e.kafka, kafka.TopicClicks, kafka.ProducerOptions{})

		// Warm up: the group has joined once a first click is visible.
		warm := benchClick(-1, time.Now().UTC())
		body, _ := json.Marshal(warm)
		if err := kafka.FirstError(w.Produce(ctx, []kafka.Record{{Key: []byte(warm.Visitor), Value: body}})); err != nil {
			b.Fatal(err)
		}
		for e.count(b, "SELECT count() FROM "+e.db+".clicks") == 0 {
			time.Sleep(poll)
		}

		n := int(duration.Seconds()) * rate
		var mu sync.Mutex
		produced := make(map[string]time.Time, n)
		go func() {
			tick := time.NewTicker(time.Second / rate)
			defer tick.Stop()
			for i := range n {
				<-tick.C
				c := benchClick(i, time.Now().UTC())
				c.LinkID = fmt.Sprintf("lnk_visible_%06d", i)
				body, _ := json.Marshal(c)
				t := time.Now()
				if err := kafka.FirstError(w.Produce(ctx, []kafka.Record{{Key: []byte(c.Visitor), Value: body}})); err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				produced[c.LinkID] = t
				mu.Unlock()
			}
		}()
		seen := map[string]bool{}
		var latencies []time.Duration
		deadline := time.Now().Add(duration + 30*time.Second)
		for len(latencies) < n && time.Now().Before(deadline) {
			rows, err := q.Query(ctx, scope, stats.Params{GroupBy: stats.Link})
			if err != nil {
				b.Fatal(err)
			}
			now := time.Now()
			mu.Lock()
			for _, r := range rows {
				if t, ok := produced[r.LinkID]; ok && !seen[r.LinkID] && r.Clicks > 0 {
					seen[r.LinkID] = true
					latencies = append(latencies, now.Sub(t))
				}
			}
			mu.Unlock()
			time.Sleep(poll)
		}
		w.Close()
		stop()
		if len(latencies) < n {
			b.Fatalf("%d of %d clicks became visible", len(latencies), n)
		}
		slices.Sort(latencies)
		p50, p95, p99 := latencies[n/2], latencies[n*95/100], latencies[n*99/100]
		b.ReportMetric(float64(p50.Milliseconds()), "p50-ms")
		b.ReportMetric(float64(p95.Milliseconds()), "p95-ms")
		b.ReportMetric(float64(p99.Milliseconds()), "p99-ms")
		b.Logf("%d clicks at %d/s: click to visible in stats p50 %s, p95 %s, p99 %s, max %s (polling every %s)",
			n, rate, p50, p95, p99, latencies[n-1], poll)
	}
}

// BenchmarkClickBlock is a chunk of a batch's clicks into the columns of its insert: what
// the block costs ingest per click, without ClickHouse.
func BenchmarkClickBlock(b *testing.B) {
	recs := make([]clickRecord, insertChunk)
	for i := range recs {
		recs[i] = newClickRecord(Click{Click: benchClick(i, time.Now().UTC())})
	}
	block := newClickBlock(len(recs))
	for b.Loop() {
		block.reset()
		for i := range recs {
			block.add(&recs[i])
		}
		block.chunk(block.recs)
	}
}

// BenchmarkClickBytesOnDisk is what a click costs ClickHouse's disk once merged, for the
// sizing guide (docs/helm.md): 200,000 clicks with the variety of real traffic (addresses,
// browsers, referrers, sub-ids, visitors that repeat) written as ingest writes them, the tables
// merged, and the bytes of each table that clicks feed divided by the clicks.
func BenchmarkClickBytesOnDisk(b *testing.B) {
	const n = 200_000
	ctx := context.Background()
	browsers := []string{
		"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
		"Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1",
		"Mozilla/5.0 (Linux; Android 14; SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36",
		"Mozilla/5.0 (Macintosh; Intel Mac OS X 14_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15",
		"Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0",
	}
	for range b.N {
		e := openBenchDB(b)
		w := NewWriter(e.conn, e.db)
		r := rand.New(rand.NewPCG(1, 2))
		at := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)
		clicks := make([]Click, 0, 10_000)
		for i := range n {
			visitor := r.IntN(n / 3)
			c := events.Click{
				ClickID: fmt.Sprintf("clk_%060d", r.Uint64()), Visitor: fmt.Sprintf("%022x", uint64(visitor)*0x9E3779B97F4A7C15),
				OccurredAt: at.Add(time.Duration(i) * 24 * time.Hour / n), LinkID: fmt.Sprintf("lnk_%026d", r.IntN(3000)),
				ProgramID: fmt.Sprintf("prg_%026d", r.IntN(20)), AffiliateID: fmt.Sprintf("co_%026d", r.IntN(1000)), AdvertiserID: "co_bench",
				Sub1: fmt.Sprintf("campaign-%d", r.IntN(200)), IP: fmt.Sprintf("%d.%d.%d.%d", 1+visitor%223, visitor/223%256, visitor/57000%256, visitor%251),
				UserAgent: browsers[visitor%len(browsers)], Referrer: fmt.Sprintf("https://blog%d.example/post/%d", r.IntN(300), r.IntN(50)),
				Country: []string{"ES", "DE", "US", "FR", "GB"}[visitor%5], IsDuplicate: r.IntN(3) == 0,
			}
			clicks = append(clicks, Click{Click: c, Partition: int32(visitor % 12), Offset: int64(i)})
			if len(clicks) == cap(clicks) {
				if _, err := w.WriteClicks(ctx, clicks); err != nil {
					b.Fatal(err)
				}
				clicks = clicks[:0]
			}
		}
		tables := []string{"clicks", "clicks_narrow", "click_index", "click_visitors", "clicks_daily", "clicks_daily_sub1"}
		var report []string
		for _, table := range tables {
			if err := e.conn.Exec(ctx, "OPTIMIZE TABLE "+e.db+"."+table+" FINAL"); err != nil {
				b.Fatal(err)
			}
			bytes := e.count(b, "SELECT sum(bytes_on_disk) FROM system.parts WHERE active AND database = '"+e.db+"' AND table = '"+table+"'")
			b.ReportMetric(float64(bytes)/n, table+"-bytes/click")
			report = append(report, fmt.Sprintf("%s %.1f", table, float64(bytes)/n))
		}
		b.Logf("bytes on disk per click, merged: %s", strings.Join(report, ", "))
	}
}

// BenchmarkEnrichClick is enrichment's cost per click in ingest (internal/enrich), with the
// benchmark's mix of inputs (benchClick): the clicks of benchEvents split over six
// partitions by visitor, as Kafka places them, each with a fresh session as after an
// assignment, so the first sightings of addresses and user agents (the caches' misses) count.
// CPU time of the process per click (garbage collection included).
func BenchmarkEnrichClick(b *testing.B) {
	enr, err := enrich.New(benchEnrichOptions(b))
	if err != nil {
		b.Fatal(err)
	}
	defer enr.Close()
	at := time.Now().UTC()
	clicks := make([]events.Click, benchEvents)
	for i := range clicks {
		clicks[i] = benchClick(i, at)
	}
	b.ResetTimer()
	var elapsed time.Duration
	for range b.N {
		var sessions [6]*enrich.Session
		for p := range sessions {
			sessions[p] = enr.NewSession()
		}
		began := procstat.Self()
		for i := range clicks {
			c := &clicks[i]
			_ = sessions[i%20000%6].Enrich(c.IP, c.UserAgent, c.Referrer, c.LandingURL)
		}
		elapsed += procstat.Self() - began
	}
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(b.N*len(clicks)), "cpu-ns/click")
}
