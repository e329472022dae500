package oidclogin

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

const (
	// discoveryTimeout bounds fetching a discovery document within a user's request.
	discoveryTimeout = 10 * time.Second
	// rediscoverAfter is how long a failed discovery is answered from memory: while a provider
	// is down, logins fail at once instead of each waiting for the same timeout.
	rediscoverAfter = 10 * time.Second
)

// provider is one configured identity provider, discovered on first use.
type provider struct {
	cfg    ProviderConfig
	client *http.Client
	now    func() time.Time

	mu       sync.Mutex
	ready    *endpoints // nil until discovery succeeds; kept from then on
	failure  error
	failedAt time.Time
}

// endpoints is what discovery yields: the OAuth 2 client and the ID token verifier, whose key
// set fetches and caches the provider's JWKS.
type endpoints struct {
	oauth    *oauth2.Config
	verifier *oidc.IDTokenVerifier
}

// endpoints discovers the provider on first use, and again after a failure once
// rediscoverAfter has passed.
func (p *provider) endpoints(ctx context.Context) (*endpoints, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ready != nil {
		return p.ready, nil
	}
	if p.failure != nil && p.now().Sub(p.failedAt) < rediscoverAfter {
		return nil, p.failure
	}
	ep, err := p.discover(ctx)
	if err != nil {
		err = fmt.Errorf("%w: %s: discovery of %s: %w", ErrProviderUnavailable, p.cfg.Name, p.cfg.Issuer, err)
		// A request that gave up says nothing about the provider.
		if ctx.Err() == nil {
			p.failure, p.failedAt = err, p.now()
		}
		return nil, err
	}
	p.ready, p.failure = ep, nil
	return ep, nil
}

func (p *provider) discover(ctx context.Context) (*endpoints, error) {
	ctx, cancel := context.WithTimeout(p.context(ctx), discoveryTimeout)
	defer cancel()
	// NewProvider checks that the document names the issuer we asked for, and keeps our HTTP
	// client for its JWKS fetches.
	op, err := oidc.NewProvider(ctx, p.cfg.Issuer)
	if err != nil {
		return nil, err
	}
	endpoint := op.Endpoint()
	endpoint.AuthStyle = authStyle(op)
	return &endpoints{
		oauth: &oauth2.Config{
			ClientID: p.cfg.ClientID, ClientSecret: p.cfg.ClientSecret,
			Endpoint: endpoint, RedirectURL: p.cfg.RedirectURL, Scopes: p.cfg.Scopes,
		},
		verifier: op.Verifier(&oidc.Config{ClientID: p.cfg.ClientID, Now: p.now}),
	}, nil
}

// context carries our HTTP client to go-oidc and oauth2, which take it from the context.
func (p *provider) context(ctx context.Context) context.Context {
	return oidc.ClientContext(ctx, p.client)
}

// authStyle sends the client secret the way the provider advertises. Google takes it in the
// Basic header; LinkedIn documents it in the form body. Without an advertisement oauth2
// guesses: the header first, then the form body if the header was refused.
func authStyle(op *oidc.Provider) oauth2.AuthStyle {
	var meta struct {
		Methods []string `json:"token_endpoint_auth_methods_supported"`
	}
	_ = op.Claims(&meta) // a document without the field leaves Methods empty
	switch {
	case slices.Contains(meta.Methods, "client_secret_basic"):
		return oauth2.AuthStyleInHeader
	case slices.Contains(meta.Methods, "client_secret_post"):
		return oauth2.AuthStyleInParams
	}
	return oauth2.AuthStyleAutoDetect
}
