// Package postbacks keeps each company's postback settings in Postgres: the URL that receives
// a signed POST for every commission status change, and the company-level secret that signs
// it (the same whsec_ format and rotation rules as a webhook's, internal/webhooks/signing).
//
// A secret is handed out exactly once: when the first URL creates it, or when it is rotated.
// It is stored as it is, not hashed, because the delivery workers need it to sign.
package postbacks

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/partnerstream/partnerstream/internal/webhooks/signing"
)

// Grace periods of a rotation: how long the previous secret keeps signing.
const (
	DefaultGrace = 24 * time.Hour
	MaxGrace     = 7 * 24 * time.Hour
)

// MaxURLLength is the longest postback URL, in characters.
const MaxURLLength = 2048

// Settings are a company's postback settings as the API shows them; never the secrets.
type Settings struct {
	// URL receives the postbacks; nil when none is set (nothing is sent).
	URL *string `json:"url"`
	// SecretCreatedAt is when the current secret was made (the first URL or the last
	// rotation); nil before the first URL.
	SecretCreatedAt *time.Time `json:"secret_created_at"`
	// PreviousSecretExpiresAt is when the secret replaced by the last rotation stops
	// signing; nil when it no longer signs.
	PreviousSecretExpiresAt *time.Time `json:"previous_secret_expires_at"`
	UpdatedAt               *time.Time `json:"updated_at"`
}

// ErrNotConfigured is returned when the company has no postback settings (no URL was ever set)
// for a rotation, or no URL to deliver to for SigningKeys.
var ErrNotConfigured = errors.New("the company has no postback URL")

// ValidationError is a refused input. Field names the API's JSON field.
type ValidationError struct {
	Field   string
	Message string
}

func (e *ValidationError) Error() string {
	return "invalid postback settings: " + e.Field + ": " + e.Message
}

// Options configure a Service.
type Options struct {
	// Now is the clock of creation, rotation and expiry times; time.Now when nil.
	Now func() time.Time
}

// Service stores postback settings in the company_postbacks table.
type Service struct {
	db  *pgxpool.Pool
	now func() time.Time
}

// NewService returns a Service on the pool.
func NewService(db *pgxpool.Pool, o Options) *Service {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Service{db: db, now: o.Now}
}

// row is a company_postbacks row without its secrets.
type row struct {
	url               *string
	secretCreatedAt   time.Time
	previousExpiresAt *time.Time
	updatedAt         time.Time
}

const rowColumns = `url, secret_created_at, previous_expires_at, updated_at`

func (r *row) scanArgs() []any {
	return []any{&r.url, &r.secretCreatedAt, &r.previousExpiresAt, &r.updatedAt}
}

// settings shows the row at now: a previous secret whose grace period has ended is gone.
func (r row) settings(now time.Time) Settings {
	created, updated := r.secretCreatedAt.UTC(), r.updatedAt.UTC()
	s := Settings{URL: r.url, SecretCreatedAt: &created, UpdatedAt: &updated}
	if r.previousExpiresAt != nil && now.Before(*r.previousExpiresAt) {
		exp := r.previousExpiresAt.UTC()
		s.PreviousSecretExpiresAt = &exp
	}
	return s
}

// Get returns the company's settings; zero Settings when it never set a URL.
func (s *Service) Get(ctx context.Context, companyID string) (Settings, error) {
	var r row
	err := s.db.QueryRow(ctx, `SELECT `+rowColumns+` FROM company_postbacks WHERE company_id = $1`, companyID).Scan(r.scanArgs()...)
	if errors.Is(err, pgx.ErrNoRows) {
		return Settings{}, nil
	}
	if err != nil {
		return Settings{}, fmt.Errorf("get postback settings of %s: %w", companyID, err)
	}
	return r.settings(s.now()), nil
}

// SetURL sets the company's postback URL, or removes it when rawURL is nil (postbacks stop;
// the secret is kept). The first URL creates the signing secret, which is returned this once;
// otherwise the returned secret is empty.
func (s *Service) SetURL(ctx context.Context, companyID string, rawURL *string) (Settings, string, error) {
	now := s.now()
	var r row
	if rawURL == nil {
		err := s.db.QueryRow(ctx, `UPDATE company_postbacks SET url = NULL, updated_at = $2 WHERE company_id = $1 RETURNING `+rowColumns,
			companyID, now).Scan(r.scanArgs()...)
		if errors.Is(err, pgx.ErrNoRows) {
			return Settings{}, "", nil // nothing was set, nothing to remove
		}
		if err != nil {
			return Settings{}, "", fmt.Errorf("remove postback URL of %s: %w", companyID, err)
		}
		return r.settings(now), "", nil
	}
	if err := checkURL(*rawURL); err != nil {
		return Settings{}, "", err
	}
	// Offer a fresh secret; it is kept only if the company had none, so the stored secret
	// being the offered one says that this call created it.
	offered := signing.NewSecret()
	var stored string
	err := s.db.QueryRow(ctx, `
INSERT INTO company_postbacks (company_id, url, secret, secret_created_at, created_at, updated_at)
VALUES ($1, $2, $3, $4, $4, $4)
ON CONFLICT (company_id) DO UPDATE SET url = EXCLUDED.url, updated_at = EXCLUDED.updated_at
RETURNING secret, `+rowColumns, companyID, *rawURL, offered, now).Scan(append([]any{&stored}, r.scanArgs()...)...)
	if err != nil {
		return Settings{}, "", fmt.Errorf("set postback URL of %s: %w", companyID, err)
	}
	if subtle.ConstantTimeCompare([]byte(stored), []byte(offered)) != 1 {
		offered = ""
	}
	return r.settings(now), offered, nil
}

