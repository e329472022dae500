package stats_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/stats"
	"github.com/partnerstream/partnerstream/internal/testenv/chtest"
)

const (
	benchConversions = 200_000 // 2 %
)

// benchClicks is the clicks of the benchmark: 10 million, or STATS_BENCH_CLICKS. Fewer are
// for a loaded machine, where the bulk load of 10 million takes most of an hour: the rollups'
// rows per report depend on the values a day holds (saturated from a million or so clicks),
// not on the clicks, while the reports read from the raw clicks get cheaper with fewer.
var benchClicks = func() int {
	if n, err := strconv.Atoi(os.Getenv("STATS_BENCH_CLICKS")); err == nil && n > 0 {
		return n
	}
	return 10_000_000
}()

// benchFrom is the first of the 30 days the clicks spread over.
var benchFrom = time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)

// BenchmarkStats30Days is `make bench-stats`: the 30-day report of an advertiser that owns
// 10 million clicks (20 programs, 1,000 affiliates promoting 3 programs each, 3,000 links,
// 5 sub1 values per link, and the origins of benchOrigin) and 200,000 conversions, in every
// grouping in UTC, filtered by origin (benchFilters), and in
// Asia/Kathmandu (+5:45) by day and hour (the quarter-hour rollups) and by link and sub1 (the
// daily rollups plus the raw rows of the partial days at the range's edges), each against
// the same grouping in UTC. The rows go into the
// raw tables in bulk (INSERT ... SELECT FROM numbers), so the materialized views fill the
// rollups exactly as ingest's inserts do; the query reads the rollups as they are, unmerged
// parts included. It reports p50 and p95 per grouping.
func BenchmarkStats30Days(b *testing.B) {
	ctx := context.Background()
	_, db, conn := chtest.Migrated(b)
	start := time.Now()
	fill(b, conn, db)
	b.Logf("inserted %d clicks and %d conversions in %s", benchClicks, benchConversions, time.Since(start).Round(time.Second))
	settle(b, conn, db)

	q := stats.New(conn, db, stats.Options{})
	// As loaded, the rollups hold a part per insert block; merged is where background merges
	// take the days that are no longer written to.
	for _, state := range []string{"as-loaded", "merged"} {
		if state == "merged" {
			for _, table := range []string{"clicks_narrow", "clicks_daily", "clicks_daily_sub1", "conversions_daily", "clicks_quarterly", "conversions_quarterly",
				"clicks_origin_daily", "clicks_origin_small_daily", "conversions_origin_daily", "conversions_origin_small_daily",
				"conversions_origin_weekly", "conversions_origin_small_weekly"} {
				if err := conn.Exec(ctx, "OPTIMIZE TABLE "+db+"."+table+" FINAL"); err != nil {
					b.Fatal(err)
				}
			}
			settle(b, conn, db)
		}
		for _, g := range stats.Groupings {
			b.Run(state+"/"+string(g), func(b *testing.B) { benchQuery(b, q, g, nil, benchFrom) })
		}
		// The range runs from Monday 1 June: four whole weeks from the weekly rollups by origin
		// (migration 0016) and two days. Starting on Tuesday, 30 days hold three whole weeks and
		// nine days, the most any 30 days hold.
		for _, g := range []stats.GroupBy{stats.City, stats.UTMCampaign, stats.Country} {
			b.Run(state+"/from-tuesday/"+string(g), func(b *testing.B) { benchQuery(b, q, g, nil, benchFrom.AddDate(0, 0, 1)) })
		}
		// Filtered by where clicks come from (docs/stats.md says which read what).
		for _, f := range benchFilters {
			b.Run(state+"/filtered/"+f.name, func(b *testing.B) { benchQuery(b, q, f.g, f.where, benchFrom) })
		}
		// A filtered report in the zone: the small rollups plus the filtered raw rows of the edges.
		b.Run(state+"/paired/device-where-country", func(b *testing.B) { benchPaired(b, q, stats.Device, benchFilters[0].where) })
		// In pairs, UTC then the zone, so that a shared machine's load weighs on both alike:
		// the ratio is the figure to compare across runs.
		for _, g := range []stats.GroupBy{stats.Day, stats.Hour, stats.Link, stats.Sub1, stats.Country, stats.City} {
			b.Run(state+"/paired/"+string(g), func(b *testing.B) { benchPaired(b, q, g, nil) })
		}
	}
}

// benchZone cuts the UTC days at 18:15: its days are a quarter-hour from UTC's.
const benchZone = "Asia/Kathmandu"

// benchFilters are the filtered reports the benchmark runs: small dimensions by small
// dimensions and by day (the small rollups, migration 0015), and by a large one or grouped by
// link (the narrow clicks, migration 0017).
var benchFilters = []struct {
	name  string
	g     stats.GroupBy
	where map[string]string
}{
	{"device-where-country", stats.Device, map[string]string{"country": "DE"}},
	{"day-where-hosting", stats.Day, map[string]string{"hosting": "false"}},
	{"day-where-country", stats.Day, map[string]string{"country": "DE"}},
	{"device-where-hosting", stats.Device, map[string]string{"hosting": "false"}},
	{"browser-where-country-device-os", stats.Browser, map[string]string{"country": "DE", "device": "mobile", "os": "os3"}},
	{"country-where-utm_campaign", stats.Country, map[string]string{"utm_campaign": "c17"}},
	{"link-where-country", stats.Link, map[string]string{"country": "DE"}},
}

