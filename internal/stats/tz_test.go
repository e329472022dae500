package stats_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/ingest"
	"github.com/partnerstream/partnerstream/internal/money"
	"github.com/partnerstream/partnerstream/internal/stats"
	"github.com/partnerstream/partnerstream/internal/store/chstore"
	"github.com/partnerstream/partnerstream/internal/testenv/chtest"
)

// tzEvents is traffic of two advertisers and two affiliates at random minutes around both of
// Europe/Berlin's changes of 2026 (29 March 01:00 UTC, 25 October 01:00 UTC), as ingest writes
// it: bots, visitors' repeats, conversions in two currencies, some of which change status.
type tzEvents struct {
	clicks []ingest.Click
	convs  map[string]ingest.Conversion  // the latest state of each conversion
	origin map[string]events.ClickOrigin // by click id
}

var tzCompanies = []stats.Scope{
	{CompanyID: "co_adv1", Kind: identity.Advertiser}, {CompanyID: "co_adv2", Kind: identity.Advertiser},
	{CompanyID: "co_aff1", Kind: identity.Affiliate}, {CompanyID: "co_aff2", Kind: identity.Affiliate},
}

// tzPeriods are the stretches the traffic covers: each around a change of daylight saving time.
var tzPeriods = [][2]time.Time{
	{time.Date(2026, 3, 26, 12, 0, 0, 0, time.UTC), time.Date(2026, 4, 1, 12, 0, 0, 0, time.UTC)},
	{time.Date(2026, 10, 22, 12, 0, 0, 0, time.UTC), time.Date(2026, 10, 28, 12, 0, 0, 0, time.UTC)},
}

func writeTZEvents(t *testing.T, conn driver.Conn, db string) tzEvents {
	t.Helper()
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(30, 2))
	w := ingest.NewWriter(conn, db)
	ev := tzEvents{convs: map[string]ingest.Conversion{}, origin: map[string]events.ClickOrigin{}}
	at := func() time.Time {
		p := tzPeriods[rng.IntN(len(tzPeriods))]
		return p[0].Add(time.Duration(rng.Int64N(int64(p[1].Sub(p[0])/time.Minute))) * time.Minute)
	}
	statuses := []string{events.CommissionPending, events.CommissionApproved, events.CommissionRejected, events.CommissionPaid, events.CommissionReversed}
	var convs []ingest.Conversion
	for i := range 3000 {
		adv, aff := fmt.Sprintf("co_adv%d", 1+rng.IntN(2)), fmt.Sprintf("co_aff%d", 1+rng.IntN(2))
		program := fmt.Sprintf("prg_%s_%d", adv[3:], rng.IntN(3))
		link := fmt.Sprintf("lnk_%s_%s", program[4:], aff[3:])
		c := ingest.Click{Click: events.Click{ClickID: fmt.Sprintf("clk_tz_%d", i), OccurredAt: at(), LinkID: link,
			ProgramID: program, AffiliateID: aff, AdvertiserID: adv, Sub1: fmt.Sprintf("s%d", rng.IntN(4)),
			IsBot: rng.IntN(20) == 0, IsDuplicate: rng.IntN(6) == 0, UserAgent: "Mozilla/5.0"}}
		c.Enriched, ev.origin[c.ClickID] = tzOrigin(rng)
		if c.IsBot { // ingest stores the redirect's bots as such, whatever their user agent
			o := ev.origin[c.ClickID]
			o.DeviceType = "bot"
			ev.origin[c.ClickID] = o
		}
		ev.clicks = append(ev.clicks, c)
		if i%10 == 0 {
			currency := "EUR"
			if aff == "co_aff2" && rng.IntN(2) == 0 {
				currency = "USD"
			}
			attribution := []string{"click", "coupon", "customer"}[rng.IntN(3)]
			convs = append(convs, ingest.Conversion{EventID: fmt.Sprintf("evt_tz_%d", i), ID: fmt.Sprintf("cnv_tz_%d", i), Version: 1,
				Status: statuses[rng.IntN(len(statuses))], Type: "sale", Currency: currency, Amount: 1000 + rng.Int64N(100000),
				Commission: 100 + rng.Int64N(10000), OccurredAt: at(), AdvertiserID: adv, ProgramID: program, AffiliateID: aff,
				LinkID: link, Sub1: c.Sub1, Attribution: attribution, ClickID: c.ClickID})
		}
	}
	if _, err := w.WriteClicks(ctx, ev.clicks); err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteConversions(ctx, convs); err != nil {
		t.Fatal(err)
	}
	// A third change status: the rollups move them, sign-weighted.
	var changes []ingest.Conversion
	for i, c := range convs {
		if i%3 == 0 {
			c.Version, c.EventID, c.Status = 2, c.EventID+"_2", statuses[(slices.Index(statuses, c.Status)+1)%len(statuses)]
			changes = append(changes, c)
			convs[i] = c
		}
	}
	if _, err := w.WriteConversions(ctx, changes); err != nil {
		t.Fatal(err)
	}
	for _, c := range convs {
		ev.convs[c.ID] = c
	}
	return ev
}

