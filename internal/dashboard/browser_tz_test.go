package dashboard_test

import (
	"encoding/csv"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// The overview's days are the user's: in a browser whose zone is on another date than UTC, the
// range ends on the browser's today and today's click and sale are on it, in the charts' report
// and in the file the download link gives.
func TestBrowserOverviewTakesTheBrowsersTimeZone(t *testing.T) {
	s := newStack(t, stackOptions{})
	// A zone whose date differs from UTC's now: +14 from 10:00 UTC, -11 before.
	zone := "Pacific/Kiritimati"
	if time.Now().UTC().Hour() < 10 {
		zone = "Pacific/Pago_Pago"
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	brand := newBrowser(t, s.base, "en", 1280, 900)
	brand.run(emulation.SetTimezoneOverride(zone))
	brand.signUp(s, "zone-brand@example.test", "advertiser", "Zone brand")
	key := brand.createAPIKey("zone")
	aff := newBrowser(t, s.base, "en", 1280, 900)
	aff.signUp(s, "zone-partner@example.test", "affiliate", "Zone partner")
	clickID := s.programFor(t, s.companyOf(t, "zone-brand@example.test"), s.companyOf(t, "zone-partner@example.test"), "Zone", "EUR")
	s.convert(t, key, clickID, "zone-1", "200.00", "EUR")
	today := time.Now().In(loc).Format(time.DateOnly)
	if today == time.Now().UTC().Format(time.DateOnly) {
		t.Fatalf("%s is on UTC's date %s: the test proves nothing", zone, today)
	}

	s.eventually(t, "today's figures in "+zone, func() (bool, string) {
		brand.open("/app")
		brand.waitFor("the charts", `document.querySelector('#chart-conversions svg')`)
		var to, href string
		brand.eval(`document.getElementById('range-form').to.value`, &to)
		brand.eval(`document.getElementById('export').href`, &href)
		u, err := url.Parse(href)
		if err != nil || to != today || u.Query().Get("tz") != zone || u.Query().Get("to") != today {
			return false, fmt.Sprintf("range to %s, download %s", to, href)
		}
		var pending int
		brand.eval(`Number(document.querySelector('#chart-conversions .plot').dataset.totalPending)`, &pending)
		var body string
		brand.run(chromedp.Evaluate(`fetch(document.getElementById('export').href).then(r => r.text())`, &body,
			func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
		recs, err := csv.NewReader(strings.NewReader(body)).ReadAll()
		if err != nil || len(recs) < 2 {
			return false, fmt.Sprintf("%v: %q", err, body)
		}
		last := recs[len(recs)-1] // day, currency, clicks, unique_clicks, conversions, ...
		return pending == 1 && last[0] == today && last[2] == "1" && last[4] == "1", fmt.Sprintf("pending %d, last row %q", pending, last)
	})
}
