package session

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/partnerstream/partnerstream/internal/ids"
)

// Errors of Verify, Refresh and Authenticate. The HTTP layer maps them to problems; any other
// error is a failure of the store (a 500, not a 401).
var (
	// ErrNoCredentials: the request carries neither a Bearer token nor a session cookie.
	ErrNoCredentials = errors.New("session: no credentials")
	// ErrAPIKeyNotAllowed: the request carries an API key, which the dashboard refuses.
	ErrAPIKeyNotAllowed = errors.New("session: an API key is not a dashboard session")
	// ErrInvalidToken: malformed, forged, signed with an unknown key, or unknown to the store.
	ErrInvalidToken = errors.New("session: invalid token")
	// ErrExpired: the access token or the session has expired. For an access token the client
	// refreshes; when the refresh fails too, it signs in again.
	ErrExpired = errors.New("session: expired")
	// ErrRevoked: the session was signed out (or revoked after a refresh token was reused).
	ErrRevoked = errors.New("session: revoked")
	// ErrRefreshReused: a refresh token was presented again after it had been rotated; the
	// session is now revoked. It matches ErrRevoked too.
	ErrRefreshReused = fmt.Errorf("%w: refresh token reused", ErrRevoked)
	// ErrCSRF: a cookie-authenticated request that changes state lacks the right CSRF token.
	ErrCSRF = errors.New("session: missing or wrong CSRF token")
)

// sessionPrefix is the id prefix of sessions (ids has no constant for it yet).
const sessionPrefix = "ses"

// Defaults of Options.
const (
	DefaultAccessTTL  = 15 * time.Minute
	DefaultRefreshTTL = 30 * 24 * time.Hour
)

// reuseGrace is how long a rotated refresh token still yields an access token instead of
// revoking the session: two browser tabs that refresh at the same moment send the same cookie,
// and the second must not sign the user out. The late request gets no new refresh token, so the
// browser keeps the one the first response set.
const reuseGrace = 10 * time.Second

// Bounds of the client description stored with a session: both come from request headers.
const (
	maxUserAgent = 512
	maxIP        = 64
)

// Options tune a Manager; zero values take the defaults.
type Options struct {
	// AccessTTL is the lifetime of an access token (default 15 min).
	AccessTTL time.Duration
	// RefreshTTL is the absolute lifetime of a session and its refresh tokens (default 30 days);
	// refreshing does not extend it.
	RefreshTTL time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// InsecureCookies drops the Secure attribute, for development over plain http only.
	// (Inverted so that the zero value is the safe one.)
	InsecureCookies bool
}

// Subject is who a session is for.
type Subject struct {
	UserID      string
	CompanyID   string
	CompanyKind string // advertiser or affiliate
	Role        string
	Locale      string
}

func (s Subject) validate() error {
	switch {
	case s.UserID == "":
		return errors.New("user id is empty")
	case s.CompanyID == "":
		return errors.New("company id is empty")
	case s.CompanyKind != "advertiser" && s.CompanyKind != "affiliate":
		return fmt.Errorf("company kind %q: want advertiser or affiliate", s.CompanyKind)
	case s.Role == "":
		return errors.New("role is empty")
	}
	return nil
}

// Meta describes the client that signed in, for the user's list of sessions.
type Meta struct {
	UserAgent string
	IP        string
}

// Tokens are what a client receives on sign-in and refresh. String and LogValue hide the
// secrets.
type Tokens struct {
	Access          string
	AccessExpiresAt time.Time
	// Refresh is empty when a refresh raced another one with the same token: the client keeps
	// the refresh token the other response gave it.
	Refresh          string
	CSRF             string
	SessionID        string
	SessionExpiresAt time.Time
}

func (t Tokens) String() string {
	return fmt.Sprintf("session %s (access until %s)", t.SessionID, t.AccessExpiresAt.Format(time.RFC3339))
}

func (t Tokens) LogValue() slog.Value { return slog.StringValue(t.String()) }

// Manager issues, verifies, refreshes and revokes dashboard sessions.
type Manager struct {
	store    store
	codec    codec
	now      func() time.Time
	access   time.Duration
	lifetime time.Duration
	secure   bool
}