// tzKey is the group of an event in the reference, computed from its time in the zone and its
// fields alone (not from how stats cuts the range).
func tzKey(g stats.GroupBy, at time.Time, loc *time.Location, program, affiliate, link, sub1, attribution string) string {
	local := at.In(loc)
	switch g {
	case stats.Day:
		return local.Format(time.DateOnly)
	case stats.Hour:
		return at.Add(-time.Duration(local.Minute())*time.Minute - time.Duration(local.Second())*time.Second).In(loc).Format(time.RFC3339)
	case stats.Program:
		return program
	case stats.Affiliate:
		return affiliate
	case stats.Link:
		return link
	case stats.Sub1:
		return sub1
	}
	return attribution
}

// reference is the figures of scope's events from the first instant of from to the last of
// to in loc, grouped by g: "key": "clicks/unique conversions(total p a r pd rv) amounts".
func (ev tzEvents) reference(scope stats.Scope, g stats.GroupBy, loc *time.Location, from, to, currency string) map[string]string {
	return ev.referenceBy(scope, g, loc, from, to, currency, func(at time.Time, program, affiliate, link, sub1, attribution string, _ events.ClickOrigin) (string, bool) {
		return tzKey(g, at, loc, program, affiliate, link, sub1, attribution), true
	})
}

// referenceBy is reference with the group of each event (and whether it counts at all) told
// by keyOf, from the event's time, fields and its click's origin.
func (ev tzEvents) referenceBy(scope stats.Scope, g stats.GroupBy, loc *time.Location, from, to, currency string,
	keyOf func(at time.Time, program, affiliate, link, sub1, attribution string, o events.ClickOrigin) (string, bool)) map[string]string {
	start, _ := time.ParseInLocation(time.DateOnly, from, loc)
	end, _ := time.ParseInLocation(time.DateOnly, to, loc)
	end = end.AddDate(0, 0, 1)
	mine := func(adv, aff string) bool {
		return scope.Kind == identity.Advertiser && adv == scope.CompanyID || scope.Kind == identity.Affiliate && aff == scope.CompanyID
	}
	in := func(at time.Time) bool { return !at.Before(start) && at.Before(end) }
	rows := map[string]*stats.Row{}
	get := func(k string) *stats.Row {
		if rows[k] == nil {
			rows[k] = &stats.Row{}
		}
		return rows[k]
	}
	if g == stats.Day || g == stats.Hour {
		for t := start; t.Before(end); t = t.Add(time.Hour) {
			get(tzKey(g, t, loc, "", "", "", "", ""))
		}
	}
	for _, c := range ev.clicks {
		if !mine(c.AdvertiserID, c.AffiliateID) || !in(c.OccurredAt) || c.IsBot || g == stats.Attribution {
			continue
		}
		k, ok := keyOf(c.OccurredAt, c.ProgramID, c.AffiliateID, c.LinkID, c.Sub1, "", ev.origin[c.ClickID])
		if !ok {
			continue
		}
		r := get(k)
		r.Clicks++
		if !c.IsDuplicate {
			r.UniqueClicks++
		}
	}
	amounts := map[string]map[string]*stats.Amount{}
	for _, c := range ev.convs {
		if !mine(c.AdvertiserID, c.AffiliateID) || !in(c.OccurredAt) || currency != "" && c.Currency != currency {
			continue
		}
		k, ok := keyOf(c.OccurredAt, c.ProgramID, c.AffiliateID, c.LinkID, c.Sub1, c.Attribution, ev.origin[c.ClickID])
		if !ok {
			continue
		}
		r := get(k)
		n := &r.Conversions
		*map[string]*int64{events.CommissionPending: &n.Pending, events.CommissionApproved: &n.Approved,
			events.CommissionRejected: &n.Rejected, events.CommissionPaid: &n.Paid, events.CommissionReversed: &n.Reversed}[c.Status]++
		n.Total++
		if amounts[k] == nil {
			amounts[k] = map[string]*stats.Amount{}
		}
		a := amounts[k][c.Currency]
		if a == nil {
			a = &stats.Amount{Currency: c.Currency}
			amounts[k][c.Currency] = a
		}
		if c.Status != events.CommissionRejected && c.Status != events.CommissionReversed {
			a.SaleAmount = a.SaleAmount.Add(money.SumOf(c.Amount))
			a.Commission = a.Commission.Add(money.SumOf(c.Commission))
		}
	}
	out := map[string]string{}
	for k, r := range rows {
		var as []string
		for _, a := range amounts[k] {
			if a.SaleAmount != (money.Sum{}) || a.Commission != (money.Sum{}) {
				as = append(as, fmt.Sprintf("%s %s/%s", a.Currency, a.SaleAmount, a.Commission))
			}
		}
		out[k] = tzFigures(*r, as)
	}
	return out
}

