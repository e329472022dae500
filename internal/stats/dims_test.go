package stats_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/enrich"
	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/stats"
	"github.com/partnerstream/partnerstream/internal/store/chstore"
	"github.com/partnerstream/partnerstream/internal/testenv/chtest"
)

// tzOrigin is a random origin of a click, as enrichment gives it and as ClickHouse stores it;
// one click in eight has none (a click from before enrichment).
func tzOrigin(rng *rand.Rand) (enrich.Click, events.ClickOrigin) {
	if rng.IntN(8) == 0 {
		return enrich.Click{}, events.ClickOrigin{}
	}
	places := []enrich.Place{{Country: "DE", Region: "Bavaria", City: "Munich"}, {Country: "DE", Region: "Berlin", City: "Berlin"},
		{Country: "IN", Region: "Maharashtra", City: "Mumbai"}, {Country: "NP", Region: "Bagmati", City: "Kathmandu"}, {Country: "US"}}
	networks := []enrich.Network{{ASN: 3320, Org: "Deutsche Telekom AG"}, {ASN: 16509, Org: "Amazon.com, Inc.", Hosting: true}, {ASN: 55836, Org: "Reliance Jio"}}
	devices := []enrich.Device{{Type: "desktop", Browser: "Chrome", OS: "Windows"}, {Type: "mobile", Browser: "Safari", OS: "iOS"},
		{Type: "mobile", Browser: "Chrome", OS: "Android"}, {Type: "tablet", Browser: "Safari", OS: "iOS"}, {Type: "other"}}
	e := enrich.Click{Address: &enrich.Address{Stored: "203.0.113.0"}, Device: &devices[rng.IntN(len(devices))],
		Referrer: &enrich.Referrer{Domain: []string{"", "google.com", "bbc.co.uk"}[rng.IntN(3)]},
		UTM:      &enrich.UTM{Source: []string{"", "newsletter", "facebook"}[rng.IntN(3)], Campaign: []string{"", "spring", "autumn"}[rng.IntN(3)]}}
	if rng.IntN(6) > 0 {
		e.Address.Place = &places[rng.IntN(len(places))]
	}
	if rng.IntN(6) > 0 {
		e.Address.Network = &networks[rng.IntN(len(networks))]
	}
	o := events.ClickOrigin{DeviceType: e.Device.Type, Browser: e.Device.Browser, OS: e.Device.OS, ReferrerDomain: e.Referrer.Domain,
		UTMSource: e.UTM.Source, UTMCampaign: e.UTM.Campaign}
	if p := e.Address.Place; p != nil {
		o.Country, o.Region, o.City = p.Country, p.Region, p.City
	}
	if n := e.Address.Network; n != nil {
		o.ASN, o.ASOrg = n.ASN, n.Org
		if n.Hosting {
			o.Hosting = 1
		}
	}
	return e, o
}

// dimKey is the key of an origin's group as dimGot writes a row's.
func dimKey(g stats.GroupBy, o events.ClickOrigin) string {
	switch g {
	case stats.Country:
		return o.Country
	case stats.Region:
		return o.Country + "/" + o.Region
	case stats.City:
		return o.Country + "/" + o.Region + "/" + o.City
	case stats.ASN:
		return fmt.Sprintf("%d %s", o.ASN, o.ASOrg)
	case stats.Device:
		return o.DeviceType
	case stats.Browser:
		return o.Browser
	case stats.OS:
		return o.OS
	case stats.Referrer:
		return o.ReferrerDomain
	case stats.UTMSource:
		return o.UTMSource
	}
	return o.UTMCampaign
}

func dimGot(g stats.GroupBy, rows []stats.Row) map[string]string {
	if !isDimension(g) {
		return got(g, rows)
	}
	var keyed []stats.Row
	for _, r := range rows {
		k := dimKey(g, events.ClickOrigin{Country: r.Country, Region: r.Region, City: r.City, ASN: r.ASN, ASOrg: r.ASOrg, DeviceType: r.Device,
			Browser: r.Browser, OS: r.OS, ReferrerDomain: r.Referrer, UTMSource: r.UTMSource, UTMCampaign: r.UTMCampaign})
		r.ProgramID, r.AffiliateID, r.Sub1, r.Attribution = k, "", "", ""
		keyed = append(keyed, r)
	}
	return got(stats.Program, keyed)
}

func isDimension(g stats.GroupBy) bool { return slices.Contains(stats.OriginGroupings, g) }

// dimFilters are the filters the tests ask for, each with what it keeps.
type dimFilter struct {
	where map[string]string
	keeps func(events.ClickOrigin) bool
	// program is the program_id asked, if any.
	program string
}

var dimFilters = []dimFilter{
	{nil, func(events.ClickOrigin) bool { return true }, ""},
	{map[string]string{"country": "DE"}, func(o events.ClickOrigin) bool { return o.Country == "DE" }, ""},
	{map[string]string{"device": "mobile", "hosting": "false"}, func(o events.ClickOrigin) bool { return o.DeviceType == "mobile" && o.Hosting == 0 }, ""},
	{map[string]string{"hosting": "true"}, func(o events.ClickOrigin) bool { return o.Hosting == 1 }, ""},
	{map[string]string{"asn": "3320", "browser": "Chrome", "os": "Android"}, func(o events.ClickOrigin) bool {
		return o.ASN == 3320 && o.Browser == "Chrome" && o.OS == "Android"
	}, ""},
	{map[string]string{"referrer": "google.com", "utm_source": "newsletter", "utm_campaign": "spring"}, func(o events.ClickOrigin) bool {
		return o.ReferrerDomain == "google.com" && o.UTMSource == "newsletter" && o.UTMCampaign == "spring"
	}, ""},
	{nil, func(events.ClickOrigin) bool { return true }, "prg_adv1_1"},
	{map[string]string{"country": "DE"}, func(o events.ClickOrigin) bool { return o.Country == "DE" }, "prg_adv2_0"},
}

