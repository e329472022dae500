package testenv

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// OIDCTokenLifetime is how long the ID tokens of an OIDCProvider are valid.
const OIDCTokenLifetime = 5 * time.Minute

// Client authentication methods at the token endpoint (OpenID Connect Core 9).
const (
	ClientSecretBasic = "client_secret_basic"
	ClientSecretPost  = "client_secret_post"
)

// Provider is a real OpenID Connect provider on loopback, standing in for Google or LinkedIn
// in tests: discovery, JWKS, an authorization endpoint without UI (it approves at once) and a
// token endpoint that checks the client, the code and its PKCE verifier. Knobs make it issue
// the bad tokens a relying party must refuse.
type Provider struct {
	issuer       string
	clientID     string
	clientSecret string
	authMethods  []string
	now          func() time.Time
	key          *rsa.PrivateKey
	keyID        string // RFC 7638 thumbprint of key

	mu            sync.Mutex
	user          OIDCUser
	faults        TokenFaults
	grants        map[string]grant // by authorization code
	discoveryDown bool
}

// OIDCUser is who logs in. EmailVerified and Locale are JSON values as the provider sends
// them: Google sends email_verified as a bool, LinkedIn may send the string "true"; nil leaves
// the claim out.
type OIDCUser struct {
	Subject       string
	Email         string
	EmailVerified any
	Name          string
	Locale        any
}

// TokenFaults spoil the next ID token the provider issues.
type TokenFaults struct {
	ForeignKey    bool // signed by a key the JWKS does not publish, under the published key id
	WrongAudience bool
	WrongIssuer   bool
	Expired       bool
	WrongNonce    bool
	NoNonce       bool
}

// grant is what an authorization code stands for.
type grant struct {
	clientID, redirectURI, nonce, challenge string
	user                                    OIDCUser
}

// OIDCOption configures an OIDCProvider.
type OIDCOption func(*Provider)

// OIDCClient sets the only client the provider knows (default "test-client", "test-secret").
func OIDCClient(id, secret string) OIDCOption {
	return func(p *Provider) { p.clientID, p.clientSecret = id, secret }
}

// OIDCIssuerPath serves the provider under a path, as LinkedIn's issuer
// https://www.linkedin.com/oauth is.
func OIDCIssuerPath(path string) OIDCOption {
	return func(p *Provider) { p.issuer += "/" + strings.Trim(path, "/") }
}

// OIDCTokenAuthMethods sets the client authentication methods the token endpoint accepts and
// advertises (default both; LinkedIn accepts only client_secret_post).
func OIDCTokenAuthMethods(methods ...string) OIDCOption {
	return func(p *Provider) { p.authMethods = methods }
}

// OIDCClock sets the clock of the tokens' iat and exp (default time.Now).
func OIDCClock(now func() time.Time) OIDCOption {
	return func(p *Provider) { p.now = now }
}

// OIDCProvider starts an OpenID Connect provider on 127.0.0.1 for this test. It needs no
// external service, so it never skips.
func OIDCProvider(t testing.TB, opts ...OIDCOption) *Provider {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatalf("testenv: oidc: generate key: %v", err)
	}
	thumbprint, err := (&jose.JSONWebKey{Key: &key.PublicKey}).Thumbprint(crypto.SHA256)
	if err != nil {
		t.Fatalf("testenv: oidc: key thumbprint: %v", err)
	}
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	p := &Provider{
		issuer:       srv.URL,
		clientID:     "test-client",
		clientSecret: "test-secret",
		authMethods:  []string{ClientSecretBasic, ClientSecretPost},
		now:          time.Now,
		key:          key,
		keyID:        base64.RawURLEncoding.EncodeToString(thumbprint),
		user: OIDCUser{
			Subject: "user-1", Email: "Ada.Lovelace@Example.com", EmailVerified: true,
			Name: "Ada Lovelace", Locale: "en",
		},
		grants: map[string]grant{},
	}
	for _, opt := range opts {
		opt(p)
	}
	base := strings.TrimPrefix(p.issuer, srv.URL)
	mux.HandleFunc("GET "+base+"/.well-known/openid-configuration", p.discovery)
	mux.HandleFunc("GET "+base+"/jwks", p.jwks)
	mux.HandleFunc("GET "+base+"/authorize", p.authorize)
	mux.HandleFunc("POST "+base+"/token", p.token)
	return p
}

