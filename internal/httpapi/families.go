package httpapi

import (
	"context"
	"errors"
	"html"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/partnerstream/partnerstream/internal/auth"
)

// Principal is the authenticated caller. Every handler reads it through Caller and scopes
// every query by CompanyID: a company never sees another's data.
type Principal struct {
	CompanyID   string
	CompanyKind string
	// KeyID is set for API-key callers.
	KeyID string
	// UserID, SessionID, Role and Locale are set for dashboard sessions.
	UserID, SessionID, Role, Locale string
}

// ID is a stable identifier of the credential, for rate limits and idempotency keys.
func (p Principal) ID() string {
	if p.KeyID != "" {
		return p.KeyID
	}
	return p.UserID
}

const principalKey = "principal"

// Caller returns the authenticated caller of a request inside one of the three families.
func Caller(c *fiber.Ctx) Principal {
	p, _ := c.Locals(principalKey).(Principal)
	return p
}

// KeyAuthenticator checks API keys.
type KeyAuthenticator interface {
	Authenticate(ctx context.Context, key string) (auth.KeyRecord, error)
}

// SessionAuthenticator checks dashboard sessions (Bearer JWT or cookie plus CSRF). It returns
// a *Problem for every refusal.
type SessionAuthenticator interface {
	AuthenticateSession(c *fiber.Ctx) (Principal, error)
}

// Route prefixes of the three families.
const (
	prefixV1      = "/api/v1/"
	prefixPartner = "/api/partner-api/"
	prefixAPI     = "/api/"
)

// families applies the rules of the three API families by path, in one place:
//   - /api/v1/*: an API key in x-api-key or Authorization: Bearer; 401 otherwise;
//   - /api/partner-api/*: the company's API key, GET only (405 otherwise);
//   - /api/* (dashboard): a session; an API key is refused, even a valid one;
//
// except the public sign-in routes, which need no credentials.
//
// A refusal of a path no route serves is a 404 instead, as it is with valid credentials.
func (s *Server) families(c *fiber.Ctx) error {
	if err := s.authenticate(c); err != nil {
		if !s.knownRoute(c.Path()) {
			return notFound(c)
		}
		return err
	}
	return c.Next()
}

// authenticate applies the family's rules and sets the caller.
func (s *Server) authenticate(c *fiber.Ctx) error {
	path := c.Path()
	switch {
	case strings.HasPrefix(path, prefixV1) || path == strings.TrimSuffix(prefixV1, "/"):
		if err := s.credential(c, s.authenticateKey); err != nil {
			return err
		}
	case strings.HasPrefix(path, prefixPartner) || path == strings.TrimSuffix(prefixPartner, "/"):
		if m := c.Method(); m != fiber.MethodGet && m != fiber.MethodHead {
			c.Set(fiber.HeaderAllow, "GET, HEAD")
			return NewProblem(fiber.StatusMethodNotAllowed, "method_not_allowed", "the partner API is read-only: use GET")
		}
		if err := s.credential(c, s.authenticateKey); err != nil {
			return err
		}
	case strings.HasPrefix(path, prefixAPI) && !s.isPublic(path):
		// isPublic: the sign-in routes, which create sessions.
		if c.Get("X-Api-Key") != "" || strings.HasPrefix(bearer(c), auth.KeyPrefix) {
			return NewProblem(fiber.StatusUnauthorized, "api_key_not_allowed", "the dashboard API takes a session, not an API key: use /api/v1 with API keys")
		}
		if s.sessions == nil {
			return NewProblem(fiber.StatusUnauthorized, "missing_credentials", "sign in to use the dashboard API")
		}
		if err := s.credential(c, s.authenticateSession); err != nil {
			return err
		}
	default:
		return nil
	}
	return s.limiter.allow(c, Caller(c).ID())
}

// credential runs authenticate and counts a wrong credential against the client address:
// a valid credential is served whatever its address sent before, and only further wrong
// ones from a throttled address get 429.
func (s *Server) credential(c *fiber.Ctx, authenticate func(*fiber.Ctx) error) error {
	err := authenticate(c)
	if err != nil {
		return s.failedAuth.refuse(c, clientIP(c, s.clients), err)
	}
	return nil
}

