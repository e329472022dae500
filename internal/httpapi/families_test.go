package httpapi_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/partnerstream/partnerstream/internal/auth"
	"github.com/partnerstream/partnerstream/internal/health"
	"github.com/partnerstream/partnerstream/internal/httpapi"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/signin"
	"github.com/partnerstream/partnerstream/internal/store/pgstore"
	"github.com/partnerstream/partnerstream/internal/testenv/pgtest"
)

func TestTheThreeFamiliesApplyTheirCredentialRules(t *testing.T) {
	f := newFakeFixture(t)
	f.srv.App().Get("/api/v1/echo", func(c *fiber.Ctx) error { return c.JSON(fiber.Map{"company_id": httpapi.Caller(c).CompanyID}) })
	revokedCo, _ := f.company(identity.Affiliate)
	revoked, rec, _ := f.keys.CreateAPIKey(context.Background(), revokedCo, "old")
	if _, err := f.keys.RevokeAPIKey(context.Background(), revokedCo, rec.ID); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		method  string
		path    string
		headers map[string]string
		status  int
		code    string
	}{
		{"v1 without a key is 401", "GET", "/api/v1/echo", nil, 401, "missing_credentials"},
		{"v1 with a malformed key is 401", "GET", "/api/v1/echo", apiKey("ps_short"), 401, "invalid_api_key"},
		{"v1 with a revoked key is 401", "GET", "/api/v1/echo", apiKey(revoked), 401, "invalid_api_key"},
		{"v1 of a route that does not exist is 404 without a key", "GET", "/api/v1/no-such-route", nil, 404, "not_found"},
		{"another version is 404, not 401", "GET", "/api/v2/programs", nil, 404, "not_found"},
		{"a dashboard route that does not exist is 404 without a session", "GET", "/api/no-such-route", map[string]string{"Authorization": "Bearer eyJhbGciOiJIUzI1NiJ9.e30.x"}, 404, "not_found"},
		{"partner-api POST to a route that does not exist is 404", "POST", "/api/partner-api/no-such-route", nil, 404, "not_found"},
		{"an unknown sign-in provider is 404", "GET", "/api/auth/oauth/facebook/start", nil, 404, "not_found"},
		{"an unknown sign-in provider's callback is 404", "GET", "/api/auth/oauth/facebook/callback?state=x&code=y", nil, 404, "not_found"},
		{"a route spelled in other case is no route (it would skip the credential rules)", "GET", "/API/api-keys", nil, 404, "not_found"},
		{"a partner route spelled in other case is no route", "GET", "/Api/partner-api/me", nil, 404, "not_found"},
		{"a known route with a wrong method is still refused for its credentials first", "DELETE", "/api/api-keys", nil, 401, "missing_credentials"},
		{"v1 with a valid key passes authentication", "GET", "/api/v1/no-such-route", apiKey(f.adv), 404, "not_found"},
		{"v1 takes the key as a bearer token", "GET", "/api/v1/no-such-route", map[string]string{"Authorization": "Bearer " + f.adv}, 404, "not_found"},
		{"partner-api refuses POST with 405", "POST", "/api/partner-api/me", apiKey(f.adv), 405, "method_not_allowed"},
		{"partner-api without a key is 401", "GET", "/api/partner-api/me", nil, 401, "missing_credentials"},
		{"partner-api with a session-like token is 401", "GET", "/api/partner-api/me", map[string]string{"Authorization": "Bearer eyJhbGciOiJIUzI1NiJ9.e30.x"}, 401, "invalid_api_key"},
		{"the dashboard refuses a valid API key in x-api-key", "GET", "/api/api-keys", apiKey(f.adv), 401, "api_key_not_allowed"},
		{"the dashboard refuses a valid API key as a bearer token", "GET", "/api/auth/me", map[string]string{"Authorization": "Bearer " + f.adv}, 401, "api_key_not_allowed"},
		{"the dashboard without a session is 401", "GET", "/api/api-keys", nil, 401, "missing_credentials"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := f.do(t, c.method, c.path, c.headers, "")
			if r.status != c.status || r.problem.Code != c.code {
				t.Fatalf("%s %s = %d %v, want %d %s", c.method, c.path, r.status, r.raw, c.status, c.code)
			}
			if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
				t.Fatalf("content type %q, want problem+json", ct)
			}
			if r.problem.RequestID == "" {
				t.Fatal("problem without request_id")
			}
		})
	}
}

func TestPartnerMeReturnsOnlyTheCallersCompany(t *testing.T) {
	f := newFixture(t)
	r := f.do(t, "GET", "/api/partner-api/me", apiKey(f.adv), "")
	if r.status != 200 {
		t.Fatalf("status %d %s", r.status, r.raw)
	}
	co := decode[partnerMe](t, r).Company
	if co.ID != f.advID || co.Kind != "advertiser" {
		t.Fatalf("me = %+v, want the advertiser %s", co, f.advID)
	}
	r = f.do(t, "GET", "/api/partner-api/me", apiKey(f.aff), "")
	if co := decode[partnerMe](t, r).Company; co.ID == f.advID {
		t.Fatal("the affiliate's key read the advertiser's company")
	}
}

