package dashboard_test

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/partnerstream/partnerstream/internal/enrich/enrichtest"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/links"
	"github.com/partnerstream/partnerstream/internal/programs"
)

// The visitors of the traffic test: two networks of known countries, and loopback, which no
// database places.
var trafficPlaces = []enrichtest.Network{
	{CIDR: "198.51.100.0/24", Country: "DE"},
	{CIDR: "203.0.113.0/24", Country: "FR"},
}

const (
	windowsChrome = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36"
	iPhoneSafari  = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Mobile/15E148 Safari/604.1"
)

// trafficWords are what the traffic page must say, per language.
var trafficWords = map[string]map[string]string{
	"en": {"DE": "Germany", "FR": "France", "": "Unknown", "desktop": "Desktop", "mobile": "Mobile", "title": "Traffic", "direct": "Direct",
		"not_one_of": "Choose one of the options."},
	"es": {"DE": "Alemania", "FR": "Francia", "": "Desconocido", "desktop": "Ordenador", "mobile": "Móvil", "title": "Tráfico", "direct": "Directo",
		"not_one_of": "Elige una de las opciones."},
}

// tableRow is one row of a traffic table as the page shows it: its key (the API's value) and
// its cells.
type tableRow struct {
	Key   string   `json:"key"`
	Cells []string `json:"cells"`
}

// trafficTable reads the rows of a dimension's table.
func (b *browser) trafficTable(dim string) []tableRow {
	b.t.Helper()
	var raw string
	b.eval(fmt.Sprintf(`JSON.stringify([...document.querySelectorAll('[data-dimension=%q] tbody tr')].map((tr) =>
		({ key: tr.dataset.key, cells: [...tr.querySelectorAll('td')].map((td) => td.textContent) })))`, dim), &raw)
	var rows []tableRow
	if err := json.Unmarshal([]byte(raw), &rows); err != nil {
		b.t.Fatalf("the %s table: %v", dim, err)
	}
	return rows
}

// rowOf finds the row of key; ok is false without one.
func rowOf(rows []tableRow, key string) (tableRow, bool) {
	for _, r := range rows {
		if r.Key == key {
			return r, true
		}
	}
	return tableRow{}, false
}

// wantRow checks a row's name and figures: clicks, unique clicks, conversions, and the digits
// of its commission ("" for any).
func wantRow(rows []tableRow, key, name string, clicks, unique, conversions int, commission string) (bool, string) {
	r, ok := rowOf(rows, key)
	if !ok {
		return false, fmt.Sprintf("no row %q in %v", key, rows)
	}
	if len(r.Cells) != 6 || r.Cells[0] != name || r.Cells[1] != fmt.Sprint(clicks) || r.Cells[3] != fmt.Sprint(conversions) ||
		(unique >= 0 && r.Cells[2] != fmt.Sprint(unique)) || (commission != "" && !containsDigits(r.Cells[4], commission)) {
		return false, fmt.Sprintf("row %q is %q, want %s, %d clicks (%d unique), %d conversions, commission %s", key, r.Cells, name, clicks, unique, conversions, commission)
	}
	return true, ""
}

