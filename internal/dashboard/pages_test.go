package dashboard

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"

	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/session"
)

// fakeSessions signs in whoever sends the cookie "ps_session=<user id>".
type fakeSessions struct{ kind string }

func (f fakeSessions) Authenticate(c *fiber.Ctx) (session.Claims, error) {
	switch id := c.Cookies(session.SessionCookie); id {
	case "":
		return session.Claims{}, session.ErrNoCredentials
	case "expired":
		return session.Claims{}, session.ErrExpired
	default:
		return session.Claims{UserID: id, CompanyID: "co_1", CompanyKind: f.kind, Role: "owner", Locale: "en"}, nil
	}
}

// fakeUsers: user "usr_es" saved Spanish, every other user English.
type fakeUsers struct{}

func (fakeUsers) UserByID(_ context.Context, id string) (identity.User, error) {
	if id == "usr_es" {
		return identity.User{ID: id, Email: "ana@example.test", Locale: "es"}, nil
	}
	return identity.User{ID: id, Email: "ana@example.test", Name: map[string]string{"usr_named": "Ana <Admin>"}[id], Locale: "en"}, nil
}

func (fakeUsers) CompanyByID(_ context.Context, id string) (identity.Company, error) {
	return identity.Company{ID: id, Name: "Acme & Shoes"}, nil
}

func newTestApp(t *testing.T, kind string) *fiber.App {
	t.Helper()
	app := fiber.New()
	Mount(app, Options{Sessions: fakeSessions{kind: kind}, Users: fakeUsers{}, OAuthProviders: []string{"google"}})
	return app
}

type served struct {
	status int
	header map[string]string
	body   string
}

func get(t *testing.T, app *fiber.App, path string, headers map[string]string) served {
	t.Helper()
	req := httptest.NewRequest("GET", path, nil)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := app.Test(req, -1)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	h := map[string]string{}
	for k := range resp.Header {
		h[k] = resp.Header.Get(k)
	}
	return served{resp.StatusCode, h, string(b)}
}

func TestPagesSpeakTheRightLanguage(t *testing.T) {
	app := newTestApp(t, "advertiser")
	for _, tc := range []struct {
		name, path string
		headers    map[string]string
		want       string // the <html lang>
	}{
		{"a visitor gets English by default", "/login", nil, "en"},
		{"a visitor's browser asks for Spanish", "/login", map[string]string{"Accept-Language": "es-AR,es;q=0.9"}, "es"},
		{"a visitor's browser asks for a language we lack", "/login", map[string]string{"Accept-Language": "de-DE"}, "en"},
		{"the language cookie beats the browser", "/login", map[string]string{"Accept-Language": "es", "Cookie": "ps_locale=en"}, "en"},
		{"the switch beats the cookie", "/login?lang=es", map[string]string{"Cookie": "ps_locale=en"}, "es"},
		{"a user's saved language beats the cookie and the browser", "/app", map[string]string{"Cookie": "ps_session=usr_es; ps_locale=en", "Accept-Language": "en"}, "es"},
		{"the switch beats the saved language", "/app?lang=en", map[string]string{"Cookie": "ps_session=usr_es"}, "en"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := get(t, app, tc.path, tc.headers)
			if p.status != 200 {
				t.Fatalf("status %d", p.status)
			}
			if !strings.Contains(p.body, `<html lang="`+tc.want+`">`) || p.header["Content-Language"] != tc.want {
				t.Fatalf("want %s; Content-Language %q, body starts %.120q", tc.want, p.header["Content-Language"], p.body)
			}
		})
	}
}

func TestTheSwitchIsRememberedInACookie(t *testing.T) {
	p := get(t, newTestApp(t, "advertiser"), "/login?lang=es", nil)
	if !strings.Contains(p.header["Set-Cookie"], "ps_locale=es") {
		t.Fatalf("Set-Cookie %q", p.header["Set-Cookie"])
	}
}

func TestAppPagesNeedASession(t *testing.T) {
	app := newTestApp(t, "advertiser")
	for _, tc := range []struct {
		name, path, cookie string
		status             int
		location           string
	}{
		{"no session goes to the login page and back", "/app/conversions?status=pending", "", 302, "/login?next=%2Fapp%2Fconversions%3Fstatus%3Dpending"},
		{"an expired session goes to the login page, which renews it", "/app", "ps_session=expired", 302, "/login?next=%2Fapp"},
		{"a signed-in user gets the page", "/app/conversions", "ps_session=usr_1", 200, ""},
		{"a signed-in user on the login page goes on", "/login?next=/app/payouts", "ps_session=usr_1", 302, "/app/payouts"},
		{"the login page never sends anyone off the app", "/login?next=//evil.example", "ps_session=usr_1", 302, "/app"},
		{"an unknown page is a 404", "/app/nope", "ps_session=usr_1", 404, ""},
		{"the root goes to the app", "/", "", 302, "/app"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := get(t, app, tc.path, map[string]string{"Cookie": tc.cookie})
			if p.status != tc.status || p.header["Location"] != tc.location {
				t.Fatalf("got %d to %q, want %d to %q", p.status, p.header["Location"], tc.status, tc.location)
			}
		})
	}
}

