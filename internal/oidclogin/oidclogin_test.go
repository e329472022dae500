package oidclogin

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/testenv/pgtest"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/oauth2"

	"github.com/partnerstream/partnerstream/internal/testenv"
)

// env is a migrated database, two local providers standing in for Google and LinkedIn, and a
// Service configured with both.
type env struct {
	db       *pgxpool.Pool
	clock    *testenv.Clock
	google   *testenv.Provider
	linkedin *testenv.Provider
	svc      *Service
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	_, db := pgtest.Migrated(t)
	e := &env{
		db:     db,
		clock:  clockAtNow(),
		google: testenv.OIDCProvider(t, testenv.OIDCClient("google-client", "google-secret")),
		// Like LinkedIn: an issuer with a path, and the client secret only in the form body.
		linkedin: testenv.OIDCProvider(t, testenv.OIDCClient("linkedin-client", "linkedin-secret"),
			testenv.OIDCIssuerPath("/oauth"), testenv.OIDCTokenAuthMethods(testenv.ClientSecretPost)),
	}
	var err error
	e.svc, err = New(ctx, db, []ProviderConfig{config("google", e.google), config("linkedin", e.linkedin)},
		Options{Now: e.clock.Now})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return e
}

func config(name string, p *testenv.Provider) ProviderConfig {
	return ProviderConfig{
		Name: name, Issuer: p.Issuer(), ClientID: p.ClientID(), ClientSecret: p.ClientSecret(),
		// Never contacted: the browser stand-in stops at the provider's redirect.
		RedirectURL: "https://app.example.test/api/auth/oauth/" + name + "/callback",
	}
}

func (e *env) provider(name string) *testenv.Provider {
	if name == "linkedin" {
		return e.linkedin
	}
	return e.google
}

// authorize starts a login and plays the browser at the provider, up to our callback.
func (e *env) authorize(t *testing.T, provider, returnTo string) (state, code string) {
	t.Helper()
	authURL, state, err := e.svc.Start(context.Background(), provider, returnTo)
	if err != nil {
		t.Fatalf("Start(%s): %v", provider, err)
	}
	back := testenv.FollowAuthorize(t, authURL).Query()
	if back.Get("error") != "" {
		t.Fatalf("provider refused the authorization: %s: %s", back.Get("error"), back.Get("error_description"))
	}
	if back.Get("state") != state {
		t.Fatalf("callback state = %q, want the one Start returned %q", back.Get("state"), state)
	}
	return state, back.Get("code")
}

func TestLoginWithEachProvider(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tests := []struct {
		name     string
		provider string
		user     testenv.OIDCUser
		want     Identity
	}{
		{
			name:     "Google sends email_verified as a boolean",
			provider: "google",
			user:     testenv.OIDCUser{Subject: "g-1", Email: "Ada.Lovelace@Example.com", EmailVerified: true, Name: "Ada Lovelace", Locale: "es"},
			want:     Identity{Provider: "google", Subject: "g-1", Email: "ada.lovelace@example.com", Name: "Ada Lovelace", Locale: "es"},
		},
		{
			name:     "LinkedIn sends email_verified as the string true",
			provider: "linkedin",
			user:     testenv.OIDCUser{Subject: "li-1", Email: "GRACE@example.com", EmailVerified: "true", Name: "Grace Hopper", Locale: "en_US"},
			want:     Identity{Provider: "linkedin", Subject: "li-1", Email: "grace@example.com", Name: "Grace Hopper", Locale: "en_US"},
		},
		{
			name:     "a locale sent as a language and country object becomes a tag",
			provider: "linkedin",
			user: testenv.OIDCUser{Subject: "li-2", Email: "alan@example.com", EmailVerified: true, Name: "Alan Turing",
				Locale: map[string]string{"language": "en", "country": "GB"}},
			want: Identity{Provider: "linkedin", Subject: "li-2", Email: "alan@example.com", Name: "Alan Turing", Locale: "en-GB"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.provider(tt.provider).SetUser(tt.user)
			state, code := e.authorize(t, tt.provider, "/dashboard?tab=programs")
			got, returnTo, err := e.svc.Callback(context.Background(), tt.provider, state, code)
			if err != nil {
				t.Fatalf("Callback: %v", err)
			}
			if got != tt.want {
				t.Errorf("identity = %+v, want %+v", got, tt.want)
			}
			if returnTo != "/dashboard?tab=programs" {
				t.Errorf("returnTo = %q, want the one given to Start", returnTo)
			}
		})
	}
}

