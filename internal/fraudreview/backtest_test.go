package fraudreview_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/partnerstream/partnerstream/internal/fraud"
	"github.com/partnerstream/partnerstream/internal/fraudreview"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/money"
	"github.com/partnerstream/partnerstream/internal/testenv/chtest"
)

// stored is a conversion as ingest keeps it in ClickHouse, with its click.
type stored struct {
	id, affiliate, program, currency string
	amount, commission               int64
	occurred                         time.Time
	clickID                          string
	clicked                          time.Time // zero: no click (a coupon's conversion)
	version                          uint64
	hosting                          bool
	// extra clicks of the same link and address, 10 s apart before the click
	extra int
}

// store writes clicks (click_index follows by its view) and conversion changes (conversions
// follows) as ingest does.
func store(t *testing.T, conn driver.Conn, db, advertiser string, list []stored) {
	t.Helper()
	ctx := context.Background()
	clicks, err := conn.PrepareBatch(ctx, "INSERT INTO "+db+`.clicks (click_id, occurred_at, link_id, program_id, affiliate_id,
		advertiser_id, country, hosting, ip, kafka_partition, kafka_offset)`)
	if err != nil {
		t.Fatal(err)
	}
	changes, err := conn.PrepareBatch(ctx, "INSERT INTO "+db+`.conversion_changes (conversion_id, version, sign, status, type,
		currency, amount, commission, occurred_at, advertiser_id, program_id, affiliate_id, click_id, commission_id, ingested_at)`)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range list {
		if s.clickID != "" {
			var hosting uint8
			if s.hosting {
				hosting = 1
			}
			ip := fmt.Sprintf("10.0.%d.%d", i/250, i%250)
			if err := clicks.Append(s.clickID, s.clicked, "lnk_x", s.program, s.affiliate, advertiser, "ES", hosting, ip, int32(0), int64(i)); err != nil {
				t.Fatal(err)
			}
			for j := range s.extra {
				if err := clicks.Append(fmt.Sprintf("%s_%d", s.clickID, j), s.clicked.Add(-time.Duration(j+1)*10*time.Second), "lnk_x",
					s.program, s.affiliate, advertiser, "ES", uint8(0), ip, int32(0), int64(i)); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := changes.Append(s.id, s.version, int8(1), "pending", "sale", s.currency, s.amount, s.commission, s.occurred, advertiser,
			s.program, s.affiliate, s.clickID, "cms_"+s.id, s.occurred); err != nil {
			t.Fatal(err)
		}
	}
	if err := clicks.Send(); err != nil {
		t.Fatal(err)
	}
	if err := changes.Send(); err != nil {
		t.Fatal(err)
	}
}

func TestABacktestMatchesAReferenceAndAShadowRuleActsOnNothing(t *testing.T) {
	_, db, conn := chtest.Migrated(t)
	ctx := context.Background()
	advertiser, other := ids.New(ids.Company), ids.New(ids.Company)
	program := ids.New(ids.Program)
	affiliates := []string{ids.New(ids.Company), ids.New(ids.Company), ids.New(ids.Company)}
	from := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	to := from.AddDate(0, 0, 30)
	rng := rand.New(rand.NewPCG(31, 3))
	var list []stored
	for i := range 600 {
		s := stored{id: fmt.Sprintf("cnv_%04d", i), affiliate: affiliates[rng.IntN(len(affiliates))], program: program,
			currency: []string{"EUR", "USD"}[rng.IntN(2)], amount: rng.Int64N(100_000), version: 1,
			occurred: from.Add(time.Duration(rng.Int64N(int64(32*24*time.Hour))) - 24*time.Hour)} // some outside the period
		s.commission = s.amount / 10
		if i%7 != 0 { // every 7th has no click
			s.clickID = fmt.Sprintf("clk_%04d", i)
			// From 0 s to 2 hours: both sides of both windows.
			s.clicked = s.occurred.Add(-time.Duration(rng.Int64N(7200)) * time.Second)
			s.hosting = i%5 == 0
			s.extra = []int{0, 1, 2, 3}[rng.IntN(4)]
		}
		list = append(list, s)
	}
	// A later version of a conversion changes its amount: the backtest reads the latest.
	later := list[1]
	later.version, later.amount, later.commission = 2, 123_456, 12_345
	list = append(list, later)
	store(t, conn, db, advertiser, list)
	// Another advertiser's conversion in the period, 1 second after its click: not counted.
	store(t, conn, db, other, []stored{{id: "cnv_other", affiliate: affiliates[0], program: ids.New(ids.Program), currency: "EUR",
		amount: 100, version: 1, occurred: from.Add(time.Hour), clickID: "clk_other", clicked: from.Add(time.Hour - time.Second)}})

	settings, err := fraud.Apply(fraud.Defaults(), map[string]fraud.Change{
		fraud.ConversionTooFast: {Action: ptr(fraud.ActionHold), Params: map[string]any{"min_seconds": int64(60)}},
		fraud.ConversionTooSlow: {Enabled: ptr(true), Params: map[string]any{"max_seconds": int64(3600)}},
		fraud.HostingNetwork:    {Enabled: ptr(true), Action: ptr(fraud.ActionHold)},
		// More than 3 clicks in 25 s: the click and at least its 2 extra ones before it.
		fraud.ClickVelocity: {Enabled: ptr(true), Params: map[string]any{"max_clicks": int64(2), "window_seconds": int64(25)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	bt := fraudreview.Backtest{Conn: conn, Database: db}
	got, err := bt.Run(ctx, advertiser, fraudreview.BacktestRequest{Settings: settings, From: from, To: to})
	if err != nil {
		t.Fatal(err)
	}

	// The reference, computed here from what was stored.
	type sums struct {
		n                int64
		sale, commission map[string]int64
	}
	add := func(s *sums, c stored) {
		if s.sale == nil {
			s.sale, s.commission = map[string]int64{}, map[string]int64{}
		}
		s.n++
		s.sale[c.currency] += c.amount
		s.commission[c.currency] += c.commission
	}
	var evaluated, held, flagged, fast, slow, hosting, velocity sums
	perPartner := map[string]int64{}
	latest := map[string]stored{}
	for _, c := range list {
		latest[c.id] = c
	}
	for _, c := range latest {
		if c.occurred.Before(from) || !c.occurred.Before(to) {
			continue
		}
		add(&evaluated, c)
		if c.clickID == "" {
			continue
		}
		elapsed := c.occurred.Sub(c.clicked) / time.Second
		isFast, isSlow, isVelocity := elapsed < 60, elapsed > 3600, c.extra >= 2
		for _, r := range []struct {
			fired bool
			s     *sums
		}{{isFast, &fast}, {isSlow, &slow}, {c.hosting, &hosting}, {isVelocity, &velocity}} {
			if r.fired {
				add(r.s, c)
			}
		}
		switch {
		case isFast || c.hosting:
			add(&held, c)
			perPartner[c.affiliate]++
		case isSlow || isVelocity:
			add(&flagged, c)
			perPartner[c.affiliate]++
		}
	}
	check := func(what string, got fraudreview.Tally, want sums) {
		t.Helper()
		if got.Conversions != want.n {
			t.Errorf("%s: %d conversions, want %d", what, got.Conversions, want.n)
		}
		if len(got.Amounts) != len(want.sale) {
			t.Errorf("%s: amounts in %d currencies, want %d", what, len(got.Amounts), len(want.sale))
		}
		for _, a := range got.Amounts {
			if a.Sale != money.SumOf(want.sale[a.Currency]) || a.Commission != money.SumOf(want.commission[a.Currency]) {
				t.Errorf("%s in %s: %s and %s, want %d and %d", what, a.Currency, a.Sale, a.Commission, want.sale[a.Currency], want.commission[a.Currency])
			}
		}
	}
	if fast.n == 0 || slow.n == 0 || hosting.n == 0 || velocity.n == 0 || evaluated.n == int64(len(latest)) {
		t.Fatalf("the data does not exercise the rules: %d fast, %d slow, %d of %d in the period", fast.n, slow.n, evaluated.n, len(latest))
	}
	check("evaluated", got.Evaluated, evaluated)
	check("held", got.Held, held)
	check("flagged", got.Flagged, flagged)
	for _, r := range got.Rules {
		switch r.Code {
		case fraud.ConversionTooFast:
			check("conversion_too_fast", r.Fired, fast)
		case fraud.ConversionTooSlow:
			check("conversion_too_slow", r.Fired, slow)
		case fraud.HostingNetwork:
			check("hosting_network", r.Fired, hosting)
		case fraud.ClickVelocity:
			check("click_velocity", r.Fired, velocity)
		default:
			if r.Fired.Conversions != 0 {
				t.Errorf("%s fired %d times", r.Code, r.Fired.Conversions)
			}
			if _, ok := fraudreview.Unevaluated[r.Code]; ok == r.Evaluated || (!r.Evaluated && r.Reason == "") {
				t.Errorf("%s: evaluated %v (%q)", r.Code, r.Evaluated, r.Reason)
			}
		}
	}
	if len(got.TopPartners) != len(affiliates) {
		t.Fatalf("top partners %+v", got.TopPartners)
	}
	for i, p := range got.TopPartners {
		if n := p.Held.Conversions + p.Flagged.Conversions; n != perPartner[p.AffiliateID] ||
			i > 0 && n > got.TopPartners[i-1].Held.Conversions+got.TopPartners[i-1].Flagged.Conversions {
			t.Errorf("partner %d %s: %d caught, want %d, in descending order", i, p.AffiliateID, n, perPartner[p.AffiliateID])
		}
	}

	// The same rules in shadow: each fires as often, and nothing is held or flagged.
	shadow, err := fraud.Apply(settings, map[string]fraud.Change{
		fraud.ConversionTooFast: {Shadow: ptr(true)}, fraud.ConversionTooSlow: {Shadow: ptr(true)},
		fraud.HostingNetwork: {Shadow: ptr(true)}, fraud.ClickVelocity: {Shadow: ptr(true)}})
	if err != nil {
		t.Fatal(err)
	}
	sh, err := bt.Run(ctx, advertiser, fraudreview.BacktestRequest{Settings: shadow, From: from, To: to})
	if err != nil {
		t.Fatal(err)
	}
	check("held in shadow", sh.Held, sums{})
	check("flagged in shadow", sh.Flagged, sums{})
	for _, r := range sh.Rules {
		for i, x := range got.Rules {
			if x.Code == r.Code && r.Fired.Conversions != got.Rules[i].Fired.Conversions {
				t.Errorf("%s in shadow fired %d times, acting %d", r.Code, r.Fired.Conversions, got.Rules[i].Fired.Conversions)
			}
		}
	}
	if sh.Shadow.Conversions != held.n+flagged.n || len(sh.TopPartners) != 0 {
		t.Errorf("in shadow: %d conversions with shadow findings (want %d), partners %+v", sh.Shadow.Conversions, held.n+flagged.n, sh.TopPartners)
	}

	// A partnership exempt from every rule that fires: its conversions are neither held nor
	// flagged, and the others' are as before, whatever another program's partnership of the
	// same affiliate is exempt from.
	every := []string{fraud.ConversionTooFast, fraud.ConversionTooSlow, fraud.HostingNetwork, fraud.ClickVelocity}
	ex, err := bt.Run(ctx, advertiser, fraudreview.BacktestRequest{Settings: settings, From: from, To: to,
		Exemptions: map[fraud.Partnership][]string{{ProgramID: program, AffiliateID: affiliates[0]}: every,
			{ProgramID: ids.New(ids.Program), AffiliateID: affiliates[1]}: every}})
	if err != nil {
		t.Fatal(err)
	}
	if n := ex.Held.Conversions + ex.Flagged.Conversions; perPartner[affiliates[0]] == 0 || n != held.n+flagged.n-perPartner[affiliates[0]] {
		t.Errorf("with a partnership exempt: %d held or flagged, want %d", n, held.n+flagged.n-perPartner[affiliates[0]])
	}
	if len(ex.TopPartners) != len(affiliates)-1 {
		t.Errorf("with a partnership exempt: top partners %+v", ex.TopPartners)
	}
	for _, p := range ex.TopPartners {
		want := perPartner[p.AffiliateID]
		if p.AffiliateID == affiliates[0] {
			want = 0
		}
		if n := p.Held.Conversions + p.Flagged.Conversions; n != want {
			t.Errorf("with a partnership exempt: partner %s %d caught, want %d", p.AffiliateID, n, want)
		}
	}
}

func ptr[T any](v T) *T { return &v }
