package httpapi_test

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/conversions"
	"github.com/partnerstream/partnerstream/internal/enrich"
	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/ingest"
	"github.com/partnerstream/partnerstream/internal/money"
	"github.com/partnerstream/partnerstream/internal/stats"
)

// tzTraffic is the fixture companies' clicks every 7 minutes and conversions every 97 from
// 23 to 27 October 2026 (Europe/Berlin goes back from +2 to +1 on the 25th at 01:00 UTC), with
// every fifth click a visitor's repeat and every thirteenth a bot, and a stranger's traffic.
type tzTraffic struct {
	clicks []ingest.Click
	convs  []ingest.Conversion
	origin map[string]events.ClickOrigin // by click id
}

// tzOrigins are the origins of the traffic's clicks, in turn; a conversion comes from the
// click before it.
var tzOrigins = []struct {
	enriched enrich.Click
	origin   events.ClickOrigin
}{
	{enrich.Click{Address: &enrich.Address{Place: &enrich.Place{Country: "DE", Region: "Berlin", City: "Berlin"}, Network: &enrich.Network{ASN: 3320, Org: "DTAG"}},
		Device: &enrich.Device{Type: "mobile", Browser: "Chrome", OS: "Android"}},
		events.ClickOrigin{Country: "DE", Region: "Berlin", City: "Berlin", ASN: 3320, ASOrg: "DTAG", DeviceType: "mobile", Browser: "Chrome", OS: "Android"}},
	{enrich.Click{Address: &enrich.Address{Place: &enrich.Place{Country: "IN"}, Network: &enrich.Network{ASN: 16509, Org: "AMAZON-02", Hosting: true}},
		Device: &enrich.Device{Type: "desktop", Browser: "Firefox", OS: "Linux"}},
		events.ClickOrigin{Country: "IN", ASN: 16509, ASOrg: "AMAZON-02", Hosting: 1, DeviceType: "desktop", Browser: "Firefox", OS: "Linux"}},
	{enrich.Click{Address: &enrich.Address{Place: &enrich.Place{Country: "NP"}}, Device: &enrich.Device{Type: "mobile", Browser: "Safari", OS: "iOS"}},
		events.ClickOrigin{Country: "NP", DeviceType: "mobile", Browser: "Safari", OS: "iOS"}},
	{enrich.Click{}, events.ClickOrigin{}}, // before enrichment
	{enrich.Click{Address: &enrich.Address{Place: &enrich.Place{Country: "DE", Region: "Bavaria", City: "Munich"}}, Device: &enrich.Device{Type: "tablet", Browser: "Safari", OS: "iOS"}},
		events.ClickOrigin{Country: "DE", Region: "Bavaria", City: "Munich", DeviceType: "tablet", Browser: "Safari", OS: "iOS"}},
}

func writeTZTraffic(t *testing.T, f *statsFixture) tzTraffic {
	t.Helper()
	tr := tzTraffic{origin: map[string]events.ClickOrigin{}}
	start := time.Date(2026, 10, 23, 0, 0, 0, 0, time.UTC)
	statuses := []string{events.CommissionApproved, events.CommissionPending, events.CommissionRejected}
	for i, at := 0, start; at.Before(start.AddDate(0, 0, 4)); i, at = i+1, at.Add(7*time.Minute) {
		adv := f.advID
		if i%4 == 3 {
			adv = "co_stranger"
		}
		tr.clicks = append(tr.clicks, ingest.Click{Click: events.Click{ClickID: fmt.Sprintf("clk_tz_%d", i), OccurredAt: at,
			LinkID: "lnk_" + adv, ProgramID: "prg_" + adv, AffiliateID: f.affID, AdvertiserID: adv, Sub1: strconv.Itoa(i % 3),
			IsDuplicate: i%5 == 0, IsBot: i%13 == 0, UserAgent: "Mozilla/5.0"}, Enriched: tzOrigins[i%len(tzOrigins)].enriched})
		tr.origin[tr.clicks[i].ClickID] = tzOrigins[i%len(tzOrigins)].origin
		if i%13 == 0 {
			tr.origin[tr.clicks[i].ClickID] = events.ClickOrigin{} // a bot: never counted, nor converted
		}
	}
	for i, at := 0, start.Add(3*time.Minute); at.Before(start.AddDate(0, 0, 4)); i, at = i+1, at.Add(97*time.Minute) {
		tr.convs = append(tr.convs, ingest.Conversion{EventID: fmt.Sprintf("evt_tz_%d", i), ID: fmt.Sprintf("cnv_tz_%d", i), Version: 1,
			Status: statuses[i%3], Type: "sale", Currency: "EUR", Amount: int64(1000 + i), Commission: int64(100 + i), OccurredAt: at,
			AdvertiserID: f.advID, ProgramID: "prg_" + f.advID, AffiliateID: f.affID, LinkID: "lnk_" + f.advID, Attribution: "click",
			ClickID: tzClickBefore(tr.clicks, at)})
	}
	if _, err := f.w.WriteClicks(context.Background(), tr.clicks); err != nil {
		t.Fatal(err)
	}
	f.conversions(t, tr.convs)
	return tr
}