// RotateSecret replaces the company's signing secret and returns the new one, shown this
// once. The old secret keeps signing for grace (0 to MaxGrace; 0 for a leaked secret); an
// older previous secret stops at once. ErrNotConfigured when no URL was ever set.
func (s *Service) RotateSecret(ctx context.Context, companyID string, grace time.Duration) (Settings, string, error) {
	if grace < 0 || grace > MaxGrace {
		return Settings{}, "", &ValidationError{Field: "grace_period_seconds", Message: "must be between 0 and 604800 (7 days)"}
	}
	now := s.now()
	var (
		r    row
		next signing.Keys
	)
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var current string
		err := tx.QueryRow(ctx, `SELECT secret FROM company_postbacks WHERE company_id = $1 FOR UPDATE`, companyID).Scan(&current)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotConfigured
		}
		if err != nil {
			return err
		}
		next = signing.Keys{Current: current}.Rotate(now, grace)
		var previous, expires any // NULL without a previous secret
		if next.Previous != "" {
			previous, expires = next.Previous, next.PreviousExpiresAt
		}
		return tx.QueryRow(ctx, `
UPDATE company_postbacks
SET secret = $2, secret_created_at = $3, previous_secret = $4, previous_expires_at = $5, updated_at = $3
WHERE company_id = $1
RETURNING `+rowColumns, companyID, next.Current, now, previous, expires).Scan(r.scanArgs()...)
	})
	if errors.Is(err, ErrNotConfigured) {
		return Settings{}, "", err
	}
	if err != nil {
		return Settings{}, "", fmt.Errorf("rotate postback secret of %s: %w", companyID, err)
	}
	return r.settings(now), next.Current, nil
}

// SigningKeys returns where the company's postbacks go and the keys that sign them: the
// current key first, then the previous one while now is before its expiry. It returns
// ErrNotConfigured when the company has no postback URL (nothing to deliver).
func (s *Service) SigningKeys(ctx context.Context, companyID string, now time.Time) (string, []signing.HMACKey, error) {
	var (
		u        *string
		k        signing.Keys
		previous *string
		expires  *time.Time
	)
	err := s.db.QueryRow(ctx, `SELECT url, secret, previous_secret, previous_expires_at FROM company_postbacks WHERE company_id = $1`,
		companyID).Scan(&u, &k.Current, &previous, &expires)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && u == nil) {
		return "", nil, ErrNotConfigured
	}
	if err != nil {
		return "", nil, fmt.Errorf("postback signing keys of %s: %w", companyID, err)
	}
	if previous != nil && expires != nil {
		k.Previous, k.PreviousExpiresAt = *previous, *expires
	}
	keys, err := k.HMACKeys()
	if err != nil {
		return "", nil, fmt.Errorf("postback secret of %s: %w", companyID, err)
	}
	return *u, signing.Live(keys, now), nil
}

// PruneExpired forgets the previous secrets whose grace period has ended, so the database
// keeps no secret that no longer signs. It returns how many it removed.
func (s *Service) PruneExpired(ctx context.Context) (int64, error) {
	tag, err := s.db.Exec(ctx, `UPDATE company_postbacks SET previous_secret = NULL, previous_expires_at = NULL
WHERE previous_expires_at <= $1`, s.now())
	if err != nil {
		return 0, fmt.Errorf("prune expired postback secrets: %w", err)
	}
	return tag.RowsAffected(), nil
}

// checkURL applies the rule of the Webhook resource's spec.url to a postback URL, which may
// also hold placeholders (ExpandURL): at most
// 2048 characters, absolute with a host, no credentials, no spaces or control characters, a port (if any)
// from 1 to 65535, https:// — or http:// only to a loopback host (localhost, 127.0.0.1,
// [::1]) for local development. The delivery workers still check the
// resolved address when they connect (SSRF guard).
func checkURL(raw string) error {
	invalid := func(msg string) error { return &ValidationError{Field: "url", Message: msg} }
	if utf8.RuneCountInString(raw) > MaxURLLength {
		return invalid("url must be at most 2048 characters")
	}
	u, err := url.ParseRequestURI(raw)
	if err != nil || u.Hostname() == "" {
		return invalid("url must be an absolute URL with a host")
	}
	if strings.IndexFunc(raw, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return invalid("url must not contain spaces or control characters (percent-encode them)")
	}
	if err := checkPlaceholders(u, raw); err != nil {
		return err
	}
	if u.User != nil {
		return invalid("url must not contain credentials (user:password@); deliveries are signed instead")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return invalid("url must have a port from 1 to 65535")
		}
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && loopbackHosts[u.Hostname()]:
	default:
		return invalid("url must use https:// (http:// is allowed only for localhost, 127.0.0.1 and [::1])")
	}
	return nil
}

var loopbackHosts = map[string]bool{"localhost": true, "127.0.0.1": true, "::1": true}
