package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/partnerstream/partnerstream/internal/auth"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/links"
	"github.com/partnerstream/partnerstream/internal/programs"
	"github.com/partnerstream/partnerstream/internal/trackscript"
)

// brandSite is a brand's own site on a loopback origin: a landing page that includes the
// tracking script with the key of ?k=, and a sign-up form whose handler registers the
// conversion on the brand's server with its secret key and the click id the form carried.
func brandSite(t *testing.T, s *stack, secretKey *string) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Shop</title>
<script async src="%s/t.js?key=%s"></script></head><body><h1>Shoes</h1>
<form method="post" action="/signup"><input type="hidden" name="partnerstream_click_id">
<input name="email" value="buyer@example.test"><button type="submit">Sign up</button></form></body></html>`,
			s.base, url.QueryEscape(r.URL.Query().Get("k")))
	})
	mux.HandleFunc("POST /signup", func(w http.ResponseWriter, r *http.Request) {
		click := r.FormValue("partnerstream_click_id")
		body, _ := json.Marshal(map[string]string{"click_id": click, "external_id": "signup-" + click[len(click)-8:], "type": "signup"})
		req, _ := http.NewRequest("POST", s.base+"/api/v1/conversions", strings.NewReader(string(body)))
		req.Header.Set("x-api-key", *secretKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var conv struct {
			ID      string `json:"id"`
			ClickID string `json:"click_id"`
		}
		_ = json.Unmarshal(raw, &conv)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html lang="en"><body><p id="result" data-status="%d" data-click="%s">%s</p></body></html>`,
			resp.StatusCode, html.EscapeString(conv.ClickID), html.EscapeString(conv.ID))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// settled waits for the script's registration to end and returns the click id it leaves
