package httpapi_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/partnerstream/partnerstream/internal/clientaddr"
	"github.com/partnerstream/partnerstream/internal/httpapi"
)

// Behind a trusted proxy the sign-in code limit counts per client, as X-Forwarded-For names
// it, and a session records that client's address: a client that used up its codes does not
// lock out the others behind the same proxy, and a forged entry changes nothing. (The test
// server's peer is 0.0.0.0, the proxy here.)
func TestSignInLimitsAndSessionsKeyOnTheClientBehindAProxy(t *testing.T) {
	trusted, err := clientaddr.Parse([]string{"0.0.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, func(o *httpapi.Options) { o.TrustedProxies = trusted })
	ask := func(xff, email string) int {
		t.Helper()
		return f.do(t, "POST", "/api/auth/magic-code", map[string]string{"X-Forwarded-For": xff}, `{"email":"`+email+`"}`).status
	}
	for i := range 20 { // the per-address budget (magiccode.DefaultPerIPLimit)
		if got := ask("198.51.100.9, 203.0.113.1", fmt.Sprintf("u%d@example.test", i)); got != 202 {
			t.Fatalf("code %d of a client: %d, want 202", i+1, got)
		}
	}
	if got := ask("203.0.113.1", "u20@example.test"); got != 429 {
		t.Fatalf("the 21st code of a client: %d, want 429", got)
	}
	if got := ask("203.0.113.2", "other@example.test"); got != 202 {
		t.Errorf("another client behind the same proxy: %d, want 202 (a budget of its own)", got)
	}
	if got := ask("203.0.113.1, 203.0.113.3", "forged@example.test"); got != 202 {
		t.Errorf("a client whose left entry names the throttled one: %d, want 202", got)
	}

	// A session made through the proxy records the client, not the proxy.
	email := "advertiser@example.test"
	code := f.code(t, email) // from the proxy itself: a budget of its own too
	r := f.do(t, "POST", "/api/auth/magic-code/verify", map[string]string{"X-Forwarded-For": "203.0.113.7"}, `{"email":"`+email+`","code":"`+code+`"}`)
	if r.status != 200 {
		t.Fatalf("sign-in: %d %s", r.status, r.raw)
	}
	var ip string
	if err := f.db.QueryRow(context.Background(), `SELECT ip FROM sessions ORDER BY created_at DESC LIMIT 1`).Scan(&ip); err != nil {
		t.Fatal(err)
	}
	if ip != "203.0.113.7" {
		t.Errorf("the session records %q, want the client 203.0.113.7", ip)
	}
}