func benchQuery(b *testing.B, q *stats.Service, g stats.GroupBy, where map[string]string, from time.Time) {
	ctx := context.Background()
	scope := stats.Scope{CompanyID: "co_bench", Kind: identity.Advertiser}
	p := stats.Params{From: from, To: from.AddDate(0, 0, 29), GroupBy: g, Where: where}
	rows, err := q.Query(ctx, scope, p)
	if err != nil {
		b.Fatal(err)
	}
	total := stats.Total(rows)
	// A report by attribution counts conversions only (docs/stats.md).
	if total.Clicks == 0 && g != stats.Attribution || total.Conversions.Total == 0 || where == nil && from.Equal(benchFrom) && total.Conversions.Total != benchConversions {
		b.Fatalf("the report covers %d clicks and %d conversions", total.Clicks, total.Conversions.Total)
	}
	latencies := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t := time.Now()
		if _, err := q.Query(ctx, scope, p); err != nil {
			b.Fatal(err)
		}
		latencies = append(latencies, time.Since(t))
	}
	b.StopTimer()
	slices.Sort(latencies)
	p50, p95 := latencies[len(latencies)/2], latencies[len(latencies)*95/100]
	b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(p95.Microseconds())/1000, "p95-ms")
	b.ReportMetric(float64(len(rows)), "rows")
	b.Logf("%s: %d rows over %d clicks; p50 %s, p95 %s", g, len(rows), total.Clicks, p50, p95)
}

func benchPaired(b *testing.B, q *stats.Service, g stats.GroupBy, where map[string]string) {
	ctx := context.Background()
	scope := stats.Scope{CompanyID: "co_bench", Kind: identity.Advertiser}
	var latencies [2][]time.Duration
	b.ResetTimer()
	for range b.N {
		for i, tz := range []string{"", benchZone} {
			t := time.Now()
			if _, err := q.Query(ctx, scope, stats.Params{From: benchFrom, To: benchFrom.AddDate(0, 0, 29), GroupBy: g, TZ: tz, Where: where}); err != nil {
				b.Fatal(err)
			}
			latencies[i] = append(latencies[i], time.Since(t))
		}
	}
	b.StopTimer()
	var p50, p95 [2]time.Duration
	for i := range latencies {
		slices.Sort(latencies[i])
		p50[i], p95[i] = latencies[i][len(latencies[i])/2], latencies[i][len(latencies[i])*95/100]
	}
	b.ReportMetric(float64(p50[1])/float64(p50[0]), "p50-ratio")
	b.ReportMetric(float64(p95[1])/float64(p95[0]), "p95-ratio")
	b.Logf("%s: UTC p50 %s p95 %s; %s p50 %s p95 %s", g, p50[0], p95[0], benchZone, p50[1], p95[1])
}

// settle waits for the merges the bulk insert set off: they would take both cores of a small
// machine, which steady ingestion never does at once. The rollups keep their unmerged parts.
func settle(b *testing.B, conn driver.Conn, db string) {
	b.Helper()
	ctx := context.Background()
	start := time.Now()
	for {
		var merges uint64
		if err := conn.QueryRow(ctx, "SELECT count() FROM system.merges WHERE database = ?", db).Scan(&merges); err != nil {
			b.Fatal(err)
		}
		if merges == 0 || time.Since(start) > 10*time.Minute {
			break
		}
		time.Sleep(time.Second)
	}
	rows, err := conn.Query(ctx, "SELECT table, toUInt64(count()), sum(rows) FROM system.parts WHERE database = ? AND active AND (table LIKE '%daily%' OR table LIKE '%weekly%' OR table LIKE '%quarterly%' OR table = 'clicks_narrow') GROUP BY table ORDER BY table", db)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var table string
		var parts, n uint64
		if err := rows.Scan(&table, &parts, &n); err != nil {
			b.Fatal(err)
		}
		b.Logf("merges settled after %s; %s: %d rows in %d parts", time.Since(start).Round(time.Second), table, n, parts)
	}
}

