package httpapi

import (
	"context"
	"crypto/subtle"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/magiccode"
	"github.com/partnerstream/partnerstream/internal/oidclogin"
	"github.com/partnerstream/partnerstream/internal/session"
	"github.com/partnerstream/partnerstream/internal/signin"
)

// SignIn is the sign-in service.
type SignIn interface {
	RequestCode(ctx context.Context, email, ip, locale string) error
	SignInWithCode(ctx context.Context, email, code string, reg *signin.Registration, meta session.Meta) (signin.Result, error)
	StartOAuth(ctx context.Context, provider, returnTo string, reg *signin.Registration) (string, string, error)
	FinishOAuth(ctx context.Context, provider, state, code string, meta session.Meta) (signin.Result, string, error)
}

// Sessions is the dashboard session manager.
type Sessions interface {
	Authenticate(c *fiber.Ctx) (session.Claims, error)
	Refresh(ctx context.Context, refreshToken string) (session.Tokens, error)
	Revoke(ctx context.Context, sessionID string) error
	SetCookies(c *fiber.Ctx, t session.Tokens)
	ClearCookies(c *fiber.Ctx)
	CSRFToken(sessionID string) string
}

// Accounts reads the signed-in user and company.
type Accounts interface {
	UserByID(ctx context.Context, id string) (identity.User, error)
	CompanyByID(ctx context.Context, id string) (identity.Company, error)
}

// SessionAuth adapts the session manager to the dashboard family, mapping every refusal to
// a problem.
func SessionAuth(m Sessions) SessionAuthenticator { return sessionAuth{m} }

type sessionAuth struct{ m Sessions }

func (a sessionAuth) AuthenticateSession(c *fiber.Ctx) (Principal, error) {
	cl, err := a.m.Authenticate(c)
	if err != nil {
		return Principal{}, sessionProblem(err)
	}
	return Principal{CompanyID: cl.CompanyID, CompanyKind: cl.CompanyKind, UserID: cl.UserID, SessionID: cl.SessionID, Role: cl.Role, Locale: cl.Locale}, nil
}

func sessionProblem(err error) error {
	switch {
	case errors.Is(err, session.ErrNoCredentials):
		return NewProblem(fiber.StatusUnauthorized, "missing_credentials", "sign in to use the dashboard API")
	case errors.Is(err, session.ErrAPIKeyNotAllowed):
		return NewProblem(fiber.StatusUnauthorized, "api_key_not_allowed", "the dashboard API takes a session, not an API key: use /api/v1 with API keys")
	case errors.Is(err, session.ErrCSRF):
		return NewProblem(fiber.StatusForbidden, "csrf_failed", "send the X-CSRF-Token header with cookie-authenticated requests that change state")
	case errors.Is(err, session.ErrExpired):
		return NewProblem(fiber.StatusUnauthorized, "session_expired", "the session token expired: refresh it at /api/auth/refresh or sign in again")
	case errors.Is(err, session.ErrRevoked):
		return NewProblem(fiber.StatusUnauthorized, "session_revoked", "the session was signed out: sign in again")
	case errors.Is(err, session.ErrInvalidToken):
		return NewProblem(fiber.StatusUnauthorized, "invalid_session", "the session token is not valid")
	}
	return err
}

// sessionResponse is the body of every successful sign-in and refresh.
type sessionResponse struct {
	AccessToken      string            `json:"access_token"`
	TokenType        string            `json:"token_type"`
	ExpiresAt        time.Time         `json:"expires_at"`
	RefreshToken     string            `json:"refresh_token,omitempty"`
	CSRFToken        string            `json:"csrf_token"`
	SessionExpiresAt time.Time         `json:"session_expires_at"`
	User             *identity.User    `json:"user,omitempty"`
	Company          *identity.Company `json:"company,omitempty"`
	Registered       bool              `json:"registered,omitempty"`
}

func newSessionResponse(t session.Tokens) sessionResponse {
	return sessionResponse{AccessToken: t.Access, TokenType: "Bearer", ExpiresAt: t.AccessExpiresAt.UTC(), RefreshToken: t.Refresh,
		CSRFToken: t.CSRF, SessionExpiresAt: t.SessionExpiresAt.UTC()}
}

// oauthStateCookie binds an OAuth flow to the browser that started it.
const oauthStateCookie = "ps_oauth_state"