// NewManager returns a Manager keeping sessions in the database.
func NewManager(db *pgxpool.Pool, keys Keys, opts Options) *Manager {
	if opts.AccessTTL <= 0 {
		opts.AccessTTL = DefaultAccessTTL
	}
	if opts.RefreshTTL <= 0 {
		opts.RefreshTTL = DefaultRefreshTTL
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Manager{
		store:    pgStore{db: db},
		codec:    newCodec(keys, opts.Now),
		now:      opts.Now,
		access:   opts.AccessTTL,
		lifetime: opts.RefreshTTL,
		secure:   !opts.InsecureCookies,
	}
}

// Issue starts a session for a user who has just signed in.
func (m *Manager) Issue(ctx context.Context, s Subject, meta Meta) (Tokens, error) {
	if err := s.validate(); err != nil {
		return Tokens{}, fmt.Errorf("issue session: %w", err)
	}
	now := m.now()
	refresh, hash := newRefreshToken()
	rec := record{
		ID:        ids.New(sessionPrefix),
		UserID:    s.UserID,
		CompanyID: s.CompanyID,
		Hash:      hash,
		CreatedAt: now,
		ExpiresAt: now.Add(m.lifetime),
		UserAgent: clean(meta.UserAgent, maxUserAgent),
		IP:        clean(meta.IP, maxIP),
	}
	if err := m.store.create(ctx, rec); err != nil {
		return Tokens{}, fmt.Errorf("issue session: %w", err)
	}
	return m.tokens(s, rec.ID, rec.ExpiresAt, refresh, now)
}

// Verify checks an access token and its session: the signature and claims first, then the
// session row (one primary-key lookup), so that a sign-out takes effect at once.
func (m *Manager) Verify(ctx context.Context, token string) (Claims, error) {
	c, err := m.codec.parse(token)
	if err != nil {
		return Claims{}, err
	}
	if err := m.checkSession(ctx, c); err != nil {
		return Claims{}, err
	}
	return c, nil
}

func (m *Manager) checkSession(ctx context.Context, c Claims) error {
	st, err := m.store.state(ctx, c.SessionID)
	switch {
	case errors.Is(err, errNotFound):
		return fmt.Errorf("%w: session %s does not exist", ErrInvalidToken, c.SessionID)
	case err != nil:
		return fmt.Errorf("verify session: %w", err)
	case st.UserID != c.UserID:
		return fmt.Errorf("%w: session %s belongs to another user", ErrInvalidToken, c.SessionID)
	}
	return st.live(m.now())
}

// Refresh trades a refresh token for new tokens and retires it. Presenting a retired token again
// means someone else holds a copy: the session is revoked and ErrRefreshReused returned.
//
// The new access token carries the user's current role, locale and company kind, so changes to
// them take effect within one access-token lifetime.
func (m *Manager) Refresh(ctx context.Context, refreshToken string) (Tokens, error) {
	if refreshToken == "" {
		return Tokens{}, ErrNoCredentials
	}
	hash := hashRefresh(refreshToken)
	// A second round only happens when a concurrent refresh rotated the token between our
	// lookup and our update; the token is then retired and the second round settles it.
	for range 2 {
		now := m.now()
		row, err := m.store.byRefreshHash(ctx, hash)
		switch {
		case errors.Is(err, errNotFound):
			return Tokens{}, fmt.Errorf("%w: unknown refresh token", ErrInvalidToken)
		case err != nil:
			return Tokens{}, fmt.Errorf("refresh session: %w", err)
		}
		if err := row.live(now); err != nil {
			return Tokens{}, err
		}
		if row.RetiredAt != nil {
			if now.Sub(*row.RetiredAt) <= reuseGrace {
				return m.tokens(row.Subject, row.ID, row.ExpiresAt, "", now)
			}
			if err := m.store.revoke(ctx, row.ID, now); err != nil {
				return Tokens{}, fmt.Errorf("revoke session %s after refresh token reuse: %w", row.ID, err)
			}
			return Tokens{}, fmt.Errorf("%w (session %s)", ErrRefreshReused, row.ID)
		}
		next, nextHash := newRefreshToken()
		switch err := m.store.rotate(ctx, row.ID, hash, nextHash, now); {
		case errors.Is(err, errNotFound):
			continue
		case err != nil:
			return Tokens{}, fmt.Errorf("refresh session: %w", err)
		}
		return m.tokens(row.Subject, row.ID, row.ExpiresAt, next, now)
	}
	return Tokens{}, fmt.Errorf("%w: refresh token rotated concurrently", ErrInvalidToken)
}

// Revoke ends a session (sign-out). Revoking an unknown or already revoked session is not an
// error.
func (m *Manager) Revoke(ctx context.Context, sessionID string) error {
	if err := m.store.revoke(ctx, sessionID, m.now()); err != nil {
		return fmt.Errorf("revoke session %s: %w", sessionID, err)
	}
	return nil
}

// RevokeAllForUser ends every session of a user ("sign out everywhere", or after a change of
// role that must apply at once).
func (m *Manager) RevokeAllForUser(ctx context.Context, userID string) error {
	if err := m.store.revokeUser(ctx, userID, m.now()); err != nil {
		return fmt.Errorf("revoke sessions of user %s: %w", userID, err)
	}
	return nil
}

// DeleteExpired removes the sessions that have ended, with their retired refresh tokens, and
// returns how many. Call it periodically; expired rows are refused anyway.
func (m *Manager) DeleteExpired(ctx context.Context) (int64, error) {
	n, err := m.store.deleteExpired(ctx, m.now())
	if err != nil {
		return 0, fmt.Errorf("delete expired sessions: %w", err)
	}
	return n, nil
}

// tokens signs an access token for the session; it never outlives the session.
func (m *Manager) tokens(s Subject, sessionID string, sessionExpires time.Time, refresh string, now time.Time) (Tokens, error) {
	access, accessExpires, err := m.codec.sign(s, sessionID, now, minTime(now.Add(m.access), sessionExpires))
	if err != nil {
		return Tokens{}, err
	}
	return Tokens{
		Access:           access,
		AccessExpiresAt:  accessExpires,
		Refresh:          refresh,
		CSRF:             m.CSRFToken(sessionID),
		SessionID:        sessionID,
		SessionExpiresAt: sessionExpires,
	}, nil
}

// newRefreshToken returns an opaque random token and the hash the store keeps. A fast hash is
// enough: the token has 256 bits of entropy.
func newRefreshToken() (token string, hash []byte) {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	token = base64.RawURLEncoding.EncodeToString(b)
	return token, hashRefresh(token)
}

func hashRefresh(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// clean makes a header value storable as Postgres text, which refuses NUL bytes and invalid
// UTF-8, and cuts it to at most n bytes without splitting a character.
func clean(s string, n int) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, ""), "\x00", "")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
