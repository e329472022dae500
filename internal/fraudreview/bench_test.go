package fraudreview_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/partnerstream/partnerstream/internal/fraud"
	"github.com/partnerstream/partnerstream/internal/fraudreview"
	"github.com/partnerstream/partnerstream/internal/testenv/chtest"
)

const (
	benchClicks      = 10_000_000
	benchConversions = 200_000 // 2 %
)

// BenchmarkBacktest30Days is `make bench-backtest`: a backtest of the time rules (every
// conversion with its click's time) over the 30 days of an advertiser that owns 10 million
// clicks (20 programs, 1,000 affiliates) and 200,000 conversions, each 0 to 2 hours after
// its click. The rows go in in bulk (INSERT ... SELECT FROM numbers), so click_index and
// conversions fill through their views as ingest's inserts fill them. It reports seconds
// per backtest and conversions evaluated per second.
func BenchmarkBacktest30Days(b *testing.B) {
	ctx := context.Background()
	_, db, conn := chtest.Migrated(b)
	from := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	storeBenchData(b, conn, db, from)

	// The time rules alone (the click rules on by default switched off) read no clicks.
	timeRules := map[string]fraud.Change{
		fraud.ConversionTooFast: {Action: ptr(fraud.ActionHold), Params: map[string]any{"min_seconds": int64(60)}},
		fraud.ConversionTooSlow: {Enabled: ptr(true), Params: map[string]any{"max_seconds": int64(3600)}},
		fraud.HostingNetwork:    {Enabled: ptr(false)},
		fraud.ClickVelocity:     {Enabled: ptr(false)},
		fraud.PaidAdsClick:      {Enabled: ptr(false)},
		fraud.BannedReferrer:    {Enabled: ptr(false)},
	}
	// The click-stage rules read the converting clicks' rows, and velocity the clicks of
	// their links and addresses.
	clickRules := map[string]fraud.Change{
		fraud.ConversionTooFast: timeRules[fraud.ConversionTooFast],
		fraud.HostingNetwork:    {Enabled: ptr(true)},
		fraud.CountryNotAllowed: {Enabled: ptr(true), Params: map[string]any{"countries": []string{"ES", "FR"}}},
		fraud.ClickVelocity:     {Enabled: ptr(true)},
		fraud.BannedReferrer:    {Enabled: ptr(true), Params: map[string]any{"patterns": []string{"*.spam.example"}}},
	}
	bt := fraudreview.Backtest{Conn: conn, Database: db}
	for name, changes := range map[string]map[string]fraud.Change{"time-rules": timeRules, "click-rules": clickRules} {
		settings, err := fraud.Apply(fraud.Defaults(), changes)
		if err != nil {
			b.Fatal(err)
		}
		// The 30 days and the 2 hours after, where the last clicks' conversions fall.
		req := fraudreview.BacktestRequest{Settings: settings, From: from, To: from.AddDate(0, 0, 31)}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				res, err := bt.Run(ctx, "co_bench", req)
				if err != nil {
					b.Fatal(err)
				}
				if res.Evaluated.Conversions != benchConversions || res.Held.Conversions == 0 || res.Flagged.Conversions == 0 {
					b.Fatalf("evaluated %d conversions, held %d, flagged %d", res.Evaluated.Conversions, res.Held.Conversions, res.Flagged.Conversions)
				}
			}
			per := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(per, "s/backtest")
			b.ReportMetric(benchConversions/per, "conversions/s")
		})
	}
}

// storeBenchData stores the benchmark's clicks and conversions of advertiser co_bench, from
// from on, in db.
func storeBenchData(tb testing.TB, conn driver.Conn, db string, from time.Time) {
	tb.Helper()
	ctx := context.Background()
	start := time.Now()
	clicks := `INSERT INTO {db}.clicks (click_id, occurred_at, link_id, program_id, affiliate_id, advertiser_id,
		ip, user_agent, country, kafka_partition, kafka_offset)
	SELECT concat('clk_', toString(number)), toDateTime('{from}', 'UTC') + (h % 2592000),
		concat('lnk_', toString(aff), '_', toString(prg)), concat('prg_', toString(prg)), concat('co_aff_', toString(aff)),
		'co_bench', concat('10.', toString(h % 250), '.', toString(intDiv(h, 250) % 250), '.', toString(intDiv(h, 62500) % 250)),
		'Mozilla/5.0', ['ES', 'FR', 'DE', 'US'][h % 4 + 1], toInt32(number % 6), toInt64(number)
	FROM (SELECT number, cityHash64(number) AS h, h % 1000 AS aff, (aff + 7 * (intDiv(h, 1000) % 3)) % 20 AS prg
	      FROM (SELECT number + {offset} AS number FROM numbers({chunk})))`
	// Conversion n is of click n, (h / 3) % 7200 seconds after it.
	conversions := `INSERT INTO {db}.conversion_changes (conversion_id, version, sign, status, type, currency, amount,
		commission, occurred_at, advertiser_id, program_id, affiliate_id, link_id, click_id, commission_id, ingested_at)
	SELECT concat('cnv_', toString(number)), toUInt64(1), toInt8(1), 'pending', 'sale', ['EUR', 'USD'][h % 2 + 1],
		toInt64(1000 + h % 50000), toInt64(100 + h % 5000), toDateTime('{from}', 'UTC') + (h % 2592000) + (intDiv(h, 3) % 7200),
		'co_bench', concat('prg_', toString(prg)), concat('co_aff_', toString(aff)),
		concat('lnk_', toString(aff), '_', toString(prg)), concat('clk_', toString(number)), '', now()
	FROM (SELECT number, cityHash64(number) AS h, h % 1000 AS aff, (aff + 7 * (intDiv(h, 1000) % 3)) % 20 AS prg
	      FROM numbers(` + fmt.Sprint(benchConversions) + `))`
	// In chunks: one INSERT of all the clicks outlasts the client's read timeout on a busy machine.
	const chunk = benchClicks / 10
	var inserts []string
	for offset := 0; offset < benchClicks; offset += chunk {
		inserts = append(inserts, strings.NewReplacer("{offset}", fmt.Sprint(offset), "{chunk}", fmt.Sprint(chunk)).Replace(clicks))
	}
	for _, q := range append(inserts, conversions) {
		q = strings.NewReplacer("{db}", db, "{from}", from.Format(time.DateTime)).Replace(q)
		if err := conn.Exec(ctx, q); err != nil {
			tb.Fatal(err)
		}
	}
	tb.Logf("inserted %d clicks and %d conversions in %s", benchClicks, benchConversions, time.Since(start).Round(time.Second))
}