// Issuer is the provider's issuer URL, the base of its discovery document.
func (p *Provider) Issuer() string { return p.issuer }

// ClientID is the client the provider knows.
func (p *Provider) ClientID() string { return p.clientID }

// ClientSecret is that client's secret.
func (p *Provider) ClientSecret() string { return p.clientSecret }

// SetUser sets who logs in at the following authorizations.
func (p *Provider) SetUser(u OIDCUser) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.user = u
}

// SetNextToken spoils the next ID token issued; the ones after it are sound again.
func (p *Provider) SetNextToken(f TokenFaults) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = f
}

// SetDiscoveryDown makes the discovery document answer 503, as an unreachable provider would.
func (p *Provider) SetDiscoveryDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.discoveryDown = down
}

func (p *Provider) discovery(w http.ResponseWriter, _ *http.Request) {
	p.mu.Lock()
	down := p.discoveryDown
	p.mu.Unlock()
	if down {
		http.Error(w, "discovery is down", http.StatusServiceUnavailable)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"issuer":                                p.issuer,
		"authorization_endpoint":                p.issuer + "/authorize",
		"token_endpoint":                        p.issuer + "/token",
		"jwks_uri":                              p.issuer + "/jwks",
		"response_types_supported":              []string{"code"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"RS256"},
		"scopes_supported":                      []string{"openid", "email", "profile"},
		"code_challenge_methods_supported":      []string{"S256"},
		"token_endpoint_auth_methods_supported": p.authMethods,
	})
}

func (p *Provider) jwks(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{
		Key: &p.key.PublicKey, KeyID: p.keyID, Algorithm: string(jose.RS256), Use: "sig",
	}}})
}

// authorize approves at once: there is no user to ask. Errors the client could not have
// caused by itself go back to its redirect URI, as RFC 6749 4.1.2.1 says.
func (p *Provider) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	redirect, err := url.Parse(q.Get("redirect_uri"))
	if q.Get("client_id") != p.clientID || err != nil || !redirect.IsAbs() {
		http.Error(w, "unknown client or bad redirect_uri", http.StatusBadRequest)
		return
	}
	back := redirect.Query()
	back.Set("state", q.Get("state"))
	switch {
	case q.Get("response_type") != "code":
		back.Set("error", "unsupported_response_type")
	case !slices.Contains(strings.Fields(q.Get("scope")), "openid"):
		back.Set("error", "invalid_scope")
		back.Set("error_description", "scope must include openid")
	case q.Get("code_challenge") == "" || q.Get("code_challenge_method") != "S256":
		back.Set("error", "invalid_request")
		back.Set("error_description", "PKCE with code_challenge_method=S256 is required")
	default:
		code := randomString()
		p.mu.Lock()
		p.grants[code] = grant{
			clientID: p.clientID, redirectURI: redirect.String(), nonce: q.Get("nonce"),
			challenge: q.Get("code_challenge"), user: p.user,
		}
		p.mu.Unlock()
		back.Set("code", code)
	}
	redirect.RawQuery = back.Encode()
	http.Redirect(w, r, redirect.String(), http.StatusFound)
}

