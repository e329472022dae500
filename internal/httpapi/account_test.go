package httpapi_test

import (
	"context"
	"sync"
	"testing"

	"github.com/partnerstream/partnerstream/internal/dashboard"
	"github.com/partnerstream/partnerstream/internal/httpapi"
	"github.com/partnerstream/partnerstream/internal/identity"
)

// fakeAccounts remembers the locales it was told to save.
type fakeAccounts struct {
	mu      sync.Mutex
	locales map[string]string
}

func (a *fakeAccounts) SetUserLocale(_ context.Context, userID, locale string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.locales[userID] = locale
	return nil
}

func TestAccountLocaleIsSavedForTheSignedInUser(t *testing.T) {
	f := newFixture(t)
	f.srv.MountAccount(dashboard.NewAccountStore(f.db))
	u, err := f.ids.UserByEmail(context.Background(), "advertiser@example.test")
	if err != nil {
		t.Fatal(err)
	}
	r := f.do(t, "PUT", "/api/account/locale", f.bearer(t, u.ID, u.CompanyID, "advertiser", "owner"), `{"locale":"es"}`)
	if r.status != 200 || decode[struct{ Locale string }](t, r).Locale != "es" {
		t.Fatalf("status %d body %s", r.status, r.raw)
	}
	if u, err = f.ids.UserByID(context.Background(), u.ID); err != nil {
		t.Fatal(err)
	}
	if u.Locale != "es" {
		t.Fatalf("saved locale %q, want es", u.Locale)
	}
}

func TestAccountLocaleRefusesWhatTheDashboardDoesNotSpeak(t *testing.T) {
	f := newFakeFixture(t)
	accounts := &fakeAccounts{locales: map[string]string{}}
	f.srv.MountAccount(accounts)
	h := f.dashboardAs(identity.Advertiser, "owner")
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
	if len(accounts.locales) != 0 {
		t.Fatalf("refused locales were saved: %v", accounts.locales)
	}
}

func TestAccountLocaleTakesASessionNotAnAPIKey(t *testing.T) {
	f := newFakeFixture(t)
	f.srv.MountAccount(&fakeAccounts{locales: map[string]string{}})
	r := f.do(t, "PUT", "/api/account/locale", apiKey(f.adv), `{"locale":"es"}`)
	if r.status != 401 || r.problem.Code != "api_key_not_allowed" {
		t.Fatalf("status %d body %s", r.status, r.raw)
	}
}

func TestAccountRoutesAreDocumented(t *testing.T) {
	assertAreaDocumented(t, func(s *httpapi.Server) { s.MountAccount(nil) }, "openapi/12-account.yaml")
}