// Stats by where clicks come from, and filtered by it, in zones with half- and quarter-hour
// offsets and across both changes of daylight saving time, for every company, are exact
// against the reference computed from the events: clicks by their own origin, conversions by
// their click's (copied by ingest).
func TestStatsByWhereClicksComeFromAreExact(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, db, conn := chtest.Migrated(t)
	ev := writeTZEvents(t, conn, db)
	s := stats.New(conn, db, stats.Options{})
	groupings := append([]stats.GroupBy{stats.Day, stats.Hour, stats.Link, stats.Attribution}, stats.OriginGroupings...)
	t.Run("fed by the views", func(t *testing.T) { checkOrigins(t, ev, s, groupings, dimFilters) })
	// Migrations 0012, 0013, 0015, 0016 and 0017 again, as on a database that held these events
	// before them: they build the rollups by origin and the clicks' narrow copy from the stored
	// clicks and conversion changes.
	if err := conn.Exec(ctx, "ALTER TABLE "+db+".schema_migrations DELETE WHERE version IN (12, 13, 15, 16, 17)"); err != nil {
		t.Fatal(err)
	}
	waitForMutations(t, conn, db)
	if err := chstore.Migrate(ctx, conn, db, nil); err != nil {
		t.Fatal(err)
	}
	// The filters of the small dimensions alone read the small rollups (0015), by day too; the
	// others, and every grouping's partial UTC days in a zone, the narrow clicks (0017).
	t.Run("built by the migration", func(t *testing.T) {
		checkOrigins(t, ev, s, append([]stats.GroupBy{stats.Day}, stats.OriginGroupings...), dimFilters[:4])
		checkOrigins(t, ev, s, []stats.GroupBy{stats.Link, stats.City}, dimFilters[4:])
	})
}

// weekRanges hold whole weeks (Monday to Sunday) with traffic, which the groupings by origin
// read from the weekly rollups (migration 0016), and days with traffic around them.
var weekRanges = []struct{ tz, from, to string }{
	{"UTC", "2026-03-24", "2026-04-06"},
	{"Asia/Kathmandu", "2026-10-18", "2026-10-30"},
}

func checkOrigins(t *testing.T, ev tzEvents, s *stats.Service, groupings []stats.GroupBy, filters []dimFilter) {
	ctx := context.Background()
	for _, r := range append(slices.Clip(tzRanges), weekRanges...) {
		if r.tz == "America/St_Johns" || r.tz == "Europe/London" {
			continue // long ranges: the others cover what they would
		}
		loc, err := time.LoadLocation(r.tz)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range filters {
			for _, g := range groupings {
				if f.where == nil && f.program == "" && !isDimension(g) {
					continue // TestStatsInTheCallersTimeZoneAreExact
				}
				for _, scope := range tzCompanies {
					for _, currency := range []string{"", "USD"} {
						rows, err := s.Query(ctx, scope, stats.Params{From: date(r.from), To: date(r.to), TZ: r.tz, GroupBy: g, Currency: currency, Where: f.where, ProgramID: f.program})
						if err != nil {
							t.Fatalf("%s %s..%s by %s where %v: %v", r.tz, r.from, r.to, g, f.where, err)
						}
						want := ev.referenceBy(scope, g, loc, r.from, r.to, currency, func(at time.Time, program, affiliate, link, sub1, attribution string, o events.ClickOrigin) (string, bool) {
							keeps := f.keeps(o) && (f.program == "" || program == f.program)
							if isDimension(g) {
								return dimKey(g, o), keeps
							}
							return tzKey(g, at, loc, program, affiliate, link, sub1, attribution), keeps
						})
						if d := diffFigures(dimGot(g, rows), want); d != "" {
							t.Errorf("%s in %s %s..%s by %s where %v in %q:\n%s", scope.CompanyID, r.tz, r.from, r.to, g, f.where, currency, d)
						}
					}
				}
			}
		}
	}
}

func TestResolveRefusesBadFilters(t *testing.T) {
	t.Parallel()
	s := stats.New(nil, "unused", stats.Options{Now: func() time.Time { return today }})
	for _, tt := range []struct {
		name, value, says string
	}{
		{"country", "de", "ISO 3166-1 alpha-2"},
		{"country", "DEU", "ISO 3166-1 alpha-2"},
		{"device", "phone", "desktop, mobile, tablet, bot, other"},
		{"asn", "AS3320", "autonomous system number"},
		{"asn", "0", "autonomous system number"},
		{"asn", "4294967296", "autonomous system number"},
		{"hosting", "yes", "true or false"},
		{"hosting", "1", "true or false"},
		{"referrer", strings.Repeat("a", 257), "1 to 256 characters"},
		{"utm_source", "a\x00b", "without control characters"},
		{"browser", "\xff", "1 to 256 characters"},
	} {
		_, err := s.Resolve(stats.Params{Where: map[string]string{tt.name: tt.value}})
		var pe *stats.ParamError
		if !errors.As(err, &pe) || pe.Field != tt.name || !strings.Contains(pe.Message, tt.says) {
			t.Errorf("%s=%s: %v, want a %s error saying %q", tt.name, strconv.Quote(tt.value), err, tt.name, tt.says)
		}
	}
	if _, err := s.Resolve(stats.Params{GroupBy: stats.City, Where: map[string]string{"country": "DE", "asn": "3320", "hosting": "false"}}); err != nil {
		t.Errorf("good filters: %v", err)
	}
}