// reference is the advertiser's figures from..to in tz by day or hour, computed from the
// events: "key clicks/unique conversions commission" per row, in time order, every day or
// hour present.
func (tr tzTraffic) reference(t *testing.T, adv, groupBy, tz, from, to string) []string {
	t.Helper()
	return tr.referenceBy(t, adv, groupBy, tz, from, to, func(timeKey string, _ events.ClickOrigin) (string, bool) { return timeKey, true })
}

// tzClickBefore is the id of the last of clicks (in time order) before at that is no bot.
func tzClickBefore(clicks []ingest.Click, at time.Time) string {
	id := ""
	for _, c := range clicks {
		if c.OccurredAt.Before(at) && !c.IsBot {
			id = c.ClickID
		}
	}
	return id
}

// referenceBy is reference for any grouping: keyOf names the group of an event by the time
// key ("" unless by day or hour) and the origin of its click, and whether it counts at all.
// Groups other than days and hours are listed in the order of their keys.
func (tr tzTraffic) referenceBy(t *testing.T, adv, groupBy, tz, from, to string, keyOf func(timeKey string, o events.ClickOrigin) (string, bool)) []string {
	t.Helper()
	loc, err := time.LoadLocation(tz)
	if err != nil {
		t.Fatal(err)
	}
	start, _ := time.ParseInLocation(time.DateOnly, from, loc)
	end, _ := time.ParseInLocation(time.DateOnly, to, loc)
	end = end.AddDate(0, 0, 1)
	key := func(at time.Time) string {
		local := at.In(loc)
		switch groupBy {
		case "day":
			return local.Format(time.DateOnly)
		case "hour":
			return at.Add(-time.Duration(local.Minute()) * time.Minute).In(loc).Format(time.RFC3339)
		}
		return ""
	}
	type figures struct {
		clicks, unique, convs int64
		commission            int64
	}
	rows := map[string]*figures{}
	var keys []string
	for at := start; at.Before(end) && (groupBy == "day" || groupBy == "hour"); at = at.Add(time.Hour) {
		if k := key(at); rows[k] == nil {
			rows[k] = &figures{}
			keys = append(keys, k)
		}
	}
	in := func(at time.Time) bool { return !at.Before(start) && at.Before(end) }
	row := func(at time.Time, clickID string) *figures {
		k, ok := keyOf(key(at), tr.origin[clickID])
		if !ok {
			return nil
		}
		if rows[k] == nil {
			rows[k] = &figures{}
			keys = append(keys, k)
		}
		return rows[k]
	}
	for _, c := range tr.clicks {
		if c.AdvertiserID == adv && in(c.OccurredAt) && !c.IsBot {
			r := row(c.OccurredAt, c.ClickID)
			if r == nil {
				continue
			}
			r.clicks++
			if !c.IsDuplicate {
				r.unique++
			}
		}
	}
	for _, c := range tr.convs {
		if c.AdvertiserID == adv && in(c.OccurredAt) {
			r := row(c.OccurredAt, c.ClickID)
			if r == nil {
				continue
			}
			r.convs++
			if c.Status != events.CommissionRejected {
				r.commission += c.Commission
			}
		}
	}
	if groupBy != "day" && groupBy != "hour" {
		slices.Sort(keys)
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		r := rows[k]
		out[i] = fmt.Sprintf("%s %d/%d %d %s", k, r.clicks, r.unique, r.convs, money.FormatSum(money.SumOf(r.commission), "EUR"))
	}
	return out
}

type tzReport struct {
	TZ   string `json:"tz"`
	Data []struct {
		Day          *string `json:"day"`
		Hour         *string `json:"hour"`
		Country      *string `json:"country"`
		Device       *string `json:"device"`
		ASN          *uint32 `json:"asn"`
		ASOrg        *string `json:"as_org"`
		Clicks       int64   `json:"clicks"`
		UniqueClicks int64   `json:"unique_clicks"`
		Conversions  struct {
			Total int64 `json:"total"`
		} `json:"conversions"`
		Commission *string `json:"commission"`
	} `json:"data"`
}

