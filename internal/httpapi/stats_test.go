package httpapi_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/ingest"
	"github.com/partnerstream/partnerstream/internal/stats"
	"github.com/partnerstream/partnerstream/internal/testenv/chtest"
)

// statsToday is "today" for the stats routes: the default range ends here.
var statsToday = time.Date(2026, 6, 30, 15, 0, 0, 0, time.UTC)

// statsFixture is the shared fixture with the stats routes on a migrated ClickHouse
// database, holding traffic of the fixture's advertiser and affiliate and of strangers.
type statsFixture struct {
	*fixture
	w    *ingest.Writer
	ch   driver.Conn
	chDB string
}

func newStatsFixture(t *testing.T) *statsFixture {
	t.Helper()
	f := &statsFixture{fixture: newFixture(t)}
	_, db, conn := chtest.Migrated(t)
	f.srv.MountStats(stats.New(conn, db, stats.Options{Now: func() time.Time { return statsToday }}))
	f.w, f.ch, f.chDB = ingest.NewWriter(conn, db), conn, db
	return f
}

// clicks records n clicks on a day (yyyy-mm-dd).
func (f *statsFixture) clicks(t *testing.T, n int, day, adv, aff, program, link, sub1 string) {
	t.Helper()
	at, _ := time.Parse(time.DateOnly, day)
	var batch []ingest.Click
	for i := range n {
		batch = append(batch, ingest.Click{Click: events.Click{ClickID: fmt.Sprintf("clk_%s_%s_%s_%d", day, link, sub1, i),
			OccurredAt: at.Add(time.Duration(i) * time.Minute), LinkID: link, ProgramID: program, AffiliateID: aff,
			AdvertiserID: adv, Sub1: sub1, UserAgent: "Mozilla/5.0"}})
	}
	if _, err := f.w.WriteClicks(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
}

func (f *statsFixture) conversion(t *testing.T, id, day, adv, aff, program, currency, status string, amount, commission int64) {
	t.Helper()
	f.conversions(t, []ingest.Conversion{statsConversion(id, day, adv, aff, program, currency, status, amount, commission)})
}

// conversions writes the conversions in one insert, as ingest writes a batch.
func (f *statsFixture) conversions(t *testing.T, batch []ingest.Conversion) {
	t.Helper()
	if _, err := f.w.WriteConversions(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
}

func statsConversion(id, day, adv, aff, program, currency, status string, amount, commission int64) ingest.Conversion {
	at, _ := time.Parse(time.DateOnly, day)
	return ingest.Conversion{EventID: "evt_" + id, ID: id, Version: 1, Status: status, Type: "sale", Currency: currency,
		Amount: amount, Commission: commission, OccurredAt: at.Add(12 * time.Hour), AdvertiserID: adv, ProgramID: program, AffiliateID: aff}
}

func (f *statsFixture) get(t *testing.T, path string, query url.Values, headers map[string]string) response {
	t.Helper()
	return f.do(t, "GET", path+"?"+query.Encode(), headers, "")
}

// statsReport is a stats answer; a pointer tells null (or a missing field) from a value.
type statsReport struct {
	From       string       `json:"from"`
	To         string       `json:"to"`
	GroupBy    string       `json:"group_by"`
	Currency   *string      `json:"currency"`
	Currencies []string     `json:"currencies"`
	Data       []statsRow   `json:"data"`
	Totals     statsFigures `json:"totals"`
	HasMore    bool         `json:"has_more"`
}

type statsRow struct {
	Day         *string `json:"day"`
	ProgramID   *string `json:"program_id"`
	LinkID      *string `json:"link_id"`
	Sub1        *string `json:"sub1"`
	Attribution *string `json:"attribution"`
	statsFigures
}

type statsFigures struct {
	Clicks       int64 `json:"clicks"`
	UniqueClicks int64 `json:"unique_clicks"`
	Conversions  struct {
		Total    int64 `json:"total"`
		Approved int64 `json:"approved"`
		Rejected int64 `json:"rejected"`
	} `json:"conversions"`
	SaleAmount     *string `json:"sale_amount"`
	Commission     *string `json:"commission"`
	EPC            *string `json:"epc"`
	ConversionRate float64 `json:"conversion_rate"`
	Amounts        []struct {
		Currency   string `json:"currency"`
		SaleAmount string `json:"sale_amount"`
		Commission string `json:"commission"`
		EPC        string `json:"epc"`
	} `json:"amounts"`
}

// reportOf reads a stats answer, failing unless it is a 200.
func reportOf(t *testing.T, r response) statsReport {
	t.Helper()
	if r.status != 200 {
		t.Fatalf("status %d: %s", r.status, r.raw)
	}
	return decode[statsReport](t, r)
}

// orNil is an optional string to print: the string, or <nil>.
func orNil(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

func TestStatsByDayListEveryDayWithMoneyAsDecimalStrings(t *testing.T) {
	f := newStatsFixture(t)
	f.clicks(t, 4, "2026-06-01", f.advID, f.affID, "prg_1", "lnk_1", "")
	f.conversion(t, "cnv_1", "2026-06-01", f.advID, f.affID, "prg_1", "EUR", events.CommissionApproved, 12000, 1250)
	f.conversion(t, "cnv_2", "2026-06-03", f.advID, f.affID, "prg_1", "EUR", events.CommissionRejected, 5000, 500)

	r := f.get(t, "/api/v1/stats", url.Values{"from": {"2026-06-01"}, "to": {"2026-06-03"}}, apiKey(f.adv))
	rep := reportOf(t, r)
	rows := rep.Data
	if str(rep.Currency) != "EUR" || rep.GroupBy != "day" || rep.From != "2026-06-01" || rep.To != "2026-06-03" {
		t.Fatalf("report header %s", r.raw)
	}
	want := []string{
		`day=2026-06-01 clicks=4 unique=4 total=1 approved=1 rejected=0 sale=120.00 commission=12.50 epc=3.13 rate=0.25`,
		`day=2026-06-02 clicks=0 unique=0 total=0 approved=0 rejected=0 sale=0.00 commission=0.00 epc=0.00 rate=0`,
		`day=2026-06-03 clicks=0 unique=0 total=1 approved=0 rejected=1 sale=0.00 commission=0.00 epc=0.00 rate=0`,
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d: %s", len(rows), len(want), r.raw)
	}
	for i, row := range rows {
		if got := describe(row.Day, row.statsFigures); got != want[i] {
			t.Errorf("row %d:\n got  %s\n want %s", i, got, want[i])
		}
	}
	if got := describe(nil, rep.Totals); got != `day=<nil> clicks=4 unique=4 total=2 approved=1 rejected=1 sale=120.00 commission=12.50 epc=3.13 rate=0.25` {
		t.Errorf("totals %s", got)
	}
}

func describe(day *string, f statsFigures) string {
	c := f.Conversions
	return fmt.Sprintf("day=%v clicks=%v unique=%v total=%v approved=%v rejected=%v sale=%v commission=%v epc=%v rate=%v",
		orNil(day), f.Clicks, f.UniqueClicks, c.Total, c.Approved, c.Rejected, orNil(f.SaleAmount),
		orNil(f.Commission), orNil(f.EPC), f.ConversionRate)
}

func TestStatsDefaultToTheLast30DaysAndNoTrafficMeansZeroEPC(t *testing.T) {
	f := newStatsFixture(t)
	r := f.get(t, "/api/partner-api/stats", nil, apiKey(f.adv))
	rep := reportOf(t, r)
	rows := rep.Data
	if len(rows) != 30 || str(rows[0].Day) != "2026-06-01" || str(rows[29].Day) != "2026-06-30" {
		t.Fatalf("%d rows, want the 30 days 2026-06-01..2026-06-30: %s", len(rows), r.raw)
	}
	for _, row := range rows {
		if str(row.EPC) != "0.00" || row.ConversionRate != 0 || row.Clicks != 0 {
			t.Fatalf("a day without traffic reads %+v", row)
		}
	}
	if rep.Currency != nil {
		t.Errorf("currency = %v, want null without conversions", *rep.Currency)
	}
	r = f.get(t, "/api/v1/stats", url.Values{"group_by": {"program"}}, apiKey(f.adv))
	if rep := reportOf(t, r); len(rep.Data) != 0 || describe(nil, rep.Totals) != `day=<nil> clicks=0 unique=0 total=0 approved=0 rejected=0 sale=0.00 commission=0.00 epc=0.00 rate=0` {
		t.Errorf("by program without traffic: %s", r.raw)
	}
}

func TestStatsShowEachCompanyOnlyItsOwnFigures(t *testing.T) {
	f := newStatsFixture(t)
	// The fixture's affiliate promotes the fixture's advertiser and a stranger advertiser;
	// a stranger affiliate promotes the fixture's advertiser.
	f.clicks(t, 3, "2026-06-10", f.advID, f.affID, "prg_mine", "lnk_mine", "a")
	f.clicks(t, 5, "2026-06-10", "co_stranger", f.affID, "prg_theirs", "lnk_theirs", "b")
	f.clicks(t, 7, "2026-06-10", f.advID, "co_other_aff", "prg_mine", "lnk_other", "c")
	f.clicks(t, 11, "2026-06-10", "co_stranger", "co_other_aff", "prg_theirs", "lnk_far", "d")
	q := url.Values{"from": {"2026-06-10"}, "to": {"2026-06-10"}, "group_by": {"link"}}
	clicksByLink := func(headers map[string]string) map[string]int64 {
		out := map[string]int64{}
		for _, row := range reportOf(t, f.get(t, "/api/v1/stats", q, headers)).Data {
			out[str(row.LinkID)] = row.Clicks
		}
		return out
	}
	if got := clicksByLink(apiKey(f.adv)); fmt.Sprint(got) != "map[lnk_mine:3 lnk_other:7]" {
		t.Errorf("the advertiser sees %v, want its programs' links only", got)
	}
	if got := clicksByLink(apiKey(f.aff)); fmt.Sprint(got) != "map[lnk_mine:3 lnk_theirs:5]" {
		t.Errorf("the affiliate sees %v, want its own links only", got)
	}
	// A program filter cannot reach into another company's program.
	q.Set("program_id", "prg_theirs")
	if got := clicksByLink(apiKey(f.adv)); len(got) != 0 {
		t.Errorf("the advertiser filtering on a stranger's program sees %v", got)
	}
	// The dashboard serves the same figures to a signed-in member.
	r := f.get(t, "/api/stats", url.Values{"from": {"2026-06-10"}, "to": {"2026-06-10"}, "group_by": {"sub1"}}, f.dashboardAs(t, identity.Affiliate, "member"))
	var subs []string
	for _, row := range reportOf(t, r).Data {
		subs = append(subs, fmt.Sprintf("%v:%v", orNil(row.Sub1), row.Clicks))
	}
	if got := strings.Join(subs, " "); got != "b:5 a:3" {
		t.Errorf("the affiliate's dashboard by sub1 = %q, want \"b:5 a:3\" (most clicks first)", got)
	}
}

func TestStatsLimitCutsTheRowsButNotTheTotals(t *testing.T) {
	f := newStatsFixture(t)
	f.clicks(t, 2, "2026-06-10", f.advID, f.affID, "prg_1", "lnk_small", "")
	f.clicks(t, 9, "2026-06-10", f.advID, f.affID, "prg_1", "lnk_big", "")
	r := f.get(t, "/api/v1/stats", url.Values{"from": {"2026-06-10"}, "to": {"2026-06-10"}, "group_by": {"link"}, "limit": {"1"}}, apiKey(f.adv))
	rep := reportOf(t, r)
	rows := rep.Data
	if len(rows) != 1 || str(rows[0].LinkID) != "lnk_big" || str(rows[0].ProgramID) != "prg_1" || !rep.HasMore {
		t.Fatalf("limit 1: %s", r.raw)
	}
	if rep.Totals.Clicks != 11 {
		t.Errorf("totals cover %v clicks, want all 11", rep.Totals.Clicks)
	}
}

func TestStatsNeverMixCurrencies(t *testing.T) {
	f := newStatsFixture(t)
	f.conversion(t, "cnv_eur", "2026-06-10", "co_a", f.affID, "prg_eur", "EUR", events.CommissionPending, 10000, 1000)
	f.conversion(t, "cnv_jpy", "2026-06-10", "co_b", f.affID, "prg_jpy", "JPY", events.CommissionPaid, 20000, 1500)
	q := url.Values{"from": {"2026-06-10"}, "to": {"2026-06-10"}}
	q.Set("currency", "JPY")
	r := f.get(t, "/api/v1/stats", q, apiKey(f.aff))
	rep := reportOf(t, r)
	rows := rep.Data
	if str(rep.Currency) != "JPY" || len(rows) == 0 || str(rows[0].Commission) != "1500" || str(rows[0].SaleAmount) != "20000" || rows[0].Conversions.Total != 1 {
		t.Errorf("in JPY: %s", r.raw)
	}
}

// An affiliate with programs in EUR and USD gets the plain call answered on every family:
// clicks and conversions counted once, amounts and EPC per currency, never summed.
func TestTheStatsOfAnAffiliateInTwoCurrenciesArePerCurrency(t *testing.T) {
	f := newStatsFixture(t)
	f.clicks(t, 4, "2026-06-10", "co_a", f.affID, "prg_eur", "lnk_eur", "")
	f.clicks(t, 6, "2026-06-11", "co_b", f.affID, "prg_usd", "lnk_usd", "")
	f.conversions(t, []ingest.Conversion{
		statsConversion("cnv_eur1", "2026-06-10", "co_a", f.affID, "prg_eur", "EUR", events.CommissionApproved, 10000, 1000),
		statsConversion("cnv_eur2", "2026-06-11", "co_a", f.affID, "prg_eur", "EUR", events.CommissionRejected, 5000, 500),
		statsConversion("cnv_usd1", "2026-06-11", "co_b", f.affID, "prg_usd", "USD", events.CommissionPending, 20001, 2001),
	})
	q := url.Values{"from": {"2026-06-10"}, "to": {"2026-06-11"}}
	amounts := func(fig statsFigures) string {
		var out []string
		for _, a := range fig.Amounts {
			out = append(out, fmt.Sprintf("%s %s/%s/%s", a.Currency, a.SaleAmount, a.Commission, a.EPC))
		}
		return strings.Join(out, ", ")
	}
	for _, route := range []struct {
		path    string
		headers map[string]string
	}{
		{"/api/v1/stats", apiKey(f.aff)},
		{"/api/partner-api/stats", apiKey(f.aff)},
		{"/api/stats", f.statsSession(t)},
	} {
		r := f.get(t, route.path, q, route.headers)
		rep := reportOf(t, r)
		rows, totals := rep.Data, rep.Totals
		if rep.Currency != nil || fmt.Sprint(rep.Currencies) != "[EUR USD]" || totals.Clicks != 10 ||
			totals.Conversions.Total != 3 || totals.Commission != nil || totals.SaleAmount != nil || totals.EPC != nil {
			t.Fatalf("%s: %s", route.path, r.raw)
		}
		// EUR 10.00 over 10 clicks, USD 20.01 over 10 clicks (2.001 rounds half up to 2.00)
		if got := amounts(totals); got != "EUR 100.00/10.00/1.00, USD 200.01/20.01/2.00" {
			t.Errorf("%s totals: %s", route.path, got)
		}
		if len(rows) != 2 || amounts(rows[0].statsFigures) != "EUR 100.00/10.00/2.50, USD 0.00/0.00/0.00" || amounts(rows[1].statsFigures) != "EUR 0.00/0.00/0.00, USD 200.01/20.01/3.34" ||
			rows[1].Conversions.Total != 2 {
			t.Errorf("%s rows: %s", route.path, r.raw)
		}
	}
	// currency narrows conversions and amounts to one, in the fields as they always were
	q.Set("currency", "USD")
	r := f.get(t, "/api/partner-api/stats", q, apiKey(f.aff))
	rep := reportOf(t, r)
	totals := rep.Totals
	if str(rep.Currency) != "USD" || str(totals.Commission) != "20.01" || str(totals.EPC) != "2.00" ||
		totals.Conversions.Total != 1 || amounts(totals) != "USD 200.01/20.01/2.00" {
		t.Fatalf("narrowed to USD: %s", r.raw)
	}
	// a program's own figures have one currency, also without asking
	q.Del("currency")
	q.Set("program_id", "prg_eur")
	r = f.get(t, "/api/v1/stats", q, apiKey(f.aff))
	if rep := reportOf(t, r); str(rep.Currency) != "EUR" || str(rep.Totals.Commission) != "10.00" {
		t.Fatalf("one program: %s", r.raw)
	}
}

// statsSession is a dashboard session of the fixture's affiliate.
func (f *statsFixture) statsSession(t *testing.T) map[string]string {
	t.Helper()
	return f.session(t, f.affID, identity.Affiliate, "member")
}

// unqueriedStats validates parameters as the stats service does, without ClickHouse, and
// fails the test if a request reaches the query: refused input must never be queried.
type unqueriedStats struct {
	*stats.Service
	t *testing.T
}

func (s unqueriedStats) Query(context.Context, stats.Scope, stats.Params) ([]stats.Row, error) {
	s.t.Error("a refused request was queried")
	return nil, nil
}

func TestStatsRejectBadInputWithAClearMessage(t *testing.T) {
	f := newFakeFixture(t)
	f.srv.MountStats(unqueriedStats{stats.New(nil, "", stats.Options{Now: func() time.Time { return statsToday }}), t})
	tests := []struct {
		name  string
		query url.Values
		field string
		says  string
	}{
		{"from after to", url.Values{"from": {"2026-06-10"}, "to": {"2026-06-01"}}, "from", "is after to"},
		{"more than 400 days", url.Values{"from": {"2025-01-01"}, "to": {"2026-06-01"}}, "to", "at most 400"},
		{"an unknown grouping", url.Values{"group_by": {"week"}}, "group_by", "day, program, affiliate, link, sub1, attribution, hour, country, region, city, asn"},
		{"a country in lower case", url.Values{"group_by": {"device"}, "country": {"de"}}, "country", "ISO 3166-1 alpha-2"},
		{"an unknown device", url.Values{"device": {"phone"}}, "device", "desktop, mobile, tablet, bot, other"},
		{"an ASN with its prefix", url.Values{"asn": {"AS3320"}}, "asn", "autonomous system number"},
		{"hosting that is no boolean", url.Values{"hosting": {"yes"}}, "hosting", "true or false"},
		{"a referrer too long", url.Values{"referrer": {strings.Repeat("x", 300)}}, "referrer", "1 to 256 characters"},
		{"a date that is not one", url.Values{"from": {"2026-02-30"}}, "from", "YYYY-MM-DD"},
		{"a timestamp instead of a date", url.Values{"to": {"2026-06-01T00:00:00Z"}}, "to", "YYYY-MM-DD"},
		{"a currency that is not ISO 4217", url.Values{"currency": {"EURO"}}, "currency", "ISO 4217"},
		{"a limit out of bounds", url.Values{"group_by": {"link"}, "limit": {"0"}}, "limit", "1 to 1000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.do(t, "GET", "/api/partner-api/stats?"+tt.query.Encode(), apiKey(f.adv), "")
			if r.status != 400 || r.problem.Code != "validation_failed" {
				t.Fatalf("status %d: %s", r.status, r.raw)
			}
			if len(r.problem.Errors) == 0 {
				t.Fatalf("no field errors: %s", r.raw)
			}
			e := r.problem.Errors[0]
			if e.Field != tt.field || !strings.Contains(e.Message, tt.says) {
				t.Errorf("error %v, want field %s saying %q", e, tt.field, tt.says)
			}
		})
	}
	if r := f.do(t, "GET", "/api/v1/stats", nil, ""); r.status != 401 {
		t.Errorf("without a key: %d", r.status)
	}
}

// Amounts the API accepts reach 2^63-1 minor units each, so their totals exceed int64: 96
// commissions of 999,999,999,999,999.99 are summed exactly on all three routes, for the
// advertiser and for the affiliate, in a row, in the totals and per click, whether the
// rollup sums them within one insert or when it merges the parts of several.
func TestStatsSumLargeCommissionsExactly(t *testing.T) {
	f := newStatsFixture(t)
	const big = 99999999999999999 // 999,999,999,999,999.99 EUR in cents
	f.clicks(t, 96, "2026-06-10", f.advID, f.affID, "prg_big", "lnk_big", "")
	var batch []ingest.Conversion
	for i := range 96 {
		batch = append(batch, statsConversion(fmt.Sprintf("cnv_big_%d", i), "2026-06-10", f.advID, f.affID, "prg_big", "EUR", events.CommissionPending, big, big))
	}
	f.conversions(t, batch[:64])
	f.conversions(t, batch[64:])
	if err := f.ch.Exec(context.Background(), "OPTIMIZE TABLE "+f.chDB+".conversions_daily FINAL"); err != nil {
		t.Fatal(err)
	}
	q := url.Values{"from": {"2026-06-10"}, "to": {"2026-06-10"}, "program_id": {"prg_big"}, "group_by": {"program"}}
	const want = `clicks=96 total=96 sale=95999999999999999.04 commission=95999999999999999.04 epc=999999999999999.99`
	for _, c := range []struct {
		path    string
		headers map[string]string
	}{
		{"/api/v1/stats", apiKey(f.adv)},
		{"/api/partner-api/stats", apiKey(f.aff)},
		{"/api/stats", f.dashboardAs(t, identity.Advertiser, "member")},
	} {
		r := f.get(t, c.path, q, c.headers)
		rep := reportOf(t, r)
		if len(rep.Data) != 1 {
			t.Fatalf("%s: %s", c.path, r.raw)
		}
		for name, fig := range map[string]statsFigures{"row": rep.Data[0].statsFigures, "totals": rep.Totals} {
			got := fmt.Sprintf("clicks=%v total=%v sale=%v commission=%v epc=%v", fig.Clicks, fig.Conversions.Total,
				orNil(fig.SaleAmount), orNil(fig.Commission), orNil(fig.EPC))
			if got != want {
				t.Errorf("%s %s:\n got  %s\n want %s", c.path, name, got, want)
			}
		}
	}
}

func TestStatsByAttribution(t *testing.T) {
	f := newStatsFixture(t)
	f.clicks(t, 4, "2026-06-10", f.advID, f.affID, "prg_1", "lnk_1", "")
	coupon := statsConversion("cnv_c", "2026-06-10", f.advID, f.affID, "prg_1", "EUR", events.CommissionPending, 5000, 500)
	coupon.Attribution = "coupon"
	click := statsConversion("cnv_k", "2026-06-10", f.advID, f.affID, "prg_1", "EUR", events.CommissionApproved, 2000, 200)
	click.Attribution = "click"
	f.conversions(t, []ingest.Conversion{coupon, click})
	r := f.get(t, "/api/v1/stats", url.Values{"from": {"2026-06-10"}, "to": {"2026-06-10"}, "group_by": {"attribution"}}, apiKey(f.adv))
	rep := reportOf(t, r)
	got := map[string]string{}
	for _, row := range rep.Data {
		got[str(row.Attribution)] = fmt.Sprintf("%v/%v", row.Clicks, orNil(row.Commission))
	}
	if len(got) != 2 || got["coupon"] != "0/5.00" || got["click"] != "0/2.00" || rep.GroupBy != "attribution" {
		t.Fatalf("by attribution: %s", r.raw)
	}
}