func tzFigures(r stats.Row, amounts []string) string {
	slices.Sort(amounts)
	n := r.Conversions
	return fmt.Sprintf("%d/%d conversions %d (%d %d %d %d %d) %s", r.Clicks, r.UniqueClicks, n.Total, n.Pending, n.Approved,
		n.Rejected, n.Paid, n.Reversed, strings.Join(amounts, " "))
}

// got is the rows of Query as the reference writes them (amounts that are zero left out).
func got(g stats.GroupBy, rows []stats.Row) map[string]string {
	out := map[string]string{}
	for _, r := range rows {
		var as []string
		for _, a := range r.Amounts {
			if a.SaleAmount != (money.Sum{}) || a.Commission != (money.Sum{}) {
				as = append(as, fmt.Sprintf("%s %s/%s", a.Currency, a.SaleAmount, a.Commission))
			}
		}
		k := r.ProgramID + r.AffiliateID + r.Sub1 + r.Attribution
		switch {
		case g == stats.Day:
			k = r.Day.Format(time.DateOnly)
		case g == stats.Hour:
			k = r.Hour.Format(time.RFC3339)
		case g == stats.Link:
			k = r.LinkID
		}
		out[k] = tzFigures(r, as)
	}
	return out
}

func diffFigures(got, want map[string]string) string {
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	for k := range want {
		if _, ok := got[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var out string
	for _, k := range keys {
		if got[k] != want[k] {
			out += fmt.Sprintf("  %s: got %q, want %q\n", k, got[k], want[k])
		}
	}
	return out
}

// tzRanges are the zones and ranges the tests ask for: each zone's days cut UTC days at
// another time (or, in UTC, not at all), and the ranges cross the changes of daylight saving
// time, start and end on partial UTC days, or are one day long.
var tzRanges = []struct{ tz, from, to string }{
	{"UTC", "2026-03-27", "2026-03-31"},
	{"Asia/Kolkata", "2026-03-27", "2026-03-31"},
	{"Asia/Kathmandu", "2026-10-23", "2026-10-27"},
	{"Europe/Berlin", "2026-03-28", "2026-03-30"},
	{"Europe/Berlin", "2026-10-25", "2026-10-25"},
	{"America/St_Johns", "2026-03-26", "2026-10-28"},
	// Both ends on UTC midnights (GMT), the summer's days not.
	{"Europe/London", "2026-03-27", "2026-10-27"},
	{"Australia/Lord_Howe", "2026-03-27", "2026-03-28"},
}

// Every grouping, for every company, in zones with half- and quarter-hour offsets and across
// both changes of daylight saving time, is exact against the reference computed from the
// events; first as the views fed the rollups, then as migration 0010 builds them from the
// stored rows.
func TestStatsInTheCallersTimeZoneAreExact(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, db, conn := chtest.Migrated(t)
	ev := writeTZEvents(t, conn, db)
	s := stats.New(conn, db, stats.Options{})
	check := func(t *testing.T) {
		for _, r := range tzRanges {
			loc, err := time.LoadLocation(r.tz)
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range stats.Groupings {
				if isDimension(g) {
					continue // TestStatsByWhereClicksComeFromAreExact
				}
				if g == stats.Hour && date(r.to).Sub(date(r.from)) > 31*24*time.Hour {
					continue // over 31 days
				}
				for _, scope := range tzCompanies {
					for _, currency := range []string{"", "USD"} {
						rows, err := s.Query(ctx, scope, stats.Params{From: date(r.from), To: date(r.to), TZ: r.tz, GroupBy: g, Currency: currency})
						if err != nil {
							t.Fatalf("%s %s..%s by %s: %v", r.tz, r.from, r.to, g, err)
						}
						want := ev.reference(scope, g, loc, r.from, r.to, currency)
						if d := diffFigures(got(g, rows), want); d != "" {
							t.Errorf("%s in %s %s..%s by %s in %q:\n%s", scope.CompanyID, r.tz, r.from, r.to, g, currency, d)
						}
					}
				}
			}
		}
	}
	t.Run("fed by the views", check)
	// Migration 0010 again, as on a database that held these events before it: it builds the
	// quarter-hour rollups from the stored clicks and conversion changes.
	if err := conn.Exec(ctx, "ALTER TABLE "+db+".schema_migrations DELETE WHERE version = 10"); err != nil {
		t.Fatal(err)
	}
	waitForMutations(t, conn, db)
	if err := chstore.Migrate(ctx, conn, db, nil); err != nil {
		t.Fatal(err)
	}
	t.Run("built by the migration", check)
}

func waitForMutations(t *testing.T, conn driver.Conn, db string) {
	t.Helper()
	for range 200 {
		var n uint64
		if err := conn.QueryRow(context.Background(), "SELECT count() FROM system.mutations WHERE database = ? AND is_done = 0", db).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("mutations still running")
}

// An hour that a change of daylight saving time repeats has two rows, told apart by their
// offsets, and the hour it skips none.
func TestStatsByHourLabelEachHourByItsLocalStart(t *testing.T) {
	t.Parallel()
	s := seeded(t)
	scope := stats.Scope{CompanyID: "co_a", Kind: identity.Advertiser}
	for _, tt := range []struct {
		day   string
		n     int
		hours []string
	}{
		{"2026-10-25", 25, []string{"2026-10-25T01:00:00+02:00", "2026-10-25T02:00:00+02:00", "2026-10-25T02:00:00+01:00", "2026-10-25T03:00:00+01:00"}},
		{"2026-03-29", 23, []string{"2026-03-29T01:00:00+01:00", "2026-03-29T03:00:00+02:00"}},
	} {
		rows, err := s.Query(context.Background(), scope, stats.Params{From: date(tt.day), To: date(tt.day), TZ: "Europe/Berlin", GroupBy: stats.Hour})
		if err != nil {
			t.Fatal(err)
		}
		var hours []string
		for _, r := range rows {
			hours = append(hours, r.Hour.Format(time.RFC3339))
		}
		if len(rows) != tt.n || !strings.Contains(strings.Join(hours, " "), strings.Join(tt.hours, " ")) {
			t.Errorf("%s: %d hours %v, want %d with %v in a row", tt.day, len(rows), hours, tt.n, tt.hours)
		}
	}
}

func TestResolveRefusesAnUnknownZoneAndLongHourlyRanges(t *testing.T) {
	t.Parallel()
	s := stats.New(nil, "unused", stats.Options{Now: func() time.Time { return today }})
	for _, tt := range []struct {
		p     stats.Params
		field string
		says  string
	}{
		{stats.Params{TZ: "Mars/Olympus_Mons"}, "tz", `IANA time zone names, such as Europe/Berlin or Asia/Kolkata; "Mars/Olympus_Mons" is not`},
		{stats.Params{TZ: "Local"}, "tz", "IANA time zone"},
		{stats.Params{TZ: "../../etc/passwd"}, "tz", "IANA time zone"},
		{stats.Params{TZ: "Asia/Kolkata", GroupBy: stats.Hour, From: date("2026-05-01"), To: date("2026-06-01")}, "to", "spans 32 days; at most 31 are allowed grouped by hour"},
		// Liberia kept -0:44:30 until 1972, and Amsterdam +0:20 until 1937: both before 2000,
		// so every zone the range allows is on quarter hours.
	} {
		_, err := s.Resolve(tt.p)
		var pe *stats.ParamError
		if !errors.As(err, &pe) || pe.Field != tt.field || !strings.Contains(pe.Message, tt.says) {
			t.Errorf("%+v: %v, want a %s error saying %q", tt.p, err, tt.field, tt.says)
		}
	}
	// Today is the caller's: 18:30 UTC on 30 June is already 1 July in Kolkata (+5:30).
	p, err := s.Resolve(stats.Params{TZ: "Asia/Kolkata"})
	if err != nil || p.To.Format(time.DateOnly) != "2026-07-01" || p.From.Format(time.DateOnly) != "2026-06-02" || p.Location.String() != "Asia/Kolkata" {
		t.Errorf("resolved %v..%v in %v: %v", p.From, p.To, p.Location, err)
	}
	if _, err := s.Resolve(stats.Params{TZ: "Asia/Kolkata", GroupBy: stats.Hour, From: date("2026-05-01"), To: date("2026-05-31")}); err != nil {
		t.Errorf("31 days by hour: %v", err)
	}
}