// MountAuth adds the sign-in routes (public) and the session routes (dashboard).
func (s *Server) MountAuth(in SignIn, sessions Sessions, accounts Accounts, insecureCookies bool) {
	h := authHandlers{server: s, signIn: in, sessions: sessions, accounts: accounts, insecureCookies: insecureCookies}
	s.Public(fiber.MethodPost, "/api/auth/magic-code", h.requestCode)
	s.Public(fiber.MethodPost, "/api/auth/magic-code/verify", h.verifyCode)
	s.Public(fiber.MethodPost, "/api/auth/refresh", h.refresh)
	s.Public(fiber.MethodGet, "/api/auth/oauth/:provider/start", h.startOAuth)
	s.Public(fiber.MethodGet, "/api/auth/oauth/:provider/callback", h.finishOAuth)
	s.app.Get("/api/auth/me", h.me)
	s.app.Post("/api/auth/logout", h.logout)
}

type authHandlers struct {
	// server throttles the refresh token like every other credential.
	server          *Server
	signIn          SignIn
	sessions        Sessions
	accounts        Accounts
	insecureCookies bool
}

func (h authHandlers) requestCode(c *fiber.Ctx) error {
	var body struct {
		Email  string `json:"email"`
		Locale string `json:"locale"`
	}
	if err := DecodeJSON(c, &body); err != nil {
		return err
	}
	err := h.signIn.RequestCode(c.UserContext(), body.Email, clientIP(c, h.server.clients), localeOf(c, body.Locale))
	var rl *magiccode.RateLimitError
	switch {
	case errors.Is(err, magiccode.ErrInvalidEmail):
		return Invalid(FieldError{Field: "email", Message: "must be a valid e-mail address"})
	case errors.As(err, &rl):
		secs := int((rl.RetryAfter + time.Second - 1) / time.Second)
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(secs))
		return NewProblem(fiber.StatusTooManyRequests, "rate_limited", "too many codes requested; retry after "+strconv.Itoa(secs)+" s")
	case errors.Is(err, signin.ErrDisabled):
		return NewProblem(fiber.StatusServiceUnavailable, "magic_code_disabled", "e-mail sign-in is not configured on this platform")
	case err != nil:
		return err
	}
	// The same answer whether or not the address has an account.
	return c.Status(fiber.StatusAccepted).JSON(fiber.Map{"status": "sent", "expires_in": 600})
}

func (h authHandlers) verifyCode(c *fiber.Ctx) error {
	var body struct {
		Email       string `json:"email"`
		Code        string `json:"code"`
		CompanyKind string `json:"company_kind"`
		CompanyName string `json:"company_name"`
		Name        string `json:"name"`
		Locale      string `json:"locale"`
	}
	if err := DecodeJSON(c, &body); err != nil {
		return err
	}
	var reg *signin.Registration
	if body.CompanyKind != "" || body.CompanyName != "" {
		reg = &signin.Registration{CompanyKind: body.CompanyKind, CompanyName: body.CompanyName, Name: body.Name, Locale: localeOf(c, body.Locale)}
	}
	res, err := h.signIn.SignInWithCode(c.UserContext(), body.Email, body.Code, reg, session.RequestMeta(c, clientIP(c, h.server.clients)))
	if err != nil {
		return signInProblem(err)
	}
	h.sessions.SetCookies(c, res.Tokens)
	out := newSessionResponse(res.Tokens)
	out.User, out.Company, out.Registered = &res.User, &res.Company, res.Registered
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.JSON(out)
}

func (h authHandlers) refresh(c *fiber.Ctx) error {
	var body struct {
		RefreshToken string `json:"refresh_token"`
	}
	if err := decodeOptionalJSON(c, &body); err != nil {
		return err
	}
	if body.RefreshToken == "" {
		body.RefreshToken = c.Cookies(session.RefreshCookie)
	}
	if body.RefreshToken == "" {
		return NewProblem(fiber.StatusUnauthorized, "missing_credentials", "send refresh_token or the refresh cookie")
	}
	var t session.Tokens
	err := h.server.credential(c, func(c *fiber.Ctx) (err error) {
		t, err = h.sessions.Refresh(c.UserContext(), body.RefreshToken)
		return sessionProblem(err)
	})
	if err != nil {
		return err
	}
	h.sessions.SetCookies(c, t)
	c.Set(fiber.HeaderCacheControl, "no-store")
	return c.JSON(newSessionResponse(t))
}

func (h authHandlers) startOAuth(c *fiber.Ctx) error {
	if !oidclogin.Supported(c.Params("provider")) {
		return notFound(c)
	}
	var reg *signin.Registration
	if kind := c.Query("company_kind"); kind != "" {
		reg = &signin.Registration{CompanyKind: kind, CompanyName: c.Query("company_name"), Locale: localeOf(c, c.Query("locale"))}
	}
	authURL, state, err := h.signIn.StartOAuth(c.UserContext(), c.Params("provider"), c.Query("return_to"), reg)
	if err != nil {
		return signInProblem(err)
	}
	c.Cookie(&fiber.Cookie{Name: oauthStateCookie, Value: state, Path: "/api/auth/oauth/", MaxAge: int(oidclogin.DefaultStateTTL / time.Second),
		HTTPOnly: true, Secure: !h.insecureCookies, SameSite: fiber.CookieSameSiteLaxMode})
	return c.Redirect(authURL, fiber.StatusFound)
}