func TestRevocationTakesEffectAtOnceEvenWhenCached(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	h := apiKey(f.adv)
	if r := f.do(t, "GET", "/api/partner-api/me", h, ""); r.status != 200 {
		t.Fatalf("before revocation: %d", r.status)
	}
	// Revoke through the store the way another replica would, with the listener evicting.
	pgtest.Listen(t, f.db, pgstore.Subscription{Channel: auth.RevocationChannel, Notify: f.keys.Forget, Reset: f.keys.Reset})
	rec, err := f.ids.LookupKey(ctx, auth.HashKey(f.adv))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.ids.RevokeAPIKey(ctx, f.advID, rec.KeyID); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	for f.do(t, "GET", "/api/partner-api/me", h, "").status != 401 {
		if time.Now().After(deadline) {
			t.Fatal("a revoked key still works 3 s later")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRateLimitHeadersAndRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := newFakeFixture(t, func(o *httpapi.Options) {
		o.RateLimit = httpapi.RateLimit{Requests: 3, Window: time.Minute}
		o.Now = func() time.Time { return now }
	})
	h := apiKey(f.adv)
	for i := 1; i <= 3; i++ {
		r := f.do(t, "GET", "/api/partner-api/me", h, "")
		if r.status != 200 || r.header.Get("RateLimit-Remaining") != string(rune('0'+3-i)) || r.header.Get("RateLimit-Limit") != "3" {
			t.Fatalf("request %d: %d remaining=%q", i, r.status, r.header.Get("RateLimit-Remaining"))
		}
	}
	r := f.do(t, "GET", "/api/partner-api/me", h, "")
	if r.status != 429 || r.header.Get("Retry-After") != "60" || r.problem.Code != "rate_limited" {
		t.Fatalf("over the limit: %d retry-after=%q %s", r.status, r.header.Get("Retry-After"), r.raw)
	}
	if r := f.do(t, "GET", "/api/partner-api/me", apiKey(f.aff), ""); r.status != 200 {
		t.Fatalf("another key is limited too: %d", r.status)
	}
	now = now.Add(time.Minute)
	if r := f.do(t, "GET", "/api/partner-api/me", h, ""); r.status != 200 {
		t.Fatalf("after the window: %d", r.status)
	}
}

func TestIdempotencyKeyReplaysTheFirstResponse(t *testing.T) {
	f := newFixture(t)
	calls := 0
	f.srv.App().Post("/api/v1/echo", f.srv.Idempotent(func(c *fiber.Ctx) error {
		calls++
		var in map[string]any
		if err := httpapi.DecodeJSON(c, &in); err != nil {
			return err
		}
		in["n"] = calls
		return c.Status(201).JSON(in)
	}))
	h := map[string]string{"x-api-key": f.adv, "Idempotency-Key": "order-1"}
	first := f.do(t, "POST", "/api/v1/echo", h, `{"a":1}`)
	second := f.do(t, "POST", "/api/v1/echo", h, `{"a":1}`)
	if first.status != 201 || second.status != 201 || first.raw != second.raw || calls != 1 {
		t.Fatalf("replay: %d %s / %d %s, calls=%d", first.status, first.raw, second.status, second.raw, calls)
	}
	if second.header.Get("Idempotent-Replayed") != "true" {
		t.Fatal("replayed response is not marked")
	}
	other := f.do(t, "POST", "/api/v1/echo", h, `{"a":2}`)
	if other.status != 422 || other.problem.Code != "idempotency_key_reused" {
		t.Fatalf("same key, other body: %d %s", other.status, other.raw)
	}
	// Keys are per credential: the affiliate's "order-1" is another key.
	aff := f.do(t, "POST", "/api/v1/echo", map[string]string{"x-api-key": f.aff, "Idempotency-Key": "order-1"}, `{"a":2}`)
	if aff.status != 201 || calls != 2 {
		t.Fatalf("another caller's key collided: %d calls=%d", aff.status, calls)
	}
	// A 400 is remembered too (it is the answer to that request).
	bad := f.do(t, "POST", "/api/v1/echo", map[string]string{"x-api-key": f.adv, "Idempotency-Key": "bad"}, `{"a":`)
	again := f.do(t, "POST", "/api/v1/echo", map[string]string{"x-api-key": f.adv, "Idempotency-Key": "bad"}, `{"a":`)
	if bad.status != 400 || again.status != 400 || again.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("bad request replay: %d %d", bad.status, again.status)
	}
}

func TestBadInputIsAProblemNeverA500(t *testing.T) {
	f := newFakeFixture(t)
	f.srv.App().Post("/api/v1/strict", func(c *fiber.Ctx) error {
		var in struct {
			Name string `json:"name"`
		}
		if err := httpapi.DecodeJSON(c, &in); err != nil {
			return err
		}
		return c.JSON(in)
	})
	h := apiKey(f.adv)
	for name, body := range map[string]string{
		"malformed JSON":   `{"name":`,
		"an unknown field": `{"nam":"x"}`,
		"a wrong type":     `{"name":3}`,
		"two objects":      `{"name":"a"}{"name":"b"}`,
	} {
		r := f.do(t, "POST", "/api/v1/strict", h, body)
		if r.status < 400 || r.status >= 500 {
			t.Errorf("%s: status %d, want a 4xx problem (%s)", name, r.status, r.raw)
		}
	}
}

// partnerMe is the answer of /api/partner-api/me.
type partnerMe struct {
	Company identity.Company `json:"company"`
}

// An unknown provider is a 404 even where no sign-in provider is configured at all (it
// used to be 503 sign_in_disabled there).
func TestAnUnknownProviderIs404WithoutOAuth(t *testing.T) {
	srv := httpapi.New(httpapi.Options{Addr: "127.0.0.1:0", Log: quiet, Health: health.NewRegistry()})
	srv.MountAuth(signin.New(nil, nil, nil, nil), nil, nil, false)
	for path, want := range map[string]int{"/api/auth/oauth/facebook/start": 404, "/api/auth/oauth/google/start": 503} {
		resp, err := srv.App().Test(httptest.NewRequest("GET", path, nil))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s = %d, want %d", path, resp.StatusCode, want)
		}
	}
}

