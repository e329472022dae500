package httpapi_test

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/partnerstream/partnerstream/internal/conversions"
	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/stats"
)

// Stats by country, device and hour, filtered by where clicks come from, in zones with half-
// and quarter-hour offsets and across a change of daylight saving time, are exact against the
// events on the three families of routes and in the CSV file; conversions count under their
// click's origin.
func TestStatsByWhereClicksComeFrom(t *testing.T) {
	f := newStatsFixture(t)
	f.srv.MountExports(conversions.New(f.db, conversions.Options{}), stats.New(f.ch, f.chDB, stats.Options{}))
	tr := writeTZTraffic(t, f)
	routes := f.statsRoutes(t)
	filters := []struct {
		q     url.Values
		keeps func(events.ClickOrigin) bool
	}{
		{url.Values{}, func(events.ClickOrigin) bool { return true }},
		{url.Values{"country": {"DE"}}, func(o events.ClickOrigin) bool { return o.Country == "DE" }},
		{url.Values{"device": {"mobile"}, "hosting": {"false"}}, func(o events.ClickOrigin) bool { return o.DeviceType == "mobile" && o.Hosting == 0 }},
		{url.Values{"asn": {"16509"}}, func(o events.ClickOrigin) bool { return o.ASN == 16509 }},
	}
	groupings := map[string]func(events.ClickOrigin) string{
		"country": func(o events.ClickOrigin) string { return o.Country },
		"device":  func(o events.ClickOrigin) string { return o.DeviceType },
		"hour":    nil,
		"asn":     func(o events.ClickOrigin) string { return fmt.Sprintf("%d %s", o.ASN, o.ASOrg) },
	}
	for _, tt := range []struct{ tz, from, to string }{
		{"UTC", "2026-10-24", "2026-10-25"},
		{"Asia/Kolkata", "2026-10-24", "2026-10-26"},
		{"Asia/Kathmandu", "2026-10-23", "2026-10-24"},
		{"Europe/Berlin", "2026-10-24", "2026-10-26"},
	} {
		for groupBy, dim := range groupings {
			for _, fl := range filters {
				want := tr.referenceBy(t, f.advID, groupBy, tt.tz, tt.from, tt.to, func(timeKey string, o events.ClickOrigin) (string, bool) {
					if dim == nil {
						return timeKey, fl.keeps(o)
					}
					return dim(o), fl.keeps(o)
				})
				q := url.Values{"from": {tt.from}, "to": {tt.to}, "tz": {tt.tz}, "group_by": {groupBy}}
				for k, v := range fl.q {
					q[k] = v
				}
				for _, rt := range routes {
					r := f.get(t, rt.path, q, rt.headers)
					if r.status != 200 {
						t.Fatalf("%s?%s: %d %s", rt.path, q.Encode(), r.status, r.raw)
					}
					var got []string
					for _, row := range decode[tzReport](t, r).Data {
						k := str(row.Hour)
						switch groupBy {
						case "country":
							k = str(row.Country)
						case "device":
							k = str(row.Device)
						case "asn":
							k = fmt.Sprintf("%d %s", *row.ASN, str(row.ASOrg))
						}
						got = append(got, fmt.Sprintf("%s %d/%d %d %s", k, row.Clicks, row.UniqueClicks, row.Conversions.Total, str(row.Commission)))
					}
					if groupBy != "hour" {
						slices.Sort(got)
					}
					if !slices.Equal(got, want) {
						t.Errorf("%s?%s:\n got  %q\n want %q", rt.path, q.Encode(), got, want)
					}
				}
				recs := csvOf(t, f.get(t, "/api/v1/stats.csv", q, apiKey(f.adv)))
				var got []string
				for _, rec := range recs[1:] {
					k := rec[0]
					if groupBy == "asn" {
						k, rec = rec[0]+" "+rec[1], rec[1:]
					}
					got = append(got, fmt.Sprintf("%s %s/%s %s %s", k, rec[2], rec[3], rec[4], rec[11]))
				}
				if groupBy != "hour" {
					slices.Sort(got)
				}
				if header := strings.Join(recs[0][:2], " "); groupBy == "asn" && header != "asn as_org" || groupBy != "asn" && recs[0][0] != groupBy || !slices.Equal(got, want) {
					t.Errorf("stats.csv?%s: columns %q\n got  %q\n want %q", q.Encode(), recs[0], got, want)
				}
			}
		}
	}
}