func (h authHandlers) finishOAuth(c *fiber.Ctx) error {
	if !oidclogin.Supported(c.Params("provider")) {
		return notFound(c)
	}
	state := c.Query("state")
	cookie := c.Cookies(oauthStateCookie)
	c.ClearCookie(oauthStateCookie)
	if c.Query("error") != "" {
		return c.Redirect("/login?error=oauth_denied", fiber.StatusFound)
	}
	if state == "" || subtle.ConstantTimeCompare([]byte(state), []byte(cookie)) != 1 {
		return c.Redirect("/login?error=oauth_state", fiber.StatusFound)
	}
	res, back, err := h.signIn.FinishOAuth(c.UserContext(), c.Params("provider"), state, c.Query("code"), session.RequestMeta(c, clientIP(c, h.server.clients)))
	if err != nil {
		p := signInProblem(err)
		var prob *Problem
		if errors.As(p, &prob) {
			return c.Redirect("/login?error="+url.QueryEscape(prob.Code), fiber.StatusFound)
		}
		return p
	}
	h.sessions.SetCookies(c, res.Tokens)
	return c.Redirect(back, fiber.StatusFound)
}

func (h authHandlers) me(c *fiber.Ctx) error {
	p := Caller(c)
	u, err := h.accounts.UserByID(c.UserContext(), p.UserID)
	if err != nil {
		return err
	}
	co, err := h.accounts.CompanyByID(c.UserContext(), p.CompanyID)
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"user": u, "company": co, "csrf_token": h.sessions.CSRFToken(p.SessionID)})
}

func (h authHandlers) logout(c *fiber.Ctx) error {
	if err := h.sessions.Revoke(c.UserContext(), Caller(c).SessionID); err != nil {
		return err
	}
	h.sessions.ClearCookies(c)
	return c.SendStatus(fiber.StatusNoContent)
}

// signInProblem maps sign-in errors; wrong, expired and used codes share one answer so they
// cannot be told apart.
func signInProblem(err error) error {
	var reg *signin.InvalidRegistration
	switch {
	case errors.As(err, &reg):
		return Invalid(FieldError{Field: reg.Field, Message: reg.Message})
	case errors.Is(err, magiccode.ErrInvalidEmail):
		return Invalid(FieldError{Field: "email", Message: "must be a valid e-mail address"})
	case errors.Is(err, magiccode.ErrInvalidCode):
		return NewProblem(fiber.StatusUnauthorized, "invalid_code", "the code is wrong, expired or already used")
	case errors.Is(err, magiccode.ErrLocked):
		return NewProblem(fiber.StatusUnauthorized, "code_locked", "too many wrong codes: request a new one")
	case errors.Is(err, signin.ErrRegistrationRequired):
		return NewProblem(fiber.StatusUnprocessableEntity, "registration_required", "no account uses this address: sign up with company_kind and company_name")
	case errors.Is(err, signin.ErrDisabled):
		return NewProblem(fiber.StatusServiceUnavailable, "sign_in_disabled", "this sign-in method is not configured on this platform")
	case errors.Is(err, oidclogin.ErrUnknownProvider):
		return NewProblem(fiber.StatusNotFound, "unknown_provider", "sign-in provider is not configured: use google or linkedin")
	case errors.Is(err, oidclogin.ErrProviderUnavailable):
		return NewProblem(fiber.StatusServiceUnavailable, "provider_unavailable", "the sign-in provider cannot be reached; try again shortly")
	case errors.Is(err, oidclogin.ErrInvalidReturnTo):
		return Invalid(FieldError{Field: "return_to", Message: "must be a path on this site"})
	case errors.Is(err, oidclogin.ErrInvalidState):
		return NewProblem(fiber.StatusBadRequest, "oauth_state", "the sign-in flow expired or was already used: start again")
	case errors.Is(err, oidclogin.ErrExchange), errors.Is(err, oidclogin.ErrInvalidIDToken):
		return NewProblem(fiber.StatusUnauthorized, "oauth_failed", "the provider's answer could not be verified")
	case errors.Is(err, oidclogin.ErrEmailNotVerified):
		return NewProblem(fiber.StatusForbidden, "email_not_verified", "the provider has not verified this e-mail address")
	}
	return err
}

// localeOf is the explicit locale, else the first language of Accept-Language.
func localeOf(c *fiber.Ctx, explicit string) string {
	if explicit != "" {
		return explicit
	}
	al := c.Get(fiber.HeaderAcceptLanguage)
	if i := strings.IndexAny(al, ",;"); i >= 0 {
		al = al[:i]
	}
	return strings.TrimSpace(al)
}