func TestPagesShowOnlyWhatTheCompanyKindUses(t *testing.T) {
	adv := get(t, newTestApp(t, "advertiser"), "/app/programs", map[string]string{"Cookie": "ps_session=usr_1"})
	aff := get(t, newTestApp(t, "affiliate"), "/app/programs", map[string]string{"Cookie": "ps_session=usr_1"})
	if !strings.Contains(adv.body, `id="program-form"`) || strings.Contains(adv.body, `id="apply-form"`) {
		t.Error("an advertiser should get the program form, not the application form")
	}
	if strings.Contains(aff.body, `id="program-form"`) || !strings.Contains(aff.body, `id="apply-form"`) {
		t.Error("an affiliate should get the application form, not the program form")
	}
}

func TestTheHeaderSaysWhoIsSignedIn(t *testing.T) {
	app := newTestApp(t, "affiliate")
	for _, tc := range []struct{ cookie, want string }{
		{"ps_session=usr_1", `<span class="whoami-user">ana@example.test</span> <span class="whoami-org">Acme &amp; Shoes · Owner</span>`},
		{"ps_session=usr_named", `<span class="whoami-user">Ana &lt;Admin&gt;</span>`},
		{"ps_session=usr_es", `<span class="whoami-org">Acme &amp; Shoes · Titular</span>`},
	} {
		if p := get(t, app, "/app", map[string]string{"Cookie": tc.cookie}); !strings.Contains(p.body, tc.want) {
			t.Errorf("%s: the header lacks %s", tc.cookie, tc.want)
		}
	}
	if p := get(t, app, "/login", nil); strings.Contains(p.body, `id="whoami"`) {
		t.Error("the login page says someone is signed in")
	}
}

func TestOnlyAffiliatesHaveAProfilePage(t *testing.T) {
	if p := get(t, newTestApp(t, "affiliate"), "/app/settings/profile", map[string]string{"Cookie": "ps_session=usr_1"}); p.status != 200 ||
		!strings.Contains(p.body, `id="profile-form"`) {
		t.Errorf("an affiliate's profile page: %d", p.status)
	}
	if p := get(t, newTestApp(t, "advertiser"), "/app/settings/profile", map[string]string{"Cookie": "ps_session=usr_1"}); p.status != 404 {
		t.Errorf("an advertiser's profile page: %d, want 404", p.status)
	}
}

func TestPagesAreLockedDown(t *testing.T) {
	p := get(t, newTestApp(t, "advertiser"), "/app", map[string]string{"Cookie": "ps_session=usr_1"})
	for h, want := range map[string]string{
		"Content-Security-Policy": "script-src 'self'",
		"X-Frame-Options":         "DENY",
		"Cache-Control":           "no-store",
	} {
		if !strings.Contains(p.header[h], want) {
			t.Errorf("%s = %q, want it to contain %q", h, p.header[h], want)
		}
	}
	if strings.Contains(p.body, "<script>") {
		t.Error("a page has an inline script, which the policy blocks")
	}
}

func TestAssetsAreServedByVersion(t *testing.T) {
	d, err := newDashboard(Options{})
	if err != nil {
		t.Fatal(err)
	}
	app := newTestApp(t, "advertiser")
	for _, tc := range []struct {
		name, path   string
		status       int
		cache, ctype string
	}{
		{"the current version is cached for good", d.assets.url("js/api.js"), 200, "immutable", "text/javascript"},
		{"an old version gets today's file, revalidated", "/assets/0ld/css/app.css", 200, "no-cache", "text/css"},
		{"a missing file is a 404", d.assets.url("js/nope.js"), 404, "", ""},
		{"no escaping the assets", "/assets/" + d.assets.version + "/../templates/layout.html", 404, "", ""},
		{"browsers' /favicon.ico is the page icon", "/favicon.ico", 200, "max-age", "image/svg+xml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := get(t, app, tc.path, nil)
			if p.status != tc.status || !strings.Contains(p.header["Cache-Control"], tc.cache) || !strings.HasPrefix(p.header["Content-Type"], tc.ctype) {
				t.Fatalf("got %d %q %q", p.status, p.header["Cache-Control"], p.header["Content-Type"])
			}
		})
	}
}
