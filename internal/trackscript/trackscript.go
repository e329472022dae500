// Package trackscript is tracking without a redirect (docs/integrations.md): a program's
// tracking script settings (the origins whose pages may register clicks, the query
// parameters that carry a partner's code, first or last click), and the clicks the script
// reports with a publishable key. A click it registers is a redirect's click in all but
// its landing URL (tracking.Service.ScriptClick): the same signed id, visitor, bot flag and
// Kafka path, so duplicates, enrichment, stats and attribution treat both alike.
package trackscript

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/partnerstream/partnerstream/internal/auth"
	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/tracking"
)

// Attribution models of the script: which click a visitor who arrives twice keeps.
const (
	FirstClick = "first_click"
	LastClick  = "last_click"
)

// Limits of the settings.
const (
	MaxOrigins = 20
	MaxParams  = 5
)

// DefaultParams are the query parameters a program without settings reads.
var DefaultParams = []string{"via", "ref"}

var paramPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// Errors. Handlers map them to problems.
var (
	ErrNotFound = errors.New("not found")
	// ErrUnknownKey: not a publishable key, or revoked.
	ErrUnknownKey = errors.New("unknown or revoked publishable key")
	// ErrOriginNotAllowed: the page's origin is not one of the program's.
	ErrOriginNotAllowed = errors.New("the page's origin is not one of the program's")
	// ErrUnknownCode: no active link of the key's program has this code.
	ErrUnknownCode = errors.New("no link of the program has this code")
)

// InvalidError is input that fails validation, naming the field.
type InvalidError struct{ Field, Message string }

func (e *InvalidError) Error() string { return e.Field + ": " + e.Message }

// Settings are a program's tracking script settings.
type Settings struct {
	ProgramID string
	// Origins may register clicks: "https://shop.example", "http://127.0.0.1:8080", or
	// "https://*.shop.example" for every subdomain (not the domain itself).
	Origins []string
	Params  []string
	Model   string
	// WindowDays is the program's attribution window: the click cookie lives as long.
	WindowDays int
	UpdatedAt  *time.Time // nil: never set (the defaults)
}

// Keys finds publishable keys (*identity.Store).
type Keys interface {
	LookupPublishableKey(ctx context.Context, hash []byte) (identity.PublishableKey, error)
}

// Clicker records script clicks (*tracking.Service).
type Clicker interface {
	ScriptClick(ctx context.Context, programID string, v tracking.Visit) (events.Click, string, error)
}

// Service keeps the settings and registers the script's clicks.
type Service struct {
	db     *pgxpool.Pool
	keys   Keys
	clicks Clicker
	now    func() time.Time
}

// New returns the service.
func New(db *pgxpool.Pool, keys Keys, clicks Clicker) *Service {
	return &Service{db: db, keys: keys, clicks: clicks, now: func() time.Time { return time.Now().UTC() }}
}

// Settings returns the script settings of the advertiser's program (the defaults when none
// were set), or ErrNotFound.
func (s *Service) Settings(ctx context.Context, advertiserID, programID string) (Settings, error) {
	return s.settings(ctx, `p.id = $1 AND p.advertiser_id = $2`, programID, advertiserID)
}

func (s *Service) settings(ctx context.Context, where string, args ...any) (Settings, error) {
	st := Settings{}
	var origins, params []string
	var model *string
	err := s.db.QueryRow(ctx, `SELECT p.id, p.attribution_window_days, t.origins, t.params, t.model, t.updated_at
		FROM programs p LEFT JOIN tracking_scripts t ON t.program_id = p.id WHERE `+where, args...).
		Scan(&st.ProgramID, &st.WindowDays, &origins, &params, &model, &st.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Settings{}, ErrNotFound
	}
	if err != nil {
		return Settings{}, fmt.Errorf("read tracking script settings: %w", err)
	}
	st.Origins, st.Params, st.Model = []string{}, slices.Clone(DefaultParams), LastClick
	if model != nil {
		st.Origins, st.Params, st.Model = origins, params, *model
	}
	if st.UpdatedAt != nil {
		t := st.UpdatedAt.UTC()
		st.UpdatedAt = &t
	}
	return st, nil
}