// The stats by day and by hour in UTC, in zones with half- and quarter-hour offsets and across
// a change of daylight saving time are exact against the events, on the three families of
// routes and in the CSV file.
func TestStatsTakeTheCallersTimeZone(t *testing.T) {
	f := newStatsFixture(t)
	f.srv.MountExports(conversions.New(f.db, conversions.Options{}), stats.New(f.ch, f.chDB, stats.Options{}))
	tr := writeTZTraffic(t, f)
	routes := f.statsRoutes(t)
	for _, tt := range []struct{ tz, from, to string }{
		{"UTC", "2026-10-24", "2026-10-25"},
		{"Asia/Kolkata", "2026-10-24", "2026-10-26"},
		{"Asia/Kathmandu", "2026-10-23", "2026-10-24"},
		{"Europe/Berlin", "2026-10-24", "2026-10-26"},
	} {
		for _, groupBy := range []string{"day", "hour"} {
			want := tr.reference(t, f.advID, groupBy, tt.tz, tt.from, tt.to)
			q := url.Values{"from": {tt.from}, "to": {tt.to}, "tz": {tt.tz}, "group_by": {groupBy}}
			for _, rt := range routes {
				r := f.get(t, rt.path, q, rt.headers)
				if r.status != 200 {
					t.Fatalf("%s?%s: %d %s", rt.path, q.Encode(), r.status, r.raw)
				}
				rep := decode[tzReport](t, r)
				var got []string
				for _, row := range rep.Data {
					k := row.Day
					if groupBy == "hour" {
						k = row.Hour
					}
					got = append(got, fmt.Sprintf("%s %d/%d %d %s", str(k), row.Clicks, row.UniqueClicks, row.Conversions.Total, str(row.Commission)))
				}
				if rep.TZ != tt.tz || !slices.Equal(got, want) {
					t.Errorf("%s?%s: tz %q\n got  %q\n want %q", rt.path, q.Encode(), rep.TZ, got, want)
				}
			}
			recs := csvOf(t, f.get(t, "/api/v1/stats.csv", q, apiKey(f.adv)))
			var got []string
			for _, rec := range recs[1:] {
				got = append(got, fmt.Sprintf("%s %s/%s %s %s", rec[0], rec[2], rec[3], rec[4], rec[11]))
			}
			if recs[0][0] != groupBy || !slices.Equal(got, want) {
				t.Errorf("stats.csv?%s:\n got  %q\n want %q", q.Encode(), got, want)
			}
		}
	}
	// Grouped otherwise, a day that is not a UTC day still counts exactly its own traffic:
	// here the advertiser's one link, in a file as in the report.
	q := url.Values{"from": {"2026-10-24"}, "to": {"2026-10-25"}, "tz": {"Asia/Kathmandu"}, "group_by": {"link"}}
	want := 0
	for _, line := range tr.reference(t, f.advID, "day", "Asia/Kathmandu", "2026-10-24", "2026-10-25") {
		n, _ := strconv.Atoi(strings.Split(strings.Fields(line)[1], "/")[0])
		want += n
	}
	rep := decode[tzReport](t, f.get(t, "/api/partner-api/stats", q, apiKey(f.adv)))
	recs := csvOf(t, f.get(t, "/api/stats.csv", q, f.dashboardAs(t, identity.Advertiser, "member")))
	if len(rep.Data) != 1 || rep.Data[0].Clicks != int64(want) || len(recs) != 2 || recs[1][4] != strconv.Itoa(want) {
		t.Errorf("by link in Asia/Kathmandu: %+v and %q, want %d clicks", rep, recs, want)
	}
}

// statsRoute is a route of the stats report with the advertiser's credentials for it.
type statsRoute struct {
	path    string
	headers map[string]string
}

// statsRoutes are the report's three families of routes, each as the advertiser.
func (f *statsFixture) statsRoutes(t *testing.T) []statsRoute {
	return []statsRoute{
		{"/api/v1/stats", apiKey(f.adv)},
		{"/api/partner-api/stats", apiKey(f.adv)},
		{"/api/stats", f.dashboardAs(t, identity.Advertiser, "member")},
	}
}

// An unknown zone is a 400 naming tz, on every route, and is never queried.
func TestStatsRefuseAnUnknownTimeZone(t *testing.T) {
	f := newFakeFixture(t)
	st := unqueriedStats{stats.New(nil, "", stats.Options{Now: func() time.Time { return statsToday }}), t}
	f.srv.MountStats(st)
	f.srv.MountExports(nil, st)
	for _, path := range []string{"/api/v1/stats", "/api/partner-api/stats", "/api/v1/stats.csv"} {
		for _, tz := range []string{"Mars/Olympus_Mons", "Local", "+05:30", "../../../etc/passwd"} {
			r := f.do(t, "GET", path+"?"+url.Values{"tz": {tz}}.Encode(), apiKey(f.adv), "")
			if r.status != 400 || r.problem.Code != "validation_failed" || len(r.problem.Errors) != 1 ||
				r.problem.Errors[0].Field != "tz" || !strings.Contains(r.raw, `"code":"not_one_of"`) || !strings.Contains(r.problem.Errors[0].Message, "IANA time zone") {
				t.Errorf("%s tz=%s: %d %s", path, tz, r.status, r.raw)
			}
		}
	}
	r := f.do(t, "GET", "/api/v1/stats?tz=Asia/Kolkata&group_by=hour&from=2026-05-01&to=2026-06-01", apiKey(f.adv), "")
	if r.status != 400 || len(r.problem.Errors) != 1 || r.problem.Errors[0].Field != "to" || !strings.Contains(r.problem.Errors[0].Message, "at most 31") {
		t.Errorf("32 days by hour: %d %s", r.status, r.raw)
	}
}