// ("" for none).
func (b *browser) settled() string {
	b.t.Helper()
	b.waitFor("the tracking script", `!!(window.partnerstream && window.partnerstream.ready)`)
	var id string
	b.run(chromedp.Evaluate(`window.partnerstream.ready.then(() => window.partnerstream.clickId || '')`, &id,
		func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
	return id
}

// A visitor who arrives on the brand's own site with ?via=<code> never sees /c/: the script
// registers the click, keeps it in a first-party cookie and fills the sign-up form, whose
// conversion is attributed to that click; the click counts in the statistics. A foreign
// origin, a wrong key, a secret key and another program's key get no click, and the page
// shows no error.
func TestBrowserTrackingScript(t *testing.T) {
	s := newStack(t, stackOptions{})
	ctx := context.Background()
	b := newBrowser(t, s.base, "en", 1280, 900)
	// A person's browser: headless Chromium says so in its user agent, and its clicks would
	// count as a bot's.
	b.run(emulation.SetUserAgentOverride("Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/138.0 Safari/537.36"))
	adv := "script-brand@example.test"
	b.signUp(s, adv, "advertiser", "Script brand")
	u, err := s.ids.UserByEmail(ctx, adv)
	if err != nil {
		t.Fatal(err)
	}
	owner := programs.Actor{CompanyID: u.CompanyID, Kind: identity.Advertiser, Role: "owner"}
	window := 14
	program := func(name string) string {
		p, err := s.prg.CreateProgram(ctx, owner, programs.ProgramInput{Name: name, LandingURL: "https://shop.example/", Currency: "EUR",
			Commission: &programs.RuleInput{Type: "fixed", Amount: "5.00"}, Visibility: "public", AttributionWindowDays: &window})
		if err != nil {
			t.Fatal(err)
		}
		return p.ID
	}
	shoes, hats := program("Shoes"), program("Hats")
	aff, _, err := s.ids.CreateCompany(ctx, identity.NewCompany{Kind: identity.Affiliate, Name: "Anna", OwnerEmail: "anna@example.test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.prg.Apply(ctx, programs.Actor{CompanyID: aff.ID, Kind: identity.Affiliate, Role: "owner"}, programs.ApplyInput{ProgramID: shoes}); err != nil {
		t.Fatal(err)
	}
	link, err := s.lks.Create(ctx, aff.ID, identity.Affiliate, links.NewLink{ProgramID: shoes})
	if err != nil {
		t.Fatal(err)
	}

	// The keys, made on Settings > API keys: the brand's server key, and a publishable key of
	// each program.
	secret := b.createAPIKey("server")
	publishable := func(name, programID string) string {
		b.open("/app/settings/api-keys")
		b.waitFor("the programs", fmt.Sprintf(`!!document.querySelector('#key-program option[value=%q]')`, programID))
		b.run(chromedp.SendKeys("#key-name", name, chromedp.ByQuery),
			chromedp.SetValue("#key-kind", "publishable", chromedp.ByQuery),
			chromedp.Evaluate(`document.querySelector('#key-kind').dispatchEvent(new Event('change'))`, nil),
			chromedp.SetValue("#key-program", programID, chromedp.ByQuery),
			chromedp.Click(`#create-form button[type=submit]`, chromedp.ByQuery),
			chromedp.WaitVisible("#new-key-snippet", chromedp.ByQuery))
		var key, snippet string
		b.run(chromedp.Value("#new-key-value", &key, chromedp.ByQuery), chromedp.Value("#new-key-script", &snippet, chromedp.ByQuery))
		if !strings.HasPrefix(key, auth.PublishableKeyPrefix) || !strings.Contains(snippet, "/t.js?key="+key) {
			t.Fatalf("publishable key %q, snippet %q", key, snippet)
		}
		b.waitFor("the key's program in the list", fmt.Sprintf(`[...document.querySelectorAll('#keys td')].some(td => td.textContent.includes(%q))`, name))
		return key
	}
	shoesKey, hatsKey := publishable("shoes site", shoes), publishable("hats site", hats)

	site := brandSite(t, s, &secret)
	foreign := brandSite(t, s, &secret)
	if _, err := s.script.SetSettings(ctx, u.CompanyID, hats, trackscript.Settings{Origins: []string{site.URL},
		Params: []string{"via"}, Model: trackscript.LastClick}); err != nil {
		t.Fatal(err)
	}
	// Shoes' settings and its Stripe endpoint, on Settings > Integrations.
	b.open("/app/settings/integrations")
	b.waitFor("the programs", fmt.Sprintf(`!!document.querySelector('#int-program option[value=%q]')`, shoes))
	b.run(chromedp.SetValue("#int-program", shoes, chromedp.ByQuery),
		chromedp.Evaluate(`document.querySelector('#int-program').dispatchEvent(new Event('change'))`, nil))
	b.waitFor("the program's settings", fmt.Sprintf(`document.querySelector('#script-form').dataset.program === %q`, shoes))
	if cookie := b.text("#script-cookie"); !strings.Contains(cookie, "14 days") {
		t.Fatalf("the settings say %q, want the program's 14-day window", cookie)
	}
	b.run(chromedp.SetValue("#script-origins", "ftp://"+strings.TrimPrefix(site.URL, "http://"), chromedp.ByQuery),
		chromedp.Click(`#script-form button[type=submit]`, chromedp.ByQuery))
	b.waitFor("the origin's error under its field", `document.querySelector('#script-origins').getAttribute('aria-invalid') === 'true'`)
	b.run(chromedp.SetValue("#script-origins", site.URL, chromedp.ByQuery), chromedp.SetValue("#script-params", "via, ref", chromedp.ByQuery),
		chromedp.Click(`#script-form button[type=submit]`, chromedp.ByQuery))
	b.waitFor("the settings saved", `!document.querySelector('#script-origins').hasAttribute('aria-invalid') && document.querySelector('#flash').textContent.includes('saved')`)
	if st, err := s.script.Settings(ctx, u.CompanyID, shoes); err != nil || len(st.Origins) != 1 || st.Origins[0] != site.URL ||
		strings.Join(st.Params, ",") != "via,ref" || st.WindowDays != 14 {
		t.Fatalf("shoes' settings %+v (%v)", st, err)
	}
	b.run(chromedp.SendKeys("#stripe-secret", "whsec_browserTestSecret", chromedp.ByQuery),
		chromedp.Click(`#stripe-form button[type=submit]`, chromedp.ByQuery))
	b.waitFor("the Stripe endpoint's URL", `!document.querySelector('#stripe-url-box').hidden`)
	var stripeURL string
	b.run(chromedp.Value("#stripe-url", &stripeURL, chromedp.ByQuery))
	if !strings.HasPrefix(stripeURL, s.base+"/api/integrations/stripe/stp_") {
		t.Fatalf("the Stripe endpoint URL shown: %q", stripeURL)
	}
	b.waitFor("the Stripe status", `!document.querySelector('#stripe-disconnect').hidden`)

	// Refused: the page works and gets no click.
	for name, page := range map[string]string{
		"a foreign origin":      foreign.URL + "/?via=" + link.Code + "&k=" + shoesKey,
		"a wrong key":           site.URL + "/?via=" + link.Code + "&k=" + auth.PublishableKeyPrefix + strings.Repeat("a", 40),
		"a secret key":          site.URL + "/?via=" + link.Code + "&k=" + secret,
		"another program's key": site.URL + "/?via=" + link.Code + "&k=" + hatsKey,
	} {
		b.run(network.ClearBrowserCookies(), chromedp.Navigate(page), chromedp.WaitReady("body", chromedp.ByQuery))
		if id := b.settled(); id != "" {
			t.Errorf("%s: the page got click %s", name, id)
		}
		var cookies string
		b.eval(`document.cookie`, &cookies)
		if strings.Contains(cookies, "ps_click_id") {
			t.Errorf("%s: the page keeps a click cookie: %s", name, cookies)
		}
	}

	// The real thing: the click, its cookie for the program's window, the filled form.
	b.run(network.ClearBrowserCookies(), chromedp.Navigate(site.URL+"/?via="+link.Code+"&k="+shoesKey), chromedp.WaitReady("body", chromedp.ByQuery))
	clickID := b.settled()
	if !strings.HasPrefix(clickID, "clk_") {
		t.Fatalf("the page's click id is %q", clickID)
	}
	var cookies, field string
	b.eval(`document.cookie`, &cookies)
	b.eval(`document.querySelector('input[name=partnerstream_click_id]').value`, &field)
	if !strings.Contains(cookies, "ps_click_id="+clickID) || field != clickID {
		t.Fatalf("cookie %q and form field %q, want the click id %s", cookies, field, clickID)
	}
	var maxAge float64
	b.run(chromedp.ActionFunc(func(ctx context.Context) error {
		all, err := network.GetCookies().WithURLs([]string{site.URL}).Do(ctx)
		for _, c := range all {
			if c.Name == "ps_click_id" {
				maxAge = c.Expires
			}
		}
		return err
	}))
	var now float64
	b.eval(`Date.now() / 1000`, &now)
	if days := (maxAge - now) / 86400; days < 13.9 || days > 14.1 {
		t.Fatalf("the click cookie lives %.2f days, want the program's 14-day window", days)
	}

	// A later page without ?via keeps the click; the form converts with it.
	b.run(chromedp.Navigate(site.URL+"/?k="+shoesKey), chromedp.WaitReady("body", chromedp.ByQuery))
	if again := b.settled(); again != clickID {
		t.Fatalf("a later page has click %q, want %s", again, clickID)
	}
	b.run(chromedp.Click(`form button[type=submit]`, chromedp.ByQuery), chromedp.WaitReady("#result", chromedp.ByQuery))
	var status, attributed, conversion string
	b.run(chromedp.AttributeValue("#result", "data-status", &status, nil, chromedp.ByQuery),
		chromedp.AttributeValue("#result", "data-click", &attributed, nil, chromedp.ByQuery))
	conversion = b.text("#result")
	if status != "201" || attributed != clickID || !strings.HasPrefix(conversion, "cnv_") {
		t.Fatalf("the sign-up registered %q (status %s, click %q), want a conversion of click %s", conversion, status, attributed, clickID)
	}

	// The click went the redirect's way: Kafka, ingest, ClickHouse, the statistics.
	s.eventually(t, "the script's click in the statistics", func() (bool, string) {
		code, body := s.call(t, "GET", "/api/v1/stats?program_id="+shoes, secret, "")
		var report struct {
			Totals struct {
				Clicks      int `json:"clicks"`
				Conversions struct {
					Total int `json:"total"`
				} `json:"conversions"`
			} `json:"totals"`
		}
		_ = json.Unmarshal([]byte(body), &report)
		return code == 200 && report.Totals.Clicks == 1 && report.Totals.Conversions.Total == 1, fmt.Sprintf("%d %s", code, body)
	})

	// The endpoint says why it refuses, to whoever calls it without the script.
	for name, c := range map[string]struct {
		origin, key string
		status      int
	}{
		"foreign origin":        {foreign.URL, shoesKey, 403},
		"no origin":             {"", shoesKey, 403},
		"wrong key":             {site.URL, auth.PublishableKeyPrefix + strings.Repeat("a", 40), 401},
		"secret key":            {site.URL, secret, 401},
		"another program's key": {site.URL, hatsKey, 404},
	} {
		req, _ := http.NewRequest("POST", s.base+"/api/script/clicks",
			strings.NewReader(`{"key":"`+c.key+`","code":"`+link.Code+`","url":"`+site.URL+`/"}`))
		req.Header.Set("Content-Type", "text/plain")
		if c.origin != "" {
			req.Header.Set("Origin", c.origin)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != c.status || resp.Header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("%s: %d (Access-Control-Allow-Origin %q), want %d without it", name, resp.StatusCode,
				resp.Header.Get("Access-Control-Allow-Origin"), c.status)
		}
	}

	// The program's model decides which partner a visitor who arrives again through another
	// partner's link belongs to: the last one (the default) or the first.
	other, err := s.lks.Create(ctx, aff.ID, identity.Affiliate, links.NewLink{ProgramID: shoes})
	if err != nil {
		t.Fatal(err)
	}
	b.run(chromedp.Navigate(site.URL+"/?via="+other.Code+"&k="+shoesKey), chromedp.WaitReady("body", chromedp.ByQuery))
	last := b.settled()
	if !strings.HasPrefix(last, "clk_") || last == clickID {
		t.Fatalf("last click: the page kept click %q after a new link, want a new click", last)
	}
	if _, err := s.script.SetSettings(ctx, u.CompanyID, shoes, trackscript.Settings{Origins: []string{site.URL},
		Params: []string{"via", "ref"}, Model: trackscript.FirstClick}); err != nil {
		t.Fatal(err)
	}
	// Pages take new settings when their cached /t.js expires (five minutes); this one at once.
	b.run(network.SetCacheDisabled(true), chromedp.Navigate(site.URL+"/?ref="+link.Code+"&k="+shoesKey), chromedp.WaitReady("body", chromedp.ByQuery))
	if first := b.settled(); first != last {
		t.Fatalf("first click: the page has click %q after another link, want the first one %s", first, last)
	}
}