// TestBrowserTrafficShowsWhereClicksComeFrom: clicks from Germany (two from one visitor, one of
// them converting), France and an address no database places, on a desktop and a phone, with
// a referrer and UTM parameters, reach the traffic page of the brand and of the affiliate, in
// English and Spanish: each table names its values in the page's language (unknown ones
// too) with clicks, unique clicks, conversions and commission; the hourly chart counts them in
// the chosen time zone; the country and device filters narrow every table and the chart
// together; the page fits a desktop and a phone and passes axe.
func TestBrowserTrafficShowsWhereClicksComeFrom(t *testing.T) {
	s := newStack(t, stackOptions{places: trafficPlaces})
	axe := axeSource(t)
	ctx := context.Background()
	for _, lang := range []string{"en", "es"} {
		w := trafficWords[lang]
		t.Run("in "+lang, func(t *testing.T) {
			_, brandSession, advID, _, affSession, affID := s.signUpPair(t, "traffic-"+lang, "Traffic "+lang)
			key, _, err := s.ids.CreateAPIKey(ctx, advID, "traffic")
			if err != nil {
				t.Fatal(err)
			}
			brand, aff := newBrowser(t, s.base, lang, 1280, 800), newBrowser(t, s.base, lang, 1280, 800)
			brand.signInWith(brandSession)
			aff.signInWith(affSession)
			prog, err := s.prg.CreateProgram(ctx, programs.Actor{CompanyID: advID, Kind: identity.Advertiser, Role: "owner"},
				programs.ProgramInput{Name: "Traffic " + lang, LandingURL: "https://shop.example/", Currency: "EUR",
					Commission: &programs.RuleInput{Type: "percent", Percent: "10"}, Visibility: "public"})
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := s.prg.Apply(ctx, programs.Actor{CompanyID: affID, Kind: identity.Affiliate, Role: "owner"}, programs.ApplyInput{ProgramID: prog.ID}); err != nil {
				t.Fatal(err)
			}
			link, err := s.lks.Create(ctx, affID, identity.Affiliate, links.NewLink{ProgramID: prog.ID,
				DestinationURL: "https://shop.example/sale?utm_source=newsletter&utm_campaign=spring"})
			if err != nil {
				t.Fatal(err)
			}
			hourBefore := time.Now().UTC().Truncate(time.Hour)
			german := visitor{ip: "198.51.100.7", userAgent: windowsChrome, referrer: "https://news.example.com/today"}
			converting := s.visit(t, link.Code, german)
			s.visit(t, link.Code, german)
			s.visit(t, link.Code, visitor{ip: "203.0.113.9", userAgent: iPhoneSafari})
			s.visit(t, link.Code, visitor{userAgent: windowsChrome})
			clicked := time.Now()
			// The German visitor's second click is a repeat, unless the UTC hour turned between.
			germanUnique := 1
			if !clicked.UTC().Truncate(time.Hour).Equal(hourBefore) {
				germanUnique = -1
			}
			s.convert(t, key, converting, "traffic-"+lang, "200.00", "EUR")

			for _, who := range []*browser{brand, aff} {
				s.eventually(t, "the countries and devices", func() (bool, string) {
					who.open("/app/traffic?lang=" + lang)
					who.settle("the traffic page")
					countries, devices := who.trafficTable("country"), who.trafficTable("device")
					for _, c := range []func() (bool, string){
						func() (bool, string) { return wantRow(countries, "DE", w["DE"], 2, germanUnique, 1, "2000") },
						func() (bool, string) { return wantRow(countries, "FR", w["FR"], 1, 1, 0, "") },
						func() (bool, string) { return wantRow(countries, "", w[""], 1, 1, 0, "") },
						func() (bool, string) { return wantRow(devices, "desktop", w["desktop"], 3, -1, 1, "2000") },
						func() (bool, string) { return wantRow(devices, "mobile", w["mobile"], 1, 1, 0, "") },
						func() (bool, string) { return wantRow(who.trafficTable("referrer"), "", w["direct"], 2, -1, 0, "") },
						func() (bool, string) {
							return wantRow(who.trafficTable("utm_source"), "newsletter", "newsletter", 4, -1, 1, "2000")
						},
						func() (bool, string) {
							return wantRow(who.trafficTable("utm_campaign"), "spring", "spring", 4, -1, 1, "2000")
						},
					} {
						if ok, why := c(); !ok {
							return false, why
						}
					}
					if r, ok := rowOf(who.trafficTable("referrer"), "example.com"); !ok || r.Cells[1] != "2" {
						return false, fmt.Sprintf("the referrer example.com: %v", who.trafficTable("referrer"))
					}
					if n := len(who.trafficTable("browser")); n < 2 {
						return false, fmt.Sprintf("%d browsers", n)
					}
					var total string
					who.eval(`document.querySelector('#chart-hours .plot').dataset.totalClicks || ''`, &total)
					return total == "4", "the hourly chart counts " + total + " clicks"
				})
			}
			// Each table's download link gives its report of the view as a file.
			var body string
			brand.run(chromedp.Evaluate(`fetch(document.getElementById('export-country').href).then(r => r.text())`, &body,
				func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
			recs, err := csv.NewReader(strings.NewReader(body)).ReadAll()
			if err != nil || len(recs) != 4 || recs[0][0] != "country" {
				t.Fatalf("the countries' file: %v: %q", err, body)
			}
			if de := recs[1]; de[0] != "DE" || de[2] != "2" || de[4] != "1" { // country, currency, clicks, unique_clicks, conversions, ...
				t.Errorf("the countries' file starts with %q, want Germany's 2 clicks and 1 conversion", de)
			}
			if got := brand.text("h1"); got != w["title"] {
				t.Errorf("the heading is %q, want %q", got, w["title"])
			}
			brand.screenshot("traffic")
			for _, vp := range viewports {
				brand.viewport(vp.width, vp.height)
				where := fmt.Sprintf("the traffic page (%s, %d px)", lang, vp.width)
				brand.checkFits(where)
				brand.checkAxe(where, axe)
			}
			// At 1024 px the navigation folds behind the menu button: nothing scrolls sideways.
			brand.viewport(1024, 768)
			brand.checkFits(fmt.Sprintf("the traffic page (%s, 1024 px)", lang))
			brand.viewport(1280, 800)

			// The filters narrow the chart and every table together, and stay in the address.
			brand.eval2(`(f => { f.country.value = 'DE'; f.requestSubmit(); })(document.getElementById('traffic-form'))`)
			brand.waitFor("the German traffic", `document.querySelector('#chart-hours .plot').dataset.totalClicks === '2'
				&& !document.querySelector('[aria-busy="true"]') && location.search.includes('country=DE')`)
			if ok, why := wantRow(brand.trafficTable("device"), "desktop", w["desktop"], 2, germanUnique, 1, "2000"); !ok || len(brand.trafficTable("device")) != 1 {
				t.Errorf("the devices of Germany: %s %v", why, brand.trafficTable("device"))
			}
			brand.eval2(`(f => { f.country.value = ''; f.device.value = 'mobile'; f.requestSubmit(); })(document.getElementById('traffic-form'))`)
			brand.waitFor("the mobile traffic", `document.querySelector('#chart-hours .plot').dataset.totalClicks === '1'
				&& !document.querySelector('[aria-busy="true"]') && location.search.includes('device=mobile')`)
			if countries := brand.trafficTable("country"); len(countries) != 1 || countries[0].Key != "FR" {
				t.Errorf("the countries of mobile clicks: %v, want France alone", countries)
			}

			// Another time zone moves the clicks to its hours: Kathmandu is UTC+5:45.
			zone := "Asia/Kathmandu"
			loc, err := time.LoadLocation(zone)
			if err != nil {
				t.Fatal(err)
			}
			local := clicked.In(loc)
			first := time.Date(local.Year(), local.Month(), local.Day()-6, 0, 0, 0, 0, loc)
			// Chromium lists the zone under ICU's name, Asia/Katmandu, which the API takes too.
			chosen := brand.eval2(fmt.Sprintf(`(f => { f.device.value = ''; f.tz.value = [...f.tz.options].find((o) => /Kath?mandu/.test(o.value)).value;
				f.from.value = %q; f.to.value = %q; f.requestSubmit(); return f.tz.value; })(document.getElementById('traffic-form'))`,
				first.Format(time.DateOnly), local.Format(time.DateOnly)))
			brand.waitFor("the clicks in "+chosen, fmt.Sprintf(`document.querySelector('#chart-hours .plot').dataset.totalClicks === '4'
				&& !document.querySelector('[aria-busy="true"]') && new URLSearchParams(location.search).get('tz') === %q`, chosen))
			var hours []string
			brand.eval(`[...document.querySelectorAll('#chart-hours .plot tbody tr')].map((tr) => tr.lastChild.textContent)`, &hours)
			// The clicks are in the hour of clicked, or the one before when an hour began while
			// they were made.
			at := int(clicked.Sub(first) / time.Hour)
			inHours := 0
			for i, v := range hours {
				if v != "0" && (i == at || i == at-1) {
					n := 0
					fmt.Sscan(v, &n)
					inHours += n
				}
			}
			if len(hours) != 7*24 || inHours != 4 {
				t.Errorf("the hours of %s: %d rows (want 168), %d clicks at hour %d or the one before (want 4): %v", zone, len(hours), inHours, at, hours)
			}
			if caption := brand.text("#chart-hours figcaption"); !strings.Contains(caption, chosen) {
				t.Errorf("the chart's caption %q does not name the zone", caption)
			}
			// The address keeps the view: opened again, the page shows the same zone.
			brand.open("/app/traffic" + brand.eval2(`location.search`))
			brand.settle("the traffic page again")
			if got := brand.eval2(`document.getElementById('tz').value`); got != chosen {
				t.Errorf("the zone after a reload is %q, want %s", got, chosen)
			}

			// A zone the API does not know, from an edited address, is refused under its field.
			brand.open("/app/traffic?lang=" + lang + "&tz=Nowhere%2FLand")
			brand.waitFor("the refused zone", `document.getElementById('tz').getAttribute('aria-invalid') === 'true'`)
			if msg, flash := brand.text("#tz-error"), brand.text("#flash"); msg != w["not_one_of"] || strings.Contains(flash, formWords[lang]["generic"]) {
				t.Errorf("the refused zone says %q under the field (want %q) and %q above", msg, w["not_one_of"], flash)
			}
		})
	}
}