func (s *Server) authenticateSession(c *fiber.Ctx) error {
	p, err := s.sessions.AuthenticateSession(c)
	if err != nil {
		return err
	}
	c.Locals(principalKey, p)
	return nil
}

// knownRoute reports whether any route, of any method, serves path. It runs for refused
// requests only, which an attacker sends by the thousand, so the routes are split once (again
// when routes were added) and matched segment by segment; a template with syntax beyond
// ":param" and "*" is left to Fiber's slower matcher.
func (s *Server) knownRoute(path string) bool {
	idx := s.routes.Load()
	if n := s.app.HandlersCount(); idx == nil || idx.handlers != n {
		idx = &routeIndex{handlers: n}
		seen := map[string]bool{}
		for _, r := range s.app.GetRoutes(true) {
			if seen[r.Path] {
				continue
			}
			seen[r.Path] = true
			if t := segments(r.Path); plain(t) {
				idx.templates = append(idx.templates, t)
			} else {
				idx.other = append(idx.other, r.Path)
			}
		}
		s.routes.Store(idx)
	}
	segs := segments(path)
	for _, t := range idx.templates {
		if matchSegments(t, segs) {
			return true
		}
	}
	cfg := s.app.Config()
	for _, p := range idx.other {
		if fiber.RoutePatternMatch(path, p, cfg) {
			return true
		}
	}
	return false
}

// routeIndex is the server's route templates, as of a number of handlers.
type routeIndex struct {
	handlers  uint32
	templates [][]string
	other     []string
}

// segments splits a path or template; a trailing slash does not count (Fiber's routing is
// not strict).
func segments(path string) []string {
	if len(path) > 1 {
		path = strings.TrimSuffix(path, "/")
	}
	return strings.Split(path, "/")
}

// plain reports whether matchSegments covers a template: static segments, ":param" alone in
// its segment, and "*" alone.
func plain(tmpl []string) bool {
	for _, t := range tmpl {
		if t == "*" {
			continue
		}
		if strings.ContainsAny(t, "*+?<") || strings.Contains(t[min(1, len(t)):], ":") ||
			strings.HasPrefix(t, ":") && strings.ContainsAny(t, ".-~") {
			return false
		}
	}
	return true
}

// matchSegments matches a path against a template: ":param" takes any one non-empty
// segment, "*" the rest of the path.
func matchSegments(tmpl, segs []string) bool {
	for i, t := range tmpl {
		switch {
		case t == "*":
			return true
		case i >= len(segs):
			return false
		case strings.HasPrefix(t, ":"):
			if segs[i] == "" {
				return false
			}
		case t != segs[i]:
			return false
		}
	}
	return len(tmpl) == len(segs)
}

// notFound is the answer to a path no route serves, the same as Fiber's own.
func notFound(c *fiber.Ctx) error {
	return NewProblem(fiber.StatusNotFound, "not_found", "Cannot "+c.Method()+" "+html.EscapeString(c.Path()))
}

func bearer(c *fiber.Ctx) string {
	h := c.Get(fiber.HeaderAuthorization)
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

func (s *Server) authenticateKey(c *fiber.Ctx) error {
	key := c.Get("X-Api-Key")
	if key == "" {
		key = bearer(c)
	}
	if key == "" {
		c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="partnerstream"`)
		return NewProblem(fiber.StatusUnauthorized, "missing_credentials", "an API key is required in the x-api-key header or as Authorization: Bearer")
	}
	rec, err := s.keys.Authenticate(c.UserContext(), key)
	switch {
	case errors.Is(err, auth.ErrMalformedKey), errors.Is(err, auth.ErrUnknownKey):
		c.Set(fiber.HeaderWWWAuthenticate, `Bearer realm="partnerstream", error="invalid_token"`)
		return NewProblem(fiber.StatusUnauthorized, "invalid_api_key", "the API key is malformed, unknown or revoked")
	case err != nil:
		return err
	}
	c.Locals(principalKey, Principal{CompanyID: rec.CompanyID, CompanyKind: rec.CompanyKind, KeyID: rec.KeyID})
	return nil
}