// SetSettings replaces the script settings of the advertiser's program. Origins are
// normalised (lower case, no default port); an invalid one is an *InvalidError naming it.
func (s *Service) SetSettings(ctx context.Context, advertiserID, programID string, in Settings) (Settings, error) {
	origins := make([]string, 0, len(in.Origins))
	if len(in.Origins) > MaxOrigins {
		return Settings{}, &InvalidError{"origins", fmt.Sprintf("at most %d origins", MaxOrigins)}
	}
	for i, o := range in.Origins {
		n, err := NormalizeOrigin(o)
		if err != nil {
			return Settings{}, &InvalidError{fmt.Sprintf("origins[%d]", i), err.Error()}
		}
		if !slices.Contains(origins, n) {
			origins = append(origins, n)
		}
	}
	if len(in.Params) == 0 || len(in.Params) > MaxParams {
		return Settings{}, &InvalidError{"params", fmt.Sprintf("between 1 and %d query parameter names", MaxParams)}
	}
	for i, p := range in.Params {
		if !paramPattern.MatchString(p) {
			return Settings{}, &InvalidError{fmt.Sprintf("params[%d]", i), "a query parameter name: 1 to 32 of A-Z a-z 0-9 _ -"}
		}
	}
	if in.Model != FirstClick && in.Model != LastClick {
		return Settings{}, &InvalidError{"model", "must be first_click or last_click"}
	}
	if !ids.Valid(ids.Program, programID) {
		return Settings{}, ErrNotFound
	}
	tag, err := s.db.Exec(ctx, `INSERT INTO tracking_scripts (program_id, origins, params, model, updated_at)
		SELECT id, $3, $4, $5, $6 FROM programs WHERE id = $1 AND advertiser_id = $2
		ON CONFLICT (program_id) DO UPDATE SET origins = EXCLUDED.origins, params = EXCLUDED.params,
			model = EXCLUDED.model, updated_at = EXCLUDED.updated_at`,
		programID, advertiserID, origins, in.Params, in.Model, s.now())
	if err != nil {
		return Settings{}, fmt.Errorf("store tracking script settings of %s: %w", programID, err)
	}
	if tag.RowsAffected() == 0 {
		return Settings{}, ErrNotFound
	}
	return s.Settings(ctx, advertiserID, programID)
}

// NormalizeOrigin checks an origin setting and returns its canonical form.
func NormalizeOrigin(o string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(o))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || len(o) > 255 {
		return "", errors.New("an origin: http(s)://host[:port], without a path (https://*.host for every subdomain)")
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		port = ""
	}
	check := strings.TrimPrefix(host, "*.")
	if check == "" || strings.Contains(check, "*") {
		return "", errors.New("a wildcard may only be the first label: https://*.shop.example")
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	return u.Scheme + "://" + host, nil
}

// Allowed reports whether a page's Origin header is one the settings allow.
func (st Settings) Allowed(origin string) bool {
	o, err := NormalizeOrigin(origin)
	if err != nil || strings.Contains(o, "*") {
		return false
	}
	for _, a := range st.Origins {
		if a == o {
			return true
		}
		// https://*.shop.example allows https://a.shop.example[:port], not shop.example.
		if scheme, suffix, ok := strings.Cut(a, "://*."); ok && strings.HasPrefix(o, scheme+"://") {
			host := strings.TrimPrefix(o, scheme+"://")
			if strings.HasSuffix(host, "."+suffix) {
				return true
			}
		}
	}
	return false
}

// ForKey returns the settings of a publishable key's program (what the script is configured
// with), or ErrUnknownKey.
func (s *Service) ForKey(ctx context.Context, key string) (Settings, error) {
	_, st, err := s.forKey(ctx, key)
	return st, err
}

// forKey is ForKey with the key's record.
func (s *Service) forKey(ctx context.Context, key string) (identity.PublishableKey, Settings, error) {
	k, err := s.lookup(ctx, key)
	if err != nil {
		return k, Settings{}, err
	}
	st, err := s.settings(ctx, `p.id = $1`, k.ProgramID)
	return k, st, err
}

func (s *Service) lookup(ctx context.Context, key string) (identity.PublishableKey, error) {
	key, err := auth.ParsePublishableKey(key)
	if err != nil {
		return identity.PublishableKey{}, ErrUnknownKey
	}
	k, err := s.keys.LookupPublishableKey(ctx, auth.HashKey(key))
	if errors.Is(err, auth.ErrUnknownKey) {
		return identity.PublishableKey{}, ErrUnknownKey
	}
	if err != nil {
		return identity.PublishableKey{}, err
	}
	return k, nil
}

// Click is a registered script click.
type Click struct {
	ClickID string
	// VisitorID is a new visitor id for the page to keep ("" when it sent a valid one).
	VisitorID string
	// Origin is the page's origin, which the answer may be shared with.
	Origin string
}

// Click registers the click a page of origin reported with a publishable key: the key
// must be valid (ErrUnknownKey), the origin one of its program's (ErrOriginNotAllowed) and
// the code a link of its program (ErrUnknownCode). admit, if set, is asked with the key's
// id once the key and the origin are known to be good, before the code is looked up or
// anything recorded; its error (a spent budget) is returned as it is.
func (s *Service) Click(ctx context.Context, key, origin string, v tracking.Visit, admit func(keyID string) error) (Click, error) {
	k, st, err := s.forKey(ctx, key)
	if err != nil {
		return Click{}, err
	}
	if !st.Allowed(origin) {
		return Click{}, ErrOriginNotAllowed
	}
	if admit != nil {
		if err := admit(k.KeyID); err != nil {
			return Click{}, err
		}
	}
	c, visitor, err := s.clicks.ScriptClick(ctx, st.ProgramID, v)
	if errors.Is(err, tracking.ErrUnknownLink) {
		return Click{}, ErrUnknownCode
	}
	if err != nil {
		return Click{}, fmt.Errorf("script click: %w", err)
	}
	return Click{ClickID: c.ClickID, VisitorID: visitor, Origin: origin}, nil
}
