package httpapi_test

import (
	"context"
	"testing"

	"github.com/partnerstream/partnerstream/internal/dashboard"
)

// newAccountFixture is newFixture with the account routes, and a session of the advertiser's
// owner.
func newAccountFixture(t *testing.T) (*fixture, map[string]string, string) {
	t.Helper()
	f := newFixture(t)
	f.srv.MountAccount(dashboard.NewAccountStore(f.db))
	ctx := context.Background()
	u, err := f.ids.UserByEmail(ctx, "advertiser@example.test")
	if err != nil {
		t.Fatal(err)
	}
	h := f.bearer(t, u.ID, u.CompanyID, "advertiser", "owner")
	h["Content-Type"] = "application/json"
	return f, h, u.ID
}

func TestAccountLocaleIsSavedForTheSignedInUser(t *testing.T) {
	f, h, userID := newAccountFixture(t)
	r := f.do(t, "PUT", "/api/account/locale", h, `{"locale":"es"}`)
	if r.status != 200 || r.body["locale"] != "es" {
		t.Fatalf("status %d body %s", r.status, r.raw)
	}
	u, err := f.ids.UserByID(context.Background(), userID)
	if err != nil {
		t.Fatal(err)
	}
	if u.Locale != "es" {
		t.Fatalf("saved locale %q, want es", u.Locale)
	}
}

func TestAccountLocaleRefusesWhatTheDashboardDoesNotSpeak(t *testing.T) {
	f, h, _ := newAccountFixture(t)
	for _, tc := range []struct{ name, body string }{
		{"an unknown language", `{"locale":"fr"}`},
		{"a region the catalogues do not have", `{"locale":"es-MX"}`},
		{"no locale at all", `{}`},
		{"an unknown field", `{"locale":"es","theme":"dark"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := f.do(t, "PUT", "/api/account/locale", h, tc.body)
			if r.status != 400 {
				t.Fatalf("status %d body %s", r.status, r.raw)
			}
		})
	}
}

func TestAccountLocaleTakesASessionNotAnAPIKey(t *testing.T) {
	f, _, _ := newAccountFixture(t)
	r := f.do(t, "PUT", "/api/account/locale", map[string]string{"x-api-key": f.adv, "Content-Type": "application/json"}, `{"locale":"es"}`)
	if r.status != 401 || r.body["code"] != "api_key_not_allowed" {
		t.Fatalf("status %d body %s", r.status, r.raw)
	}
}

func TestAccountRoutesAreDocumented(t *testing.T) {
	f, _, _ := newAccountFixture(t)
	assertAreaDocumented(t, f, "openapi/12-account.yaml")
}