func TestStartSendsNoncePKCEAndScopes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	authURL, state, err := e.svc.Start(context.Background(), "google", "")
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	u, err := url.Parse(authURL)
	if err != nil {
		t.Fatalf("auth URL %q: %v", authURL, err)
	}
	if !strings.HasPrefix(authURL, e.google.Issuer()+"/authorize?") {
		t.Errorf("auth URL %q is not the discovered authorization endpoint", authURL)
	}
	var verifier, nonce, returnTo string
	err = e.db.QueryRow(context.Background(),
		`SELECT code_verifier, nonce, return_to FROM oauth_states WHERE state_hash = $1`, stateHash(state)).
		Scan(&verifier, &nonce, &returnTo)
	if err != nil {
		t.Fatalf("stored state: %v", err)
	}
	q := u.Query()
	for param, want := range map[string]string{
		"state":                 state,
		"nonce":                 nonce,
		"code_challenge":        oauth2.S256ChallengeFromVerifier(verifier),
		"code_challenge_method": "S256",
		"scope":                 "openid email profile",
		"client_id":             "google-client",
		"response_type":         "code",
	} {
		if q.Get(param) != want {
			t.Errorf("auth URL %s = %q, want %q", param, q.Get(param), want)
		}
	}
	if returnTo != "/" {
		t.Errorf("stored return_to = %q, want / for an empty returnTo", returnTo)
	}
	if strings.Contains(authURL, verifier) {
		t.Error("the PKCE verifier leaks into the auth URL")
	}
}

func TestCallbackRefusesBadIDTokens(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tests := []struct {
		name   string
		faults testenv.TokenFaults
		why    string
	}{
		{name: "a token signed with a foreign key under the provider's key id is forged", faults: testenv.TokenFaults{ForeignKey: true}, why: "signature"},
		{name: "a token for another client is refused", faults: testenv.TokenFaults{WrongAudience: true}, why: "audience"},
		{name: "a token from another issuer is refused", faults: testenv.TokenFaults{WrongIssuer: true}, why: "different provider"},
		{name: "an expired token is refused", faults: testenv.TokenFaults{Expired: true}, why: "expired"},
		{name: "a token with another flow's nonce is refused", faults: testenv.TokenFaults{WrongNonce: true}, why: "nonce"},
		{name: "a token without a nonce is refused", faults: testenv.TokenFaults{NoNonce: true}, why: "nonce"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			state, code := e.authorize(t, "google", "/")
			e.google.SetNextToken(tt.faults)
			id, _, err := e.svc.Callback(context.Background(), "google", state, code)
			if !errors.Is(err, ErrInvalidIDToken) {
				t.Fatalf("Callback = %+v, %v; want ErrInvalidIDToken", id, err)
			}
			if !strings.Contains(err.Error(), tt.why) {
				t.Errorf("error %q does not say %q", err, tt.why)
			}
		})
	}
	t.Run("a token that expired by the injected clock is refused", func(t *testing.T) {
		state, code := e.authorize(t, "google", "/")
		e.clock.Advance(testenv.OIDCTokenLifetime + time.Minute)
		t.Cleanup(func() { e.clock.Advance(-testenv.OIDCTokenLifetime - time.Minute) })
		_, _, err := e.svc.Callback(context.Background(), "google", state, code)
		if expired := new(oidc.TokenExpiredError); !errors.As(err, &expired) {
			t.Fatalf("Callback error = %v, want an oidc.TokenExpiredError", err)
		}
	})
}

func TestCallbackRequiresAVerifiedEmail(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tests := []struct {
		name string
		user testenv.OIDCUser
	}{
		{name: "email_verified false", user: testenv.OIDCUser{Subject: "s", Email: "a@example.com", EmailVerified: false}},
		{name: "email_verified the string false", user: testenv.OIDCUser{Subject: "s", Email: "a@example.com", EmailVerified: "false"}},
		{name: "email_verified missing", user: testenv.OIDCUser{Subject: "s", Email: "a@example.com"}},
		{name: "email_verified of an unexpected type", user: testenv.OIDCUser{Subject: "s", Email: "a@example.com", EmailVerified: 1}},
		{name: "a verified flag without an address", user: testenv.OIDCUser{Subject: "s", EmailVerified: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.linkedin.SetUser(tt.user)
			state, code := e.authorize(t, "linkedin", "/")
			id, _, err := e.svc.Callback(context.Background(), "linkedin", state, code)
			if !errors.Is(err, ErrEmailNotVerified) {
				t.Fatalf("Callback = %+v, %v; want ErrEmailNotVerified", id, err)
			}
			if strings.Contains(err.Error(), "a@example.com") {
				t.Errorf("error %q carries the address", err)
			}
		})
	}
}

