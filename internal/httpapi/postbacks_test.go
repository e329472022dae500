package httpapi_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/postbacks"
	"github.com/partnerstream/partnerstream/internal/webhooks/signing"
)

// postbackFixture is the API fixture with the postback routes on real Postgres, at a fixed time.
type postbackFixture struct {
	*fixture
	svc            *postbacks.Service
	now            time.Time
	adv, aff       map[string]string
	advKey, affKey map[string]string
}

func newPostbackFixture(t *testing.T) *postbackFixture {
	t.Helper()
	f := &postbackFixture{fixture: newBareFixture(t), now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	f.svc = postbacks.NewService(f.db, postbacks.Options{Now: func() time.Time { return f.now }})
	f.srv.MountPostbacks(f.svc)
	f.adv, f.aff = f.dashboardAs(t, "advertiser", "owner"), f.dashboardAs(t, "affiliate", "owner")
	f.advKey, f.affKey = apiKey(f.fixture.adv), apiKey(f.fixture.aff)
	return f
}

// postbackSettings is the answer of the postback routes; a pointer tells a missing field
// (or null) from an empty one.
type postbackSettings struct {
	URL                     *string `json:"url"`
	Secret                  *string `json:"secret"`
	SecretCreatedAt         *string `json:"secret_created_at"`
	PreviousSecretExpiresAt *string `json:"previous_secret_expires_at"`
}

// str reads an optional string of an answer ("" for missing or null).
func str(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func secretKey(t *testing.T, r response) []byte {
	t.Helper()
	k, err := signing.Key(str(decode[postbackSettings](t, r).Secret))
	if err != nil {
		t.Fatalf("secret in %d answer: %v", r.status, err)
	}
	return k
}

func TestTheFirstPostbackURLShowsTheSecretOnce(t *testing.T) {
	f := newPostbackFixture(t)
	if r := f.do(t, "GET", "/api/postbacks", f.adv, ""); r.status != 200 || decode[postbackSettings](t, r).URL != nil || decode[postbackSettings](t, r).SecretCreatedAt != nil {
		t.Fatalf("before any URL: %d %s", r.status, r.raw)
	}
	r := f.do(t, "PUT", "/api/postbacks", f.adv, `{"url": "https://receiver.example/pb"}`)
	if r.status != 200 || str(decode[postbackSettings](t, r).URL) != "https://receiver.example/pb" || r.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("first URL = %d %s", r.status, r.raw)
	}
	first := secretKey(t, r)
	again := f.do(t, "PUT", "/api/postbacks", f.adv, `{"url": "https://receiver.example/v2"}`)
	if again.status != 200 || decode[postbackSettings](t, again).Secret != nil || str(decode[postbackSettings](t, again).URL) != "https://receiver.example/v2" {
		t.Fatalf("second URL = %d %s", again.status, again.raw)
	}
	got := f.do(t, "GET", "/api/postbacks", f.adv, "")
	if str(decode[postbackSettings](t, got).URL) != "https://receiver.example/v2" || str(decode[postbackSettings](t, got).SecretCreatedAt) != "2026-03-01T12:00:00Z" || strings.Contains(got.raw, "whsec_") {
		t.Fatalf("get = %s", got.raw)
	}
	u, keys, err := f.svc.SigningKeys(context.Background(), f.advID, f.now)
	if err != nil || u != "https://receiver.example/v2" || len(keys) != 1 || !bytes.Equal(keys[0].Key, first) {
		t.Fatalf("the deliveries would go to %q signed with %d keys (%v), not the shown secret", u, len(keys), err)
	}
	if r := f.do(t, "PUT", "/api/postbacks", f.adv, `{"url": null}`); r.status != 200 || decode[postbackSettings](t, r).URL != nil || decode[postbackSettings](t, r).Secret != nil {
		t.Fatalf("removing the URL = %d %s", r.status, r.raw)
	}
}

func TestPostbackURLsFollowTheWebhookRule(t *testing.T) {
	f := newPostbackFixture(t)
	cases := []struct {
		name, body string
		status     int
		message    string
	}{
		{"http to a public host is refused", `{"url": "http://receiver.example/pb"}`, 400, "url must use https://"},
		{"a relative URL is refused", `{"url": "/pb"}`, 400, "url must be an absolute URL with a host"},
		{"credentials in the URL are refused", `{"url": "https://user:pw@receiver.example/pb"}`, 400, "url must not contain credentials"},
		{"a URL over 2048 characters is refused", `{"url": "https://receiver.example/` + strings.Repeat("a", 2048) + `"}`, 400, "at most 2048"},
		{"a missing url is refused rather than removing it", `{}`, 400, "is required"},
		{"a url that is not a string is refused", `{"url": 42}`, 400, "must be a string or null"},
		{"an unknown field is refused", `{"url": "https://r.example/", "secret": "whsec_x"}`, 400, "unknown field"},
		{"http to localhost is accepted", `{"url": "http://localhost:8080/pb"}`, 200, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := f.do(t, "PUT", "/api/postbacks", f.adv, c.body)
			if r.status != c.status || !strings.Contains(r.raw, c.message) {
				t.Fatalf("= %d %s; want %d with %q", r.status, r.raw, c.status, c.message)
			}
		})
	}
}