func (p *Provider) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		tokenError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	if !p.authenticateClient(r) {
		tokenError(w, http.StatusUnauthorized, "invalid_client", "client authentication failed")
		return
	}
	if r.PostForm.Get("grant_type") != "authorization_code" {
		tokenError(w, http.StatusBadRequest, "unsupported_grant_type", "")
		return
	}
	p.mu.Lock()
	g, ok := p.grants[r.PostForm.Get("code")]
	delete(p.grants, r.PostForm.Get("code")) // a code works once, even when the attempt fails
	faults := p.faults
	p.faults = TokenFaults{}
	p.mu.Unlock()
	switch {
	case !ok:
		tokenError(w, http.StatusBadRequest, "invalid_grant", "unknown or used code")
		return
	case r.PostForm.Get("redirect_uri") != g.redirectURI:
		tokenError(w, http.StatusBadRequest, "invalid_grant", "redirect_uri differs from the authorization request's")
		return
	case !pkceMatches(r.PostForm.Get("code_verifier"), g.challenge):
		tokenError(w, http.StatusBadRequest, "invalid_grant", "code_verifier does not match the code_challenge")
		return
	}
	idToken, err := p.idToken(g, faults)
	if err != nil {
		tokenError(w, http.StatusInternalServerError, "server_error", err.Error())
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token": randomString(),
		"token_type":   "Bearer",
		"expires_in":   int(OIDCTokenLifetime.Seconds()),
		"id_token":     idToken,
	})
}

// authenticateClient accepts the client's credentials in the methods the provider advertises.
// oauth2 clients form-encode them inside the Basic header (RFC 6749 2.3.1).
func (p *Provider) authenticateClient(r *http.Request) bool {
	id, secret, basic := r.BasicAuth()
	method := ClientSecretBasic
	if basic {
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	} else {
		method = ClientSecretPost
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	return slices.Contains(p.authMethods, method) && sameString(id, p.clientID) && sameString(secret, p.clientSecret)
}

func pkceMatches(verifier, challenge string) bool {
	sum := sha256.Sum256([]byte(verifier))
	return verifier != "" && sameString(base64.RawURLEncoding.EncodeToString(sum[:]), challenge)
}

func (p *Provider) idToken(g grant, f TokenFaults) (string, error) {
	now := p.now()
	claims := map[string]any{
		"iss": p.issuer, "sub": g.user.Subject, "aud": g.clientID,
		"iat": now.Unix(), "exp": now.Add(OIDCTokenLifetime).Unix(),
		"nonce": g.nonce, "email": g.user.Email, "name": g.user.Name,
	}
	if g.user.EmailVerified != nil {
		claims["email_verified"] = g.user.EmailVerified
	}
	if g.user.Locale != nil {
		claims["locale"] = g.user.Locale
	}
	key := p.key
	if f.ForeignKey {
		key = foreignKey()
	}
	if f.WrongAudience {
		claims["aud"] = "someone-else"
	}
	if f.WrongIssuer {
		claims["iss"] = "https://issuer.invalid"
	}
	if f.Expired {
		claims["iat"], claims["exp"] = now.Add(-2*OIDCTokenLifetime).Unix(), now.Add(-OIDCTokenLifetime).Unix()
	}
	if f.WrongNonce {
		claims["nonce"] = "not-the-nonce-you-sent"
	}
	if f.NoNonce {
		delete(claims, "nonce")
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	signer, err := jose.NewSigner(
		jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: key, KeyID: p.keyID}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return "", err
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		return "", err
	}
	return jws.CompactSerialize()
}

// foreignKey is a key no provider publishes, made once: RSA generation is slow.
var foreignKey = sync.OnceValue(func() *rsa.PrivateKey {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return key
})

// FollowAuthorize plays the browser at the provider: it GETs the authorization URL without
// following the redirect and returns where the provider sends the browser back, the relying
// party's callback with code and state (or error) in its query.
func FollowAuthorize(t testing.TB, authURL string) *url.URL {
	t.Helper()
	client := &http.Client{
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	resp, err := client.Get(authURL)
	if err != nil {
		t.Fatalf("testenv: oidc: authorize: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		t.Fatalf("testenv: oidc: authorize answered %s, want a redirect: %s", resp.Status, body)
	}
	loc, err := resp.Location()
	if err != nil {
		t.Fatalf("testenv: oidc: authorize redirect: %v", err)
	}
	return loc
}

func tokenError(w http.ResponseWriter, status int, code, description string) {
	writeJSON(w, status, map[string]string{"error": code, "error_description": description})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func randomString() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func sameString(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