func TestStateWorksOnceAndExpires(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()

	t.Run("a replayed state is refused", func(t *testing.T) {
		state, code := e.authorize(t, "google", "/")
		if _, _, err := e.svc.Callback(ctx, "google", state, code); err != nil {
			t.Fatalf("first Callback: %v", err)
		}
		if _, _, err := e.svc.Callback(ctx, "google", state, code); !errors.Is(err, ErrInvalidState) {
			t.Fatalf("replayed Callback error = %v, want ErrInvalidState", err)
		}
	})
	t.Run("a state is refused after its TTL", func(t *testing.T) {
		state, code := e.authorize(t, "google", "/")
		e.clock.Advance(DefaultStateTTL)
		t.Cleanup(func() { e.clock.Advance(-DefaultStateTTL) })
		if _, _, err := e.svc.Callback(ctx, "google", state, code); !errors.Is(err, ErrInvalidState) {
			t.Fatalf("Callback error = %v, want ErrInvalidState", err)
		}
	})
	t.Run("a state is valid until its TTL", func(t *testing.T) {
		state, code := e.authorize(t, "google", "/")
		e.clock.Advance(DefaultStateTTL - time.Second)
		t.Cleanup(func() { e.clock.Advance(-DefaultStateTTL + time.Second) })
		// The token itself expired meanwhile: the state passed if the refusal is about the token.
		if _, _, err := e.svc.Callback(ctx, "google", state, code); !errors.Is(err, ErrInvalidIDToken) {
			t.Fatalf("Callback error = %v, want the state accepted and the expired token refused", err)
		}
	})
	t.Run("a state started with one provider is refused at another", func(t *testing.T) {
		state, code := e.authorize(t, "google", "/")
		if _, _, err := e.svc.Callback(ctx, "linkedin", state, code); !errors.Is(err, ErrInvalidState) {
			t.Fatalf("Callback error = %v, want ErrInvalidState", err)
		}
	})
	t.Run("an unknown or empty state is refused", func(t *testing.T) {
		for _, state := range []string{"", "made-up"} {
			if _, _, err := e.svc.Callback(ctx, "google", state, "code"); !errors.Is(err, ErrInvalidState) {
				t.Errorf("Callback(state %q) error = %v, want ErrInvalidState", state, err)
			}
		}
	})
	t.Run("starting a flow prunes the expired ones", func(t *testing.T) {
		e.clock.Advance(DefaultStateTTL)
		t.Cleanup(func() { e.clock.Advance(-DefaultStateTTL) })
		_, state, err := e.svc.Start(ctx, "google", "/")
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
		var left int
		if err := e.db.QueryRow(ctx, `SELECT count(*) FROM oauth_states WHERE state_hash <> $1`, stateHash(state)).Scan(&left); err != nil {
			t.Fatal(err)
		}
		if left != 0 {
			t.Errorf("%d expired states left after Start, want 0", left)
		}
	})
}

func TestTokenEndpointChecksThePKCEVerifier(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	state, code := e.authorize(t, "linkedin", "/")
	// What an attacker holding a stolen code lacks: the verifier stored with the state.
	if _, err := e.db.Exec(ctx, `UPDATE oauth_states SET code_verifier = $2 WHERE state_hash = $1`,
		stateHash(state), oauth2.GenerateVerifier()); err != nil {
		t.Fatal(err)
	}
	_, _, err := e.svc.Callback(ctx, "linkedin", state, code)
	if !errors.Is(err, ErrExchange) {
		t.Fatalf("Callback error = %v, want ErrExchange", err)
	}
	var refused *oauth2.RetrieveError
	if !errors.As(err, &refused) || refused.ErrorCode != "invalid_grant" || !strings.Contains(refused.ErrorDescription, "code_verifier") {
		t.Fatalf("Callback error = %v, want the token endpoint's invalid_grant about the code_verifier", err)
	}
}

func TestUnknownProvider(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if got, want := e.svc.Providers(), []string{"google", "linkedin"}; !slices.Equal(got, want) {
		t.Errorf("Providers() = %v, want %v", got, want)
	}
	if _, _, err := e.svc.Start(context.Background(), "facebook", "/"); !errors.Is(err, ErrUnknownProvider) {
		t.Errorf("Start error = %v, want ErrUnknownProvider", err)
	}
	if _, _, err := e.svc.Callback(context.Background(), "facebook", "state", "code"); !errors.Is(err, ErrUnknownProvider) {
		t.Errorf("Callback error = %v, want ErrUnknownProvider", err)
	}
}

