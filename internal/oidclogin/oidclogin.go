// Package oidclogin signs users in with Google and LinkedIn through OpenID Connect: the
// authorization code flow with state, nonce and PKCE (S256), then an ID token verified for
// signature, issuer, audience, expiry and nonce. It proves who the user is and that the
// provider has verified their e-mail address; linking that address to an account and opening a
// session is the caller's.
//
// The flows in progress live in Postgres (table oauth_states), so any api replica can finish a
// flow another one started, and each state works once.
package oidclogin

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/oauth2"
)

// The issuers of production.
const (
	GoogleIssuer   = "https://accounts.google.com"
	LinkedInIssuer = "https://www.linkedin.com/oauth"
)

// Providers are the sign-in providers the platform knows, as the routes name them; which of
// them work is the operator's configuration.
var Providers = []string{"google", "linkedin"}

// Supported reports whether name is one of Providers.
func Supported(name string) bool { return slices.Contains(Providers, name) }

// DefaultStateTTL is how long a user has to come back from the provider.
const DefaultStateTTL = 10 * time.Minute

// Errors, to be told apart with errors.Is. Every error returned wraps one of them or a
// database error.
var (
	ErrUnknownProvider     = errors.New("unknown login provider")
	ErrProviderUnavailable = errors.New("login provider unavailable")
	ErrInvalidReturnTo     = errors.New("return_to must be a path on this site")
	ErrInvalidState        = errors.New("login state is invalid, expired or already used")
	ErrExchange            = errors.New("login provider refused the authorization code")
	ErrInvalidIDToken      = errors.New("invalid ID token")
	ErrEmailNotVerified    = errors.New("the login provider has not verified this e-mail address")
)

// ProviderConfig is one identity provider as registered with it.
type ProviderConfig struct {
	// Name is the provider's name in the routes: "google" or "linkedin".
	Name string
	// Issuer is the base of the discovery document and the ID tokens' "iss", e.g. GoogleIssuer.
	Issuer       string
	ClientID     string
	ClientSecret string
	// RedirectURL is our callback as registered with the provider,
	// e.g. https://app.example.com/api/auth/oauth/google/callback.
	RedirectURL string
	// Scopes default to openid, email and profile; openid is always requested.
	Scopes []string
}

// Options tune a Service; the zero value is the production setting.
type Options struct {
	// Now is the clock of state and ID token expiry (default time.Now).
	Now func() time.Time
	// StateTTL bounds the time between Start and Callback (default DefaultStateTTL).
	StateTTL time.Duration
	// HTTPClient talks to the providers (default: a client with a 10 s timeout).
	HTTPClient *http.Client
}

// Identity is who the provider says the user is.
type Identity struct {
	Provider string `json:"provider"`
	// Subject is the provider's stable id of the user.
	Subject string `json:"subject"`
	// Email is verified by the provider and lower-cased.
	Email string `json:"email"`
	Name  string `json:"name"`
	// Locale is as the provider sends it ("en", "es-ES"), or empty.
	Locale string `json:"locale"`
}

// Service runs the login flows of the configured providers. It is safe for concurrent use.
type Service struct {
	db        *pgxpool.Pool
	now       func() time.Time
	stateTTL  time.Duration
	client    *http.Client
	providers map[string]*provider
	names     []string
}