func TestRotatingThePostbackSecretKeepsThePreviousForTheGrace(t *testing.T) {
	f := newPostbackFixture(t)
	ctx := context.Background()
	if r := f.do(t, "PUT", "/api/postbacks/rotate-secret", f.adv, ""); r.status != 409 || r.problem.Code != "postback_not_configured" {
		t.Fatalf("rotation before a URL = %d %s", r.status, r.raw)
	}
	first := secretKey(t, f.do(t, "PUT", "/api/postbacks", f.adv, `{"url": "https://receiver.example/pb"}`))

	r := f.do(t, "PUT", "/api/postbacks/rotate-secret", f.adv, "")
	if r.status != 200 || str(decode[postbackSettings](t, r).PreviousSecretExpiresAt) != "2026-03-02T12:00:00Z" || r.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("rotation with the default grace = %d %s", r.status, r.raw)
	}
	second := secretKey(t, r)
	_, keys, err := f.svc.SigningKeys(ctx, f.advID, f.now.Add(23*time.Hour))
	if err != nil || len(keys) != 2 || !bytes.Equal(keys[0].Key, second) || !bytes.Equal(keys[1].Key, first) {
		t.Fatalf("within the grace period: %d keys (%v), want the new then the old", len(keys), err)
	}
	if _, keys, _ := f.svc.SigningKeys(ctx, f.advID, f.now.Add(24*time.Hour)); len(keys) != 1 || !bytes.Equal(keys[0].Key, second) {
		t.Fatalf("after the grace period: %d keys", len(keys))
	}

	r = f.do(t, "PUT", "/api/postbacks/rotate-secret", f.adv, `{"grace_period_seconds": 0}`)
	if r.status != 200 || decode[postbackSettings](t, r).PreviousSecretExpiresAt != nil {
		t.Fatalf("rotation without grace = %d %s", r.status, r.raw)
	}
	third := secretKey(t, r)
	if _, keys, _ := f.svc.SigningKeys(ctx, f.advID, f.now); len(keys) != 1 || !bytes.Equal(keys[0].Key, third) {
		t.Fatalf("a rotation without grace left %d keys", len(keys))
	}
	for _, body := range []string{`{"grace_period_seconds": 604801}`, `{"grace_period_seconds": -1}`, `{"grace": "1h"}`} {
		if r := f.do(t, "PUT", "/api/postbacks/rotate-secret", f.adv, body); r.status != 400 {
			t.Errorf("rotation with %s = %d %s", body, r.status, r.raw)
		}
	}
	// A blank body is no body (the default grace), like on every route whose body is optional.
	if r := f.do(t, "PUT", "/api/postbacks/rotate-secret", f.adv, " \n"); r.status != 200 || str(decode[postbackSettings](t, r).PreviousSecretExpiresAt) != "2026-03-02T12:00:00Z" {
		t.Errorf("rotation with a blank body = %d %s", r.status, r.raw)
	}
}

