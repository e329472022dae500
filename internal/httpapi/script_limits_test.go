package httpapi_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/clientaddr"
	"github.com/partnerstream/partnerstream/internal/httpapi"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/metrics/metricstest"
	"github.com/partnerstream/partnerstream/internal/tracking"
	"github.com/partnerstream/partnerstream/internal/trackscript"
)

// The tracking script's clicks have a budget per publishable key and one per client address
// and key, each shared by two api replicas over Postgres: past either, 429 rate_limited with
// Retry-After, the RateLimit headers of the tighter budget and Access-Control-Allow-Origin for
// the page; another key, and another address, keep theirs; an IPv6 client's /64 is one
// address; wrong keys spend no budget and are throttled per address like every credential.
// (The test server's peer is 0.0.0.0, trusted here, so X-Forwarded-For names the client.)
func TestScriptClicksAreLimitedPerKeyAndAddress(t *testing.T) {
	f := newTrackingFixture(t, tracking.ModeAck)
	trusted, err := clientaddr.Parse([]string{"0.0.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	const perKey, perAddress = 5, 2
	clicks := tracking.NewService(tracking.NewResolver(f.links, tracking.ResolverOptions{}), f.recorder, tracking.ServiceOptions{ClickIDs: f.clickIDs})
	script := trackscript.New(f.db, f.ids, clicks)
	rs := replicas(t, f.fixture, 2, func(o *httpapi.Options) {
		o.ScriptLimit = httpapi.RateLimit{Requests: perKey, Window: time.Minute}
		o.ScriptAddressLimit = httpapi.RateLimit{Requests: perAddress, Window: time.Minute}
		o.FailedAuthLimit = 2
		o.TrustedProxies = trusted
	}, func(srv *httpapi.Server) { srv.MountScript(script) })

	admin := f.dashboardAs(t, identity.Advertiser, "owner")
	expect(t, do(t, rs.servers[0], "PUT", "/api/programs/"+f.program+"/tracking-script", admin,
		`{"origins":["https://shop.example"],"params":["via"],"model":"last_click"}`), 200, "")
	key := func() string {
		made := do(t, rs.servers[0], "POST", "/api/api-keys", admin, `{"name":"site","kind":"publishable","program_id":"`+f.program+`"}`)
		expect(t, made, 201, "")
		return decode[createdKey](t, made).Key
	}
	first, second, third := key(), key(), key()
	code := f.createLink(t, fmt.Sprintf(`{"program_id":%q}`, f.program)).Code
	n := 0
	post := func(pk, client string) response {
		t.Helper()
		n++
		return do(t, rs.servers[n%2], "POST", "/api/script/clicks", map[string]string{
			"Content-Type": "text/plain;charset=UTF-8", "Origin": "https://shop.example", "X-Forwarded-For": client,
			"User-Agent": "Mozilla/5.0 (X11; Linux x86_64) Chrome/138.0 Safari/537.36"}, `{"key":"`+pk+`","code":"`+code+`"}`)
	}
	served := func(what string, r response, limit, remaining int) {
		t.Helper()
		if r.status != 200 || r.header.Get("RateLimit-Limit") != strconv.Itoa(limit) || r.header.Get("RateLimit-Remaining") != strconv.Itoa(remaining) {
			t.Fatalf("%s: %d, RateLimit-Limit %q, RateLimit-Remaining %q, want 200 with %d of %d left: %s", what, r.status,
				r.header.Get("RateLimit-Limit"), r.header.Get("RateLimit-Remaining"), remaining, limit, r.raw)
		}
	}
	refused := func(what string, r response, limit int) {
		t.Helper()
		if r.status != 429 || r.problem.Code != "rate_limited" || r.header.Get("Retry-After") != "60" ||
			!strings.HasPrefix(r.header.Get("Content-Type"), "application/problem+json") ||
			r.header.Get("RateLimit-Limit") != strconv.Itoa(limit) || r.header.Get("RateLimit-Remaining") != "0" ||
			r.header.Get("Access-Control-Allow-Origin") != "https://shop.example" {
			t.Fatalf("%s: %d %v %s, want 429 rate_limited with Retry-After 60, RateLimit-Limit %d and the page's origin allowed",
				what, r.status, r.header, r.raw, limit)
		}
	}
	limited := func(limit string) float64 {
		return metricstest.Value(t, "partnerstream_rate_limited_total", "limit", limit)
	}
	byKey, byAddress := limited("script_key"), limited("script_address")

	// One address: its budget with the first key, on both replicas; the tighter budget's
	// headers.
	served("the first click of an address", post(first, "203.0.113.1"), perAddress, 1)
	served("its second, on the other replica", post(first, "203.0.113.1"), perAddress, 0)
	refused("its third", post(first, "203.0.113.1"), perAddress)
	// Its refusal spent none of the key's budget; another key is not affected.
	served("the same address with another key", post(second, "203.0.113.1"), perAddress, 1)
	served("another address", post(first, "203.0.113.2"), perAddress, 1)
	served("another address again", post(first, "203.0.113.2"), perAddress, 0)
	served("a third address", post(first, "203.0.113.3"), perKey, 0)
	refused("a fourth address past the key's budget", post(first, "203.0.113.4"), perKey)
	served("the other key from that address", post(second, "203.0.113.4"), perAddress, 1)
	// An IPv6 client's /64 is one address.
	served("an IPv6 client", post(third, "2001:db8:1:2::1"), perAddress, 1)
	served("another address of its /64", post(third, "2001:db8:1:2::ff"), perAddress, 0)
	refused("a third address of its /64", post(third, "2001:db8:1:2:ffff::1"), perAddress)
	served("the next /64", post(third, "2001:db8:1:3::1"), perAddress, 1)
	if got := limited("script_address") - byAddress; got != 2 {
		t.Errorf("partnerstream_rate_limited_total{limit=\"script_address\"} grew by %v, want 2", got)
	}
	if got := limited("script_key") - byKey; got != 1 {
		t.Errorf("partnerstream_rate_limited_total{limit=\"script_key\"} grew by %v, want 1", got)
	}

	// Wrong keys spend no budget and count against their address like any wrong credential.
	wrong := "ps_pk_" + strings.Repeat("x", 40)
	for i := range 2 {
		if r := post(wrong, "203.0.113.9"); r.status != 401 || r.problem.Code != "invalid_publishable_key" {
			t.Fatalf("wrong key %d: %d %s, want 401", i+1, r.status, r.raw)
		}
	}
	if r := post(wrong, "203.0.113.9"); r.status != 429 || r.problem.Code != "too_many_failed_credentials" ||
		r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("a third wrong key: %d %v %s, want 429 too_many_failed_credentials, not readable by the page", r.status, r.header, r.raw)
	}
	served("a good key from that address", post(second, "203.0.113.9"), perAddress, 1)
}