func TestDiscoveryIsLazyAndRetried(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	down := testenv.OIDCProvider(t)
	down.SetDiscoveryDown(true)
	svc, err := New(context.Background(), e.db, []ProviderConfig{config("google", down)}, Options{Now: e.clock.Now})
	if err != nil {
		t.Fatalf("New must not contact the provider: %v", err)
	}
	if _, _, err := svc.Start(context.Background(), "google", "/"); !errors.Is(err, ErrProviderUnavailable) {
		t.Fatalf("Start while discovery is down: error = %v, want ErrProviderUnavailable", err)
	}
	down.SetDiscoveryDown(false)
	if _, _, err := svc.Start(context.Background(), "google", "/"); !errors.Is(err, ErrProviderUnavailable) {
		t.Fatalf("Start right after a failure: error = %v, want the remembered ErrProviderUnavailable", err)
	}
	e.clock.Advance(rediscoverAfter)
	if _, _, err := svc.Start(context.Background(), "google", "/"); err != nil {
		t.Fatalf("Start once the provider is back: %v", err)
	}
}

func TestStartKeepsReturnToOnThisSite(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, returnTo := range []string{
		"https://evil.example/", "//evil.example/path", `/\evil.example`, "evil", "javascript:alert(1)",
		"/" + strings.Repeat("a", 2048),
	} {
		if _, _, err := e.svc.Start(context.Background(), "google", returnTo); !errors.Is(err, ErrInvalidReturnTo) {
			t.Errorf("Start(returnTo %q) error = %v, want ErrInvalidReturnTo", returnTo, err)
		}
	}
}

func TestNewRefusesIncompleteConfigurations(t *testing.T) {
	t.Parallel()
	good := ProviderConfig{Name: "google", Issuer: GoogleIssuer, ClientID: "id", ClientSecret: "secret",
		RedirectURL: "https://app.example.test/api/auth/oauth/google/callback"}
	tests := []struct {
		name   string
		change func(*ProviderConfig)
	}{
		{"a provider without a name", func(c *ProviderConfig) { c.Name = "" }},
		{"a name that is no path segment", func(c *ProviderConfig) { c.Name = "Goo gle" }},
		{"a provider without an issuer", func(c *ProviderConfig) { c.Issuer = "" }},
		{"a provider without a client id", func(c *ProviderConfig) { c.ClientID = "" }},
		{"a provider without a client secret", func(c *ProviderConfig) { c.ClientSecret = "" }},
		{"a relative redirect URL", func(c *ProviderConfig) { c.RedirectURL = "/api/auth/oauth/google/callback" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := good
			tt.change(&cfg)
			if _, err := New(context.Background(), nil, []ProviderConfig{cfg}, Options{}); err == nil {
				t.Error("New accepted it")
			}
		})
	}
	t.Run("a provider configured twice", func(t *testing.T) {
		if _, err := New(context.Background(), nil, []ProviderConfig{good, good}, Options{}); err == nil {
			t.Error("New accepted it")
		}
	})
	t.Run("openid is always requested", func(t *testing.T) {
		cfg := good
		cfg.Scopes = []string{"email"}
		svc, err := New(context.Background(), nil, []ProviderConfig{cfg}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := svc.providers["google"].cfg.Scopes; !slices.Equal(got, []string{"openid", "email"}) {
			t.Errorf("scopes = %v", got)
		}
	})
}

func TestClaimsDecoding(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		json     string
		verified bool
		locale   string
	}{
		{"a boolean true is verified", `{"email_verified": true}`, true, ""},
		{"the string true is verified", `{"email_verified": "true"}`, true, ""},
		{"the string TRUE is verified", `{"email_verified": "TRUE"}`, true, ""},
		{"the string false is not", `{"email_verified": "false"}`, false, ""},
		{"a number is not", `{"email_verified": 1}`, false, ""},
		{"null is not", `{"email_verified": null}`, false, ""},
		{"a locale string is kept", `{"locale": "es-ES"}`, false, "es-ES"},
		{"a locale object becomes a tag", `{"locale": {"language": "es", "country": "MX"}}`, false, "es-MX"},
		{"a locale object without a country is its language", `{"locale": {"language": "es"}}`, false, "es"},
		{"an unreadable locale is empty", `{"locale": 42}`, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var c claims
			if err := json.Unmarshal([]byte(tt.json), &c); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if bool(c.EmailVerified) != tt.verified || string(c.Locale) != tt.locale {
				t.Errorf("verified %t locale %q, want %t %q", c.EmailVerified, c.Locale, tt.verified, tt.locale)
			}
		})
	}
}

func clockAtNow() *testenv.Clock {
	c := testenv.NewClock()
	c.Set(time.Now())
	return c
}
