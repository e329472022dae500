package session

import (
	"math"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/utils"

	"github.com/partnerstream/partnerstream/internal/auth"
)

// Cookies and header of browser sessions.
const (
	// SessionCookie holds the access token (HttpOnly, SameSite=Lax, Path=/).
	SessionCookie = "ps_session"
	// RefreshCookie holds the refresh token (HttpOnly, SameSite=Strict). It is only sent to
	// RefreshCookiePath, so the refresh and sign-out endpoints must live under it.
	RefreshCookie     = "ps_refresh"
	RefreshCookiePath = "/api/auth"
	// CSRFCookie holds the CSRF token for the dashboard's JavaScript, which copies it into
	// CSRFHeader on every request that changes state. Read it per request, not once: it
	// changes after a key rotation.
	CSRFCookie = "ps_csrf"
	CSRFHeader = "X-CSRF-Token"
)

const apiKeyHeader = "X-Api-Key"

// Authenticate finds and checks the session of a request: an Authorization Bearer token
// first, else the session cookie. A cookie-authenticated request with a method other than
// GET, HEAD, OPTIONS or TRACE must carry the session's CSRF token in CSRFHeader (a browser
// adds cookies to cross-site requests by itself, never an Authorization header).
//
// An API key, in x-api-key or as a Bearer token, gives ErrAPIKeyNotAllowed. A non-Bearer
// Authorization header (such as Basic from a proxy in front of a staging site) is ignored.
// Authenticate writes nothing to the response: the caller maps the errors to problems, and
// any error that is none of the package's sentinels is a store failure.
func (m *Manager) Authenticate(c *fiber.Ctx) (Claims, error) {
	if c.Get(apiKeyHeader) != "" {
		return Claims{}, ErrAPIKeyNotAllowed
	}
	if token, ok := bearer(c.Get(fiber.HeaderAuthorization)); ok {
		if strings.HasPrefix(token, auth.KeyPrefix) {
			return Claims{}, ErrAPIKeyNotAllowed
		}
		return m.Verify(c.UserContext(), token)
	}
	token := c.Cookies(SessionCookie)
	if token == "" {
		return Claims{}, ErrNoCredentials
	}
	// The CSRF check sits between the signature and the session lookup: a forged request
	// costs no query.
	claims, err := m.codec.parse(token)
	if err != nil {
		return Claims{}, err
	}
	if !safeMethod(c.Method()) {
		if err := m.CheckCSRF(claims.SessionID, c.Get(CSRFHeader)); err != nil {
			return Claims{}, err
		}
	}
	if err := m.checkSession(c.UserContext(), claims); err != nil {
		return Claims{}, err
	}
	return claims, nil
}

// bearer returns the credentials of an Authorization header with the Bearer scheme (matched
// case-insensitively, RFC 9110 section 11.1).
func bearer(header string) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(token), true
}

func safeMethod(method string) bool {
	switch method {
	case fiber.MethodGet, fiber.MethodHead, fiber.MethodOptions, fiber.MethodTrace:
		return true
	}
	return false
}

// SetCookies hands tokens to a browser. The cookies live as long as the session, so that an
// expired access token still reaches the server, which answers ErrExpired and lets the client
// refresh. A Tokens without a refresh token leaves the refresh cookie as it is.
func (m *Manager) SetCookies(c *fiber.Ctx, t Tokens) {
	maxAge := int(math.Ceil(t.SessionExpiresAt.Sub(m.now()).Seconds()))
	if maxAge <= 0 {
		m.ClearCookies(c)
		return
	}
	c.Cookie(m.cookie(SessionCookie, t.Access, "/", true, fiber.CookieSameSiteLaxMode, maxAge))
	if t.Refresh != "" {
		c.Cookie(m.cookie(RefreshCookie, t.Refresh, RefreshCookiePath, true, fiber.CookieSameSiteStrictMode, maxAge))
	}
	c.Cookie(m.cookie(CSRFCookie, t.CSRF, "/", false, fiber.CookieSameSiteLaxMode, maxAge))
}

// ClearCookies tells the browser to drop the session cookies (sign-out).
func (m *Manager) ClearCookies(c *fiber.Ctx) {
	for _, ck := range []*fiber.Cookie{
		m.cookie(SessionCookie, "", "/", true, fiber.CookieSameSiteLaxMode, 0),
		m.cookie(RefreshCookie, "", RefreshCookiePath, true, fiber.CookieSameSiteStrictMode, 0),
		m.cookie(CSRFCookie, "", "/", false, fiber.CookieSameSiteLaxMode, 0),
	} {
		// A date in the past deletes a cookie; Path must match the one it was set with.
		ck.Expires = time.Unix(0, 0).UTC()
		c.Cookie(ck)
	}
}

func (m *Manager) cookie(name, value, path string, httpOnly bool, sameSite string, maxAge int) *fiber.Cookie {
	return &fiber.Cookie{Name: name, Value: value, Path: path, HTTPOnly: httpOnly, Secure: m.secure, SameSite: sameSite, MaxAge: maxAge}
}

// RequestMeta describes the client of a sign-in request for Issue; ip is its address as the
// api decided it (behind trusted proxies, not the connection's peer). The user agent is
// copied: Fiber reuses its buffers once the handler returns.
func RequestMeta(c *fiber.Ctx, ip string) Meta {
	return Meta{UserAgent: utils.CopyString(c.Get(fiber.HeaderUserAgent)), IP: ip}
}