func TestAnAddressThatKeepsFailingCredentialsIsThrottled(t *testing.T) {
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	f := newFakeFixture(t, func(o *httpapi.Options) { o.FailedAuthLimit, o.Now = 3, clock })
	good := apiKey(f.adv)
	for range 10 {
		if r := f.do(t, "GET", "/api/partner-api/me", good, ""); r.status != 200 {
			t.Fatalf("a valid key: %d %s", r.status, r.raw)
		}
	}
	throttled := counterValue(t, "partnerstream_credential_throttled_total")
	failures := map[string]string{"x-api-key": "ps_live_" + strings.Repeat("x", 40)}
	badSession := map[string]string{"Authorization": "Bearer eyJhbGciOiJIUzI1NiJ9.e30.x"}
	// The missing credential of a signed-out browser counts nothing.
	for range 5 {
		if r := f.do(t, "GET", "/api/api-keys", nil, ""); r.status != 401 {
			t.Fatalf("without a session: %d", r.status)
		}
	}
	for _, w := range []struct {
		path    string
		headers map[string]string
		code    string
	}{{"/api/partner-api/me", failures, "invalid_api_key"}, {"/api/api-keys", badSession, "invalid_session"}, {"/api/v1/no-such-route", failures, "not_found"}} {
		if r := f.do(t, "GET", w.path, w.headers, ""); r.problem.Code != w.code {
			t.Fatalf("GET %s with a wrong credential: %d %s, want %s", w.path, r.status, r.raw, w.code)
		}
	}
	for _, w := range []struct {
		path    string
		headers map[string]string
	}{{"/api/partner-api/me", failures}, {"/api/api-keys", badSession}, {"/api/partner-api/me", failures}} {
		r := f.do(t, "GET", w.path, w.headers, "")
		if r.status != 429 || r.problem.Code != "too_many_failed_credentials" || r.header.Get("Retry-After") == "" {
			t.Fatalf("a wrong credential after 3: %d %v %s, want 429 with Retry-After", r.status, r.header, r.raw)
		}
	}
	// Whoever else uses the address keeps being served: only wrong credentials are refused.
	if r := f.do(t, "GET", "/api/partner-api/me", good, ""); r.status != 200 {
		t.Fatalf("a valid key from the throttled address: %d %s", r.status, r.raw)
	}
	if r := f.do(t, "GET", "/api/api-keys", f.dashboardAs(identity.Advertiser, "owner"), ""); r.status != 200 {
		t.Fatalf("a valid session from the throttled address: %d %s", r.status, r.raw)
	}
	if got := counterValue(t, "partnerstream_credential_throttled_total") - throttled; got != 3 {
		t.Errorf("the throttled counter grew by %v, want 3", got)
	}
	mu.Lock()
	now = now.Add(time.Minute)
	mu.Unlock()
	if r := f.do(t, "GET", "/api/partner-api/me", failures, ""); r.status != 401 {
		t.Fatalf("a wrong key a minute later: %d %s, want 401", r.status, r.raw)
	}
}