func TestPostbackSettingsBelongToOneCompany(t *testing.T) {
	f := newPostbackFixture(t)
	f.do(t, "PUT", "/api/postbacks", f.adv, `{"url": "https://adv.example/pb"}`)
	for name, who := range map[string]map[string]string{"dashboard": f.aff, "public API": f.affKey} {
		path := "/api/postbacks"
		if name == "public API" {
			path = "/api/v1/postbacks"
		}
		if r := f.do(t, "GET", path, who, ""); r.status != 200 || decode[postbackSettings](t, r).URL != nil {
			t.Errorf("another company's %s sees %s", name, r.raw)
		}
	}
	if r := f.do(t, "PUT", "/api/postbacks/rotate-secret", f.aff, ""); r.status != 409 {
		t.Fatalf("another company rotated: %d %s", r.status, r.raw)
	}
	if r := f.do(t, "GET", "/api/v1/postbacks", f.advKey, ""); str(decode[postbackSettings](t, r).URL) != "https://adv.example/pb" {
		t.Fatalf("the owner's key sees %s", r.raw)
	}
}

func TestThePublicAPISetsThePostbackURL(t *testing.T) {
	f := newPostbackFixture(t)
	r := f.do(t, "PUT", "/api/v1/postbacks", f.affKey, `{"url": "https://aff.example/pb"}`)
	if r.status != 200 || str(decode[postbackSettings](t, r).URL) != "https://aff.example/pb" {
		t.Fatalf("PUT with a key = %d %s", r.status, r.raw)
	}
	secretKey(t, r) // the first URL shows the secret, once
	if r := f.do(t, "PUT", "/api/v1/postbacks", f.affKey, `{"url": "https://aff.example/v2"}`); r.status != 200 || decode[postbackSettings](t, r).Secret != nil {
		t.Fatalf("second PUT with a key = %d %s", r.status, r.raw)
	}
	if r := f.do(t, "GET", "/api/postbacks", f.aff, ""); str(decode[postbackSettings](t, r).URL) != "https://aff.example/v2" {
		t.Fatalf("the dashboard sees %s", r.raw)
	}
	if r := f.do(t, "PUT", "/api/v1/postbacks/rotate-secret", f.affKey, ""); r.status != 404 {
		t.Fatalf("rotation through the public API = %d, want it not to exist", r.status)
	}
	if r := f.do(t, "PUT", "/api/v1/postbacks", nil, `{"url": null}`); r.status != 401 {
		t.Fatalf("PUT without a key = %d", r.status)
	}
}

// fakePostbacks keeps each company's postback URL in memory, without secrets.
type fakePostbacks struct {
	mu   sync.Mutex
	urls map[string]*string
}

func (p *fakePostbacks) Get(_ context.Context, companyID string) (postbacks.Settings, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return postbacks.Settings{URL: p.urls[companyID]}, nil
}

func (p *fakePostbacks) SetURL(_ context.Context, companyID string, url *string) (postbacks.Settings, string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.urls[companyID] = url
	return postbacks.Settings{URL: url}, "", nil
}

func (p *fakePostbacks) RotateSecret(context.Context, string, time.Duration) (postbacks.Settings, string, error) {
	return postbacks.Settings{}, "", postbacks.ErrNotConfigured
}

func TestMembersReadPostbackSettingsButCannotChangeThem(t *testing.T) {
	f := newFakeFixture(t)
	f.srv.MountPostbacks(&fakePostbacks{urls: map[string]*string{}})
	member, owner := f.dashboardAs(identity.Advertiser, "member"), f.dashboardAs(identity.Advertiser, "owner")
	if r := f.do(t, "GET", "/api/postbacks", member, ""); r.status != 200 {
		t.Fatalf("a member's GET = %d", r.status)
	}
	for _, path := range []string{"/api/postbacks", "/api/postbacks/rotate-secret"} {
		if r := f.do(t, "PUT", path, member, `{"url": "https://member.example/pb"}`); r.status != 403 || r.problem.Code != "forbidden" {
			t.Errorf("a member's PUT %s = %d %s", path, r.status, r.raw)
		}
	}
	if r := f.do(t, "GET", "/api/postbacks", owner, ""); decode[postbackSettings](t, r).URL != nil {
		t.Fatalf("a member changed the URL: %s", r.raw)
	}
}
