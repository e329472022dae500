package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3filter"

	"github.com/partnerstream/partnerstream/internal/auth"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/tracking"
	"github.com/partnerstream/partnerstream/internal/tracking/trackingtest"
	"github.com/partnerstream/partnerstream/internal/trackscript"
)

func init() { openapi3filter.RegisterBodyDecoder("text/javascript", openapi3filter.PlainBodyDecoder) }

// The tracking script's routes: settings are validated field by field, a publishable key is
// made only for one's own program, and a script click takes the redirect's way to Kafka
// with the page as its landing URL, while every refusal says why.
func TestTrackingScriptRoutes(t *testing.T) {
	f := newTrackingFixture(t, tracking.ModeAck)
	ctx := context.Background()
	resolver := tracking.NewResolver(f.links, tracking.ResolverOptions{})
	clicks := tracking.NewService(resolver, f.recorder, tracking.ServiceOptions{ClickIDs: f.clickIDs})
	f.srv.MountScript(trackscript.New(f.db, f.ids, clicks))
	admin := f.dashboardAs(t, identity.Advertiser, "owner")
	settings := "/api/programs/" + f.program + "/tracking-script"

	defaults := decode[struct {
		Origins []string `json:"origins"`
		Params  []string `json:"params"`
		Model   string   `json:"model"`
	}](t, f.do(t, "GET", settings, admin, ""))
	if len(defaults.Origins) != 0 || strings.Join(defaults.Params, ",") != "via,ref" || defaults.Model != "last_click" {
		t.Fatalf("defaults %+v", defaults)
	}
	for body, field := range map[string]string{
		`{"origins":["ftp://shop.example"],"params":["via"],"model":"last_click"}`:           "origins[0]",
		`{"origins":["https://shop.example/path"],"params":["via"],"model":"last_click"}`:    "origins[0]",
		`{"origins":["https://a.*.example"],"params":["via"],"model":"last_click"}`:          "origins[0]",
		`{"origins":["https://shop.example"],"params":[],"model":"last_click"}`:              "params",
		`{"origins":["https://shop.example"],"params":["v a"],"model":"last_click"}`:         "params[0]",
		`{"origins":["https://shop.example"],"params":["via"],"model":"middle_click"}`:       "model",
		`{"origins":["https://shop.example"],"params":["a","b","c","d","e","f"],"model":""}`: "params",
	} {
		r := f.do(t, "PUT", settings, admin, body)
		if r.status != 400 || len(r.problem.Errors) != 1 || r.problem.Errors[0].Field != field {
			t.Errorf("%s: %d %s, want 400 naming %s", body, r.status, r.raw, field)
		}
	}
	expect(t, f.do(t, "PUT", settings, f.dashboardAs(t, identity.Affiliate, "owner"), `{"origins":[],"params":["via"],"model":"first_click"}`), 403, "advertiser_only")
	r := f.do(t, "PUT", settings, admin, `{"origins":["HTTPS://Shop.Example:443","https://*.shop.example"],"params":["via"],"model":"first_click"}`)
	expect(t, r, 200, "")
	if !strings.Contains(r.raw, `"origins":["https://shop.example","https://*.shop.example"]`) {
		t.Fatalf("origins are not normalised: %s", r.raw)
	}

	// Keys: publishable keys are an advertiser's, of its own program.
	for body, field := range map[string]string{
		`{"name":"site","kind":"publishable"}`:                             "program_id",
		`{"name":"site","kind":"publishable","program_id":"prg_nope"}`:     "program_id",
		`{"name":"site","kind":"secret","program_id":"` + f.program + `"}`: "program_id",
		`{"name":"site","kind":"public"}`:                                  "kind",
	} {
		r := f.do(t, "POST", "/api/api-keys", admin, body)
		if r.status != 400 || len(r.problem.Errors) != 1 || r.problem.Errors[0].Field != field {
			t.Errorf("%s: %d %s, want 400 naming %s", body, r.status, r.raw, field)
		}
	}
	otherAdv, _ := f.company(t, identity.Advertiser)
	if r := f.do(t, "POST", "/api/api-keys", f.session(t, otherAdv, identity.Advertiser, "owner"),
		`{"name":"site","kind":"publishable","program_id":"`+f.program+`"}`); r.status != 400 {
		t.Fatalf("a publishable key of another advertiser's program: %d %s", r.status, r.raw)
	}
	made := f.do(t, "POST", "/api/api-keys", admin, `{"name":"site","kind":"publishable","program_id":"`+f.program+`"}`)
	expect(t, made, 201, "")
	pk := decode[createdKey](t, made).Key
	if !strings.HasPrefix(pk, auth.PublishableKeyPrefix) {
		t.Fatalf("publishable key %q", pk)
	}
	// It opens nothing else.
	expect(t, f.do(t, "GET", "/api/v1/tracking-links", apiKey(pk), ""), 401, "")

	// The script, configured for the key; a page with a wrong key gets one that does nothing.
	js := f.do(t, "GET", "/t.js?key="+pk, nil, "")
	if js.status != 200 || !strings.HasPrefix(js.header.Get("Content-Type"), "text/javascript") ||
		!strings.Contains(js.raw, `"params":["via"]`) || !strings.Contains(js.raw, `"model":"first_click"`) || !strings.Contains(js.raw, `"days":30`) {
		t.Fatalf("t.js: %d %s %.200s", js.status, js.header.Get("Content-Type"), js.raw[len(js.raw)-200:])
	}
	if wrong := f.do(t, "GET", "/t.js?key=ps_nope", nil, ""); wrong.status != 200 || !strings.HasSuffix(wrong.raw, "(null);\n") {
		t.Fatalf("t.js with a wrong key: %d %.100s", wrong.status, wrong.raw)
	}

	code := f.createLink(t, fmt.Sprintf(`{"program_id":%q}`, f.program)).Code
	post := func(origin, body string) response {
		req := httptest.NewRequest("POST", "/api/script/clicks", strings.NewReader(body))
		req.Header.Set("Content-Type", "text/plain;charset=UTF-8")
		req.Header.Set("User-Agent", "Mozilla/5.0 (X11; Linux x86_64) Chrome/138.0 Safari/537.36")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := f.srv.App().Test(req, 10_000)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return response{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	}
	page := "https://www.shop.example/pricing?via=" + code
	for name, c := range map[string]struct {
		origin, body string
		status       int
	}{
		"not json":                      {"https://shop.example", `key=` + pk, 400},
		"no code":                       {"https://shop.example", `{"key":"` + pk + `"}`, 400},
		"unknown field":                 {"https://shop.example", `{"key":"` + pk + `","code":"` + code + `","x":1}`, 400},
		"no origin":                     {"", `{"key":"` + pk + `","code":"` + code + `"}`, 403},
		"foreign origin":                {"https://evil.example", `{"key":"` + pk + `","code":"` + code + `"}`, 403},
		"the bare domain of a wildcard": {"https://shop.example.evil", `{"key":"` + pk + `","code":"` + code + `"}`, 403},
		"wrong key":                     {"https://shop.example", `{"key":"ps_pk_` + strings.Repeat("x", 40) + `","code":"` + code + `"}`, 401},
		"secret key":                    {"https://shop.example", `{"key":"` + f.adv + `","code":"` + code + `"}`, 401},
		"unknown code":                  {"https://shop.example", `{"key":"` + pk + `","code":"nosuchcode1"}`, 404},
	} {
		if r := post(c.origin, c.body); r.status != c.status || r.header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("%s: %d %s (ACAO %q), want %d without ACAO", name, r.status, r.raw, r.header.Get("Access-Control-Allow-Origin"), c.status)
		}
	}
	ok := post("https://www.shop.example", `{"key":"`+pk+`","code":"`+code+`","url":"`+page+`","referrer":"https://news.example/","subs":["spring"]}`)
	if ok.status != 200 || ok.header.Get("Access-Control-Allow-Origin") != "https://www.shop.example" {
		t.Fatalf("a click from a subdomain: %d %s (ACAO %q)", ok.status, ok.raw, ok.header.Get("Access-Control-Allow-Origin"))
	}
	got := decode[struct {
		ClickID   string  `json:"click_id"`
		VisitorID *string `json:"visitor_id"`
	}](t, ok)
	if got.VisitorID == nil {
		t.Fatalf("a first click gives no visitor id: %s", ok.raw)
	}
	msgs := trackingtest.ReadClicks(t, f.broker.Config, 1, 10*time.Second)
	if len(msgs) != 1 {
		t.Fatalf("%d clicks on Kafka, want 1", len(msgs))
	}
	c := msgs[0].Click
	if c.ClickID != got.ClickID || c.LandingURL != page || c.ProgramID != f.program || c.Referrer != "https://news.example/" ||
		c.Sub1 != "spring" || c.IsBot {
		t.Fatalf("the click on Kafka: %+v", c)
	}
	// The same visitor again: it sends its id back and gets no new one.
	again := post("https://shop.example", `{"key":"`+pk+`","code":"`+code+`","visitor_id":"`+*got.VisitorID+`"}`)
	if again.status != 200 || strings.Contains(again.raw, `"visitor_id":"`) {
		t.Fatalf("a returning visitor: %d %s", again.status, again.raw)
	}
	msgs = trackingtest.ReadClicks(t, f.broker.Config, 2, 10*time.Second)
	if len(msgs) != 2 || msgs[1].Key != msgs[0].Key {
		t.Fatalf("the returning visitor's click is keyed %v, want the first's", msgs)
	}

	// Revoking the key ends it at once.
	if _, err := f.ids.RevokeAPIKey(ctx, f.advID, decode[createdKey](t, made).ID); err != nil {
		t.Fatal(err)
	}
	if r := post("https://shop.example", `{"key":"`+pk+`","code":"`+code+`"}`); r.status != 401 {
		t.Fatalf("a revoked key: %d %s", r.status, r.raw)
	}
}
