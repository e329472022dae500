package session

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/partnerstream/partnerstream/internal/auth"
)

// sentinels name the errors of Authenticate in responses of the test app.
var sentinels = []error{ErrNoCredentials, ErrAPIKeyNotAllowed, ErrInvalidToken, ErrExpired, ErrRevoked, ErrCSRF}

// authApp answers "ok <user id>" or the sentinel Authenticate returned.
func authApp(m *Manager) *fiber.App {
	app := fiber.New()
	app.All("/api/things", func(c *fiber.Ctx) error {
		claims, err := m.Authenticate(c)
		if err == nil {
			return c.SendString("ok " + claims.UserID)
		}
		for _, s := range sentinels {
			if errors.Is(err, s) {
				return c.SendString(s.Error())
			}
		}
		return err
	})
	return app
}

func call(t *testing.T, app *fiber.App, req *http.Request) string {
	t.Helper()
	resp, err := app.Test(req, -1)
	if err != nil {
		t.Fatalf("app.Test: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}

func TestAuthenticateTakesBearerOrCookieWithCSRF(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	app := authApp(f.m)
	tok, other := f.issue(t), f.issue(t)
	revoked := f.issue(t)
	if err := f.m.Revoke(context.Background(), revoked.SessionID); err != nil {
		t.Fatal(err)
	}
	apiKey, _, _ := auth.NewKey()
	ok := "ok " + f.subject.UserID

	type request struct {
		method  string
		headers map[string]string
		cookie  string // value of ps_session
	}
	for _, tc := range []struct {
		name string
		req  request
		want string
	}{
		{"a request without credentials", request{method: "GET"}, ErrNoCredentials.Error()},
		{"a Bearer token on GET", request{method: "GET", headers: map[string]string{"Authorization": "Bearer " + tok.Access}}, ok},
		{"a Bearer token on POST without a CSRF token", request{method: "POST", headers: map[string]string{"Authorization": "Bearer " + tok.Access}}, ok},
		{"a Bearer scheme in lower case", request{method: "DELETE", headers: map[string]string{"Authorization": "bearer " + tok.Access}}, ok},
		{"a cookie on GET without a CSRF token", request{method: "GET", cookie: tok.Access}, ok},
		{"a cookie on OPTIONS without a CSRF token", request{method: "OPTIONS", cookie: tok.Access}, ok},
		{"a cookie on POST without a CSRF token", request{method: "POST", cookie: tok.Access}, ErrCSRF.Error()},
		{"a cookie on PUT without a CSRF token", request{method: "PUT", cookie: tok.Access}, ErrCSRF.Error()},
		{"a cookie on PATCH without a CSRF token", request{method: "PATCH", cookie: tok.Access}, ErrCSRF.Error()},
		{"a cookie on DELETE without a CSRF token", request{method: "DELETE", cookie: tok.Access}, ErrCSRF.Error()},
		{"a cookie on POST with a wrong CSRF token", request{method: "POST", cookie: tok.Access, headers: map[string]string{CSRFHeader: "x" + tok.CSRF}}, ErrCSRF.Error()},
		{"a cookie on POST with another session's CSRF token", request{method: "POST", cookie: tok.Access, headers: map[string]string{CSRFHeader: other.CSRF}}, ErrCSRF.Error()},
		{"a cookie on POST with its CSRF token", request{method: "POST", cookie: tok.Access, headers: map[string]string{CSRFHeader: tok.CSRF}}, ok},
		{"a cookie on PATCH with its CSRF token", request{method: "PATCH", cookie: tok.Access, headers: map[string]string{CSRFHeader: tok.CSRF}}, ok},
		{"an API key as a Bearer token", request{method: "GET", headers: map[string]string{"Authorization": "Bearer " + apiKey}}, ErrAPIKeyNotAllowed.Error()},
		{"an API key in x-api-key beside a valid cookie", request{method: "GET", cookie: tok.Access, headers: map[string]string{"X-Api-Key": apiKey}}, ErrAPIKeyNotAllowed.Error()},
		{"a Basic header from a proxy beside a valid cookie", request{method: "GET", cookie: tok.Access, headers: map[string]string{"Authorization": "Basic dXNlcjpwYXNz"}}, ok},
		{"a forged Bearer token beside a valid cookie", request{method: "GET", cookie: tok.Access, headers: map[string]string{"Authorization": "Bearer " + tok.Access + "x"}}, ErrInvalidToken.Error()},
		{"an empty Bearer token, which is no credentials", request{method: "GET", headers: map[string]string{"Authorization": "Bearer "}}, ErrNoCredentials.Error()},
		{"a garbage cookie", request{method: "GET", cookie: "garbage"}, ErrInvalidToken.Error()},
		{"a garbage cookie on POST", request{method: "POST", cookie: "garbage", headers: map[string]string{CSRFHeader: tok.CSRF}}, ErrInvalidToken.Error()},
		{"a cookie of a revoked session with its CSRF token", request{method: "POST", cookie: revoked.Access, headers: map[string]string{CSRFHeader: revoked.CSRF}}, ErrRevoked.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(tc.req.method, "/api/things", nil)
			for k, v := range tc.req.headers {
				req.Header.Set(k, v)
			}
			if tc.req.cookie != "" {
				req.AddCookie(&http.Cookie{Name: SessionCookie, Value: tc.req.cookie})
			}
			if got := call(t, app, req); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestAuthenticateReportsAnExpiredCookie(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tok := f.issue(t)
	f.clock.Advance(DefaultAccessTTL + leeway + time.Second)
	req := httptest.NewRequest("GET", "/api/things", nil)
	req.AddCookie(&http.Cookie{Name: SessionCookie, Value: tok.Access})
	if got := call(t, authApp(f.m), req); got != ErrExpired.Error() {
		t.Fatalf("got %q, want %q: the client must learn to refresh", got, ErrExpired)
	}
}

// cookieApp sets the cookies of tok on /login and clears them on /logout.
func cookieApp(m *Manager, tok Tokens) *fiber.App {
	app := fiber.New()
	app.Post("/api/auth/login", func(c *fiber.Ctx) error { m.SetCookies(c, tok); return nil })
	app.Post("/api/auth/logout", func(c *fiber.Ctx) error { m.ClearCookies(c); return nil })
	return app
}

func responseCookies(t *testing.T, app *fiber.App, path string) map[string]*http.Cookie {
	t.Helper()
	resp, err := app.Test(httptest.NewRequest("POST", path, nil), -1)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]*http.Cookie{}
	for _, c := range resp.Cookies() {
		out[c.Name] = c
	}
	return out
}

func TestSetCookiesMarksThemForBrowsers(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tok := f.issue(t)
	lifetime := int(DefaultRefreshTTL / time.Second)

	type attrs struct {
		value    string
		path     string
		httpOnly bool
		sameSite http.SameSite
	}
	want := map[string]attrs{
		SessionCookie: {tok.Access, "/", true, http.SameSiteLaxMode},
		RefreshCookie: {tok.Refresh, RefreshCookiePath, true, http.SameSiteStrictMode},
		CSRFCookie:    {tok.CSRF, "/", false, http.SameSiteLaxMode},
	}
	for _, tc := range []struct {
		name       string
		m          *Manager
		wantSecure bool
	}{
		{"by default", f.m, true},
		{"with insecure cookies for development", f.manager(t, f.spec, Options{InsecureCookies: true}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := responseCookies(t, cookieApp(tc.m, tok), "/api/auth/login")
			if len(got) != len(want) {
				t.Fatalf("cookies %v, want %d", got, len(want))
			}
			for name, w := range want {
				c := got[name]
				if c == nil {
					t.Fatalf("no %s cookie", name)
				}
				if c.Value != w.value || c.Path != w.path || c.HttpOnly != w.httpOnly || c.SameSite != w.sameSite ||
					c.Secure != tc.wantSecure || c.MaxAge != lifetime {
					t.Errorf("%s: %s", name, c.String())
				}
			}
		})
	}

	t.Run("without a refresh token the refresh cookie is left alone", func(t *testing.T) {
		accessOnly := tok
		accessOnly.Refresh = ""
		got := responseCookies(t, cookieApp(f.m, accessOnly), "/api/auth/login")
		if _, ok := got[RefreshCookie]; ok || got[SessionCookie] == nil {
			t.Fatalf("cookies %v: want the session cookie and no refresh cookie", got)
		}
	})

	t.Run("ClearCookies expires all three on their paths", func(t *testing.T) {
		got := responseCookies(t, cookieApp(f.m, tok), "/api/auth/logout")
		for name, w := range want {
			c := got[name]
			if c == nil || c.Value != "" || c.Path != w.path || !c.Expires.Before(time.Now()) {
				t.Errorf("%s is not cleared: %v", name, c)
			}
		}
	})
}

// TestCookiesFromSetCookiesAuthenticate plays the browser: it sends back what SetCookies set,
// with the CSRF cookie copied into the header as the dashboard's JavaScript does.
func TestCookiesFromSetCookiesAuthenticate(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tok := f.issue(t)
	cookies := responseCookies(t, cookieApp(f.m, tok), "/api/auth/login")
	req := httptest.NewRequest("POST", "/api/things", strings.NewReader("{}"))
	req.AddCookie(cookies[SessionCookie])
	req.AddCookie(cookies[CSRFCookie])
	req.Header.Set(CSRFHeader, cookies[CSRFCookie].Value)
	if got := call(t, authApp(f.m), req); got != "ok "+f.subject.UserID {
		t.Fatalf("got %q", got)
	}
}