// The origin of the benchmark's clicks, from o, a second hash of the row number (a
// conversion's is its click's): 20 countries with 2,000 cities, 750 ASes of which a tenth
// hosting, 4 device types, 9 browsers, 8 OSes, 300 referring sites (none for a third), 20 UTM
// sources and 2,250 campaigns, the ASes, browsers and campaigns spread unevenly as real
// traffic is (the square of a uniform pick favours the first values).
const (
	benchOriginColumns = "region, city, asn, as_org, hosting, device_type, browser, os, referrer_domain, utm_source, utm_medium, utm_campaign"
	benchOrigin        = `concat('r', toString(o % 2000 % 97)), concat('city', toString(o % 2000)),
		toUInt32(1 + intDiv((o % 1000) * (o % 1000), 1000)), concat('AS org ', toString(1 + intDiv((o % 1000) * (o % 1000), 1000))),
		toUInt8(intDiv((o % 1000) * (o % 1000), 1000) % 10 = 0),
		['desktop', 'mobile', 'mobile', 'tablet', 'other'][intDiv(o, 7) % 5 + 1],
		concat('browser', toString(intDiv((intDiv(o, 11) % 12) * (intDiv(o, 11) % 12), 12))), concat('os', toString(intDiv(o, 13) % 8)),
		if(intDiv(o, 17) % 3 = 0, '', concat('site', toString(intDiv(o, 19) % 300), '.com')),
		concat('src', toString(intDiv(o, 23) % 20)), 'cpc', concat('c', toString(intDiv((intDiv(o, 29) % 3000) * (intDiv(o, 29) % 3000), 3000)))`
)

// fill inserts the clicks and conversions. h is a hash of the row number, so the dimensions
// are spread evenly but deterministically.
func fill(b *testing.B, conn driver.Conn, db string) {
	b.Helper()
	ctx := context.Background()
	from := benchFrom.Format(time.DateTime)
	clicks := `INSERT INTO {db}.clicks (click_id, occurred_at, link_id, program_id, affiliate_id, advertiser_id,
		promotion_id, sub1, sub2, sub3, sub4, sub5, ip, user_agent, referrer, country, is_bot, is_duplicate,
		kafka_partition, kafka_offset, ` + benchOriginColumns + `)
	SELECT concat('clk_', toString(number)), toDateTime('` + from + `', 'UTC') + (h % 2592000),
		concat('lnk_', toString(aff), '_', toString(prg)), concat('prg_', toString(prg)), concat('co_aff_', toString(aff)),
		'co_bench', '', concat('s', toString(intDiv(h, 7) % 5)), '', '', '', '',
		'203.0.113.7', 'Mozilla/5.0', '', country, toUInt8(h % 50 = 0), toUInt8(h % 5 = 1), toInt32(number % 6), toInt64(number),
		` + benchOrigin + `
	FROM (SELECT number, cityHash64(number) AS h, h % 1000 AS aff, (aff + 7 * (intDiv(h, 1000) % 3)) % 20 AS prg, intHash64(h) AS o,
	             ['DE', 'US', 'FR', 'GB', 'ES', 'IT', 'NL', 'IN', 'BR', 'PL', 'SE', 'AT', 'CH', 'BE', 'CA', 'AU', 'JP', 'MX', 'NP', 'PT'][o % 2000 % 20 + 1] AS country
	      FROM (SELECT number + {from} AS number FROM numbers(` + fmt.Sprint(benchChunk) + `)))`
	conversions := `INSERT INTO {db}.conversion_changes (conversion_id, version, sign, status, type, currency, amount,
		commission, occurred_at, advertiser_id, program_id, affiliate_id, link_id, click_id, sub1, commission_id,
		external_id, event_id, kafka_partition, kafka_offset, ingested_at, country, ` + benchOriginColumns + `)
	SELECT concat('cnv_', toString(number)), toUInt64(1), toInt8(1),
		['pending', 'approved', 'rejected', 'paid', 'reversed'][h % 5 + 1], 'sale', 'EUR',
		toInt64(1000 + h % 50000), toInt64(100 + h % 5000), toDateTime('` + from + `', 'UTC') + (h % 2592000),
		'co_bench', concat('prg_', toString(prg)), concat('co_aff_', toString(aff)),
		concat('lnk_', toString(aff), '_', toString(prg)), concat('clk_', toString(number)),
		concat('s', toString(intDiv(h, 7) % 5)), '', '', '', toInt32(0), toInt64(number), now(), country, ` + benchOrigin + `
	FROM (SELECT number, cityHash64(number) AS h, h % 1000 AS aff, (aff + 7 * (intDiv(h, 1000) % 3)) % 20 AS prg, intHash64(h) AS o,
	             ['DE', 'US', 'FR', 'GB', 'ES', 'IT', 'NL', 'IN', 'BR', 'PL', 'SE', 'AT', 'CH', 'BE', 'CA', 'AU', 'JP', 'MX', 'NP', 'PT'][o % 2000 % 20 + 1] AS country
	      FROM numbers(` + fmt.Sprint(benchConversions) + `))`
	// In chunks: the views by origin unfold each click into twenty rows, and one INSERT of the
	// whole would outlast the driver's read timeout on a loaded machine.
	var qs []string
	for from := 0; from < benchClicks; from += benchChunk {
		qs = append(qs, strings.ReplaceAll(clicks, "{from}", fmt.Sprint(from)))
	}
	for _, q := range append(qs, conversions) {
		if err := conn.Exec(ctx, strings.ReplaceAll(q, "{db}", db)); err != nil {
			b.Fatal(err)
		}
	}
}

// benchChunk is the clicks of one INSERT.
const benchChunk = 500_000
