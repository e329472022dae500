package session

import (
	"errors"
	"fmt"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/partnerstream/partnerstream/internal/ids"
)

// Fixed claims of every access token: a token made for another service or audience, even with
// the same key, is refused.
const (
	Issuer   = "partnerstream"
	Audience = "partnerstream-dashboard"
)

const (
	// leeway absorbs clock skew between api replicas for exp, nbf and iat.
	leeway = 10 * time.Second
	// maxTokenLen bounds the work spent on garbage: our tokens are well under 1 KiB.
	maxTokenLen = 4096
	// signingAlg is the only algorithm accepted; pinning it is what defeats "alg: none" and
	// algorithm-confusion tokens.
	signingAlg = "HS256"
)

// Claims is what a verified access token says about its bearer.
type Claims struct {
	UserID      string
	CompanyID   string
	CompanyKind string // advertiser or affiliate
	Role        string
	Locale      string
	SessionID   string
	ExpiresAt   time.Time
}

// tokenClaims is the JWT payload.
type tokenClaims struct {
	jwt.RegisteredClaims
	CompanyID   string `json:"cid"`
	CompanyKind string `json:"ckind"`
	Role        string `json:"role"`
	SessionID   string `json:"sid"`
	Locale      string `json:"locale,omitempty"`
}

// Validate is called by the jwt parser after the signature and registered claims check out:
// a token we signed always passes, so a failure here means a bug or a forged key.
func (c *tokenClaims) Validate() error {
	if !ids.Valid(sessionPrefix, c.SessionID) {
		return errors.New("sid is not a session id")
	}
	return c.subject().validate()
}

func (c *tokenClaims) subject() Subject {
	return Subject{UserID: c.Subject, CompanyID: c.CompanyID, CompanyKind: c.CompanyKind, Role: c.Role, Locale: c.Locale}
}

// codec signs and parses access tokens with a key set.
type codec struct {
	keys   Keys
	parser *jwt.Parser
}

func newCodec(keys Keys, now func() time.Time) codec {
	return codec{keys: keys, parser: jwt.NewParser(
		jwt.WithValidMethods([]string{signingAlg}),
		jwt.WithIssuer(Issuer),
		jwt.WithAudience(Audience),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(leeway),
		jwt.WithTimeFunc(now),
		jwt.WithStrictDecoding(),
	)}
}

// sign returns an access token for the session, valid from now until exp (truncated to the
// second, the precision of JWT times).
func (c codec) sign(s Subject, sessionID string, now, exp time.Time) (string, time.Time, error) {
	k := c.keys.signing()
	claims := &tokenClaims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    Issuer,
			Subject:   s.UserID,
			Audience:  jwt.ClaimStrings{Audience},
			IssuedAt:  jwt.NewNumericDate(now),
			NotBefore: jwt.NewNumericDate(now),
			ExpiresAt: jwt.NewNumericDate(exp),
		},
		CompanyID:   s.CompanyID,
		CompanyKind: s.CompanyKind,
		Role:        s.Role,
		SessionID:   sessionID,
		Locale:      s.Locale,
	}
	t := jwt.NewWithClaims(jwt.SigningMethodHS256, claims)
	t.Header["kid"] = k.id
	signed, err := t.SignedString(k.secret)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("sign access token: %w", err)
	}
	return signed, claims.ExpiresAt.UTC(), nil
}

// parse checks the signature and the claims of an access token, without the session row.
func (c codec) parse(token string) (Claims, error) {
	if token == "" || len(token) > maxTokenLen {
		return Claims{}, fmt.Errorf("%w: empty or over %d bytes", ErrInvalidToken, maxTokenLen)
	}
	var tc tokenClaims
	if _, err := c.parser.ParseWithClaims(token, &tc, c.key); err != nil {
		if errors.Is(err, jwt.ErrTokenExpired) {
			return Claims{}, fmt.Errorf("%w: %w", ErrExpired, err)
		}
		return Claims{}, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	s := tc.subject()
	return Claims{
		UserID: s.UserID, CompanyID: s.CompanyID, CompanyKind: s.CompanyKind, Role: s.Role, Locale: s.Locale,
		SessionID: tc.SessionID, ExpiresAt: tc.ExpiresAt.UTC(),
	}, nil
}

// key finds the verification key named by the token's kid; the parser has already refused any
// algorithm but HS256, so the key is always an HMAC secret.
func (c codec) key(t *jwt.Token) (any, error) {
	kid, _ := t.Header["kid"].(string)
	if kid == "" {
		return nil, errors.New("no kid in the token header")
	}
	k, ok := c.keys.byID(kid)
	if !ok {
		return nil, fmt.Errorf("unknown kid %.64q", kid)
	}
	return k.secret, nil
}