var validName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// New checks the provider configurations. It contacts no provider: each one is discovered on
// first use, so the api starts even while a provider is unreachable; that provider's flows
// fail with ErrProviderUnavailable until its discovery succeeds. ctx is not kept.
func New(_ context.Context, db *pgxpool.Pool, providers []ProviderConfig, opts Options) (*Service, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.StateTTL <= 0 {
		opts.StateTTL = DefaultStateTTL
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	s := &Service{
		db: db, now: opts.Now, stateTTL: opts.StateTTL, client: opts.HTTPClient,
		providers: map[string]*provider{},
	}
	for _, cfg := range providers {
		if err := validate(cfg); err != nil {
			return nil, fmt.Errorf("oidclogin: provider %q: %w", cfg.Name, err)
		}
		if _, dup := s.providers[cfg.Name]; dup {
			return nil, fmt.Errorf("oidclogin: provider %q is configured twice", cfg.Name)
		}
		cfg.Scopes = scopes(cfg.Scopes)
		s.providers[cfg.Name] = &provider{cfg: cfg, client: opts.HTTPClient, now: opts.Now}
		s.names = append(s.names, cfg.Name)
	}
	return s, nil
}

func validate(cfg ProviderConfig) error {
	if !validName.MatchString(cfg.Name) {
		return errors.New("name must be lowercase letters, digits, '-' or '_'")
	}
	for _, f := range []struct{ name, value string }{
		{"issuer", cfg.Issuer}, {"client id", cfg.ClientID},
		{"client secret", cfg.ClientSecret}, {"redirect URL", cfg.RedirectURL},
	} {
		if f.value == "" {
			return fmt.Errorf("%s is required", f.name)
		}
	}
	if u, err := url.Parse(cfg.RedirectURL); err != nil || !u.IsAbs() || u.Host == "" {
		return fmt.Errorf("redirect URL %q must be an absolute URL", cfg.RedirectURL)
	}
	return nil
}

func scopes(configured []string) []string {
	if len(configured) == 0 {
		return []string{"openid", "email", "profile"}
	}
	if slices.Contains(configured, "openid") {
		return slices.Clone(configured)
	}
	return append([]string{"openid"}, configured...)
}

// Providers names the configured providers, in configuration order.
func (s *Service) Providers() []string { return slices.Clone(s.names) }

// Start begins a login with the provider. It returns the provider's authorization URL to
// redirect the browser to, and the state, which the caller also sets in a short-lived cookie
// so that only this browser can finish the flow. returnTo is where the browser goes after the
// login: a path on this site ("" means "/"); Callback hands it back.
func (s *Service) Start(ctx context.Context, providerName, returnTo string) (authURL, state string, err error) {
	p, err := s.provider(providerName)
	if err != nil {
		return "", "", err
	}
	returnTo, err = cleanReturnTo(returnTo)
	if err != nil {
		return "", "", err
	}
	ep, err := p.endpoints(ctx)
	if err != nil {
		return "", "", err
	}
	state = randomToken()
	f := flow{provider: providerName, nonce: randomToken(), verifier: oauth2.GenerateVerifier(), returnTo: returnTo}
	if err := s.saveFlow(ctx, state, f); err != nil {
		return "", "", err
	}
	authURL = ep.oauth.AuthCodeURL(state,
		oidc.Nonce(f.nonce), oauth2.S256ChallengeOption(f.verifier))
	return authURL, state, nil
}

// Callback finishes a login: it consumes the state (once), exchanges the code with the PKCE
// verifier, verifies the ID token and its nonce, and requires a verified e-mail address. It
// returns the identity and the returnTo given to Start. The caller must first check that the
// state equals the one in the browser's cookie.
func (s *Service) Callback(ctx context.Context, providerName, state, code string) (Identity, string, error) {
	p, err := s.provider(providerName)
	if err != nil {
		return Identity{}, "", err
	}
	ep, err := p.endpoints(ctx)
	if err != nil {
		return Identity{}, "", err
	}
	f, err := s.consumeFlow(ctx, providerName, state)
	if err != nil {
		return Identity{}, "", err
	}
	if code == "" {
		return Identity{}, "", fmt.Errorf("%w: %s: no code in the callback", ErrExchange, providerName)
	}
	tok, err := ep.oauth.Exchange(p.context(ctx), code, oauth2.VerifierOption(f.verifier))
	if err != nil {
		return Identity{}, "", fmt.Errorf("%w: %s: %w", ErrExchange, providerName, err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return Identity{}, "", fmt.Errorf("%w: %s: the token response has no id_token", ErrInvalidIDToken, providerName)
	}
	idToken, err := ep.verifier.Verify(ctx, raw)
	if err != nil {
		return Identity{}, "", fmt.Errorf("%w: %s: %w", ErrInvalidIDToken, providerName, err)
	}
	// go-oidc leaves the nonce to us; it binds the token to this flow, so a token stolen from
	// another flow cannot be replayed here.
	if idToken.Nonce == "" || subtle.ConstantTimeCompare([]byte(idToken.Nonce), []byte(f.nonce)) != 1 {
		return Identity{}, "", fmt.Errorf("%w: %s: nonce does not match the login's", ErrInvalidIDToken, providerName)
	}
	if idToken.Subject == "" {
		return Identity{}, "", fmt.Errorf("%w: %s: no subject", ErrInvalidIDToken, providerName)
	}
	var c claims
	if err := idToken.Claims(&c); err != nil {
		return Identity{}, "", fmt.Errorf("%w: %s: claims: %w", ErrInvalidIDToken, providerName, err)
	}
	id, err := c.identity(providerName, idToken.Subject)
	if err != nil {
		return Identity{}, "", err
	}
	return id, f.returnTo, nil
}

func (s *Service) provider(name string) (*provider, error) {
	p, ok := s.providers[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownProvider, name)
	}
	return p, nil
}

// cleanReturnTo keeps the redirect after the login on this site: a URL, or a "//host" or
// "/\host" path that browsers resolve to another host, would make the login an open redirect.
func cleanReturnTo(returnTo string) (string, error) {
	if returnTo == "" {
		return "/", nil
	}
	u, err := url.Parse(returnTo)
	if err != nil || len(returnTo) > 2048 || !strings.HasPrefix(returnTo, "/") ||
		strings.HasPrefix(returnTo, "//") || strings.Contains(returnTo, `\`) || u.Scheme != "" || u.Host != "" {
		return "", fmt.Errorf("%w: %q", ErrInvalidReturnTo, returnTo)
	}
	return returnTo, nil
}

// randomToken returns 256 random bits, URL-safe.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return base64.RawURLEncoding.EncodeToString(b)
}
