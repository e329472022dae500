// Package links manages tracking links: an affiliate's short public URL (`/c/{code}`) for a
// program it has an approved partnership with, optionally for one of the program's
// promotions, with its own destination on the program's site and sub1..sub5 defaults.
//
// It also answers the redirect's one question, Resolve: what does a code point at right now.
// Every change of a link is announced with pg_notify on ChangedChannel in the transaction of
// the change, so the redirect's caches on every api replica can drop it (pgstore.Listen).
package links

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/partnerstream/partnerstream/internal/freetext"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/page"
)

// ChangedChannel is the Postgres NOTIFY channel of changes the redirect caches must see. The
// payload is a link code, or "program:<prg_id>" when a program, one of its promotions or one
// of its partnerships changed (sent by the programs service): every link of that program.
const ChangedChannel = "partnerstream_link_changed"

// ProgramPayload is the ChangedChannel payload that stands for every link of a program.
func ProgramPayload(programID string) string { return "program:" + programID }

// Link statuses.
const (
	Active = "active"
	Paused = "paused"
)

// Limits of a link's fields (the tracking_links table checks the same).
const (
	MaxSubLen         = 255 // characters
	MaxDestinationLen = 2048
	// CodeLen is the length of generated codes: 12 base62 characters are 71 random bits,
	// far beyond what anyone can enumerate through the redirect.
	CodeLen = 12
)

// Link is a tracking link as the API shows it.
type Link struct {
	ID            string `json:"id"`
	Code          string `json:"code"`
	URL           string `json:"url"`
	ProgramID     string `json:"program_id"`
	PartnershipID string `json:"partnership_id"`
	AffiliateID   string `json:"affiliate_id"`
	AdvertiserID  string `json:"advertiser_id"`
	// The companies' names: the brand sees who promotes it, the affiliate whom.
	AffiliateName  string    `json:"affiliate_name"`
	AdvertiserName string    `json:"advertiser_name"`
	PromotionID    *string   `json:"promotion_id"`
	DestinationURL *string   `json:"destination_url"`
	Sub1           string    `json:"sub1"`
	Sub2           string    `json:"sub2"`
	Sub3           string    `json:"sub3"`
	Sub4           string    `json:"sub4"`
	Sub5           string    `json:"sub5"`
	Status         string    `json:"status"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
}

// NewLink is what an affiliate asks for. Empty strings mean "not given".
type NewLink struct {
	ProgramID      string
	PromotionID    string
	DestinationURL string
	Subs           [5]string
}

// Filter narrows a list.
type Filter struct {
	ProgramID string
}

// Errors the HTTP layer maps to problems.
var (
	ErrNotFound = errors.New("links: not found")
	// ErrProgramNotFound: the program does not exist.
	ErrProgramNotFound = errors.New("links: program not found")
	// ErrProgramNotActive: the program is paused or archived; no new links.
	ErrProgramNotActive = errors.New("links: program is not active")
	// ErrAffiliatesOnly: only affiliates create and switch links.
	ErrAffiliatesOnly = errors.New("links: only affiliates manage tracking links")
)

// NotApprovedError says the affiliate has no approved partnership with the program. Status
// is the partnership's status, or "none".
type NotApprovedError struct{ Status string }

func (e *NotApprovedError) Error() string {
	return "links: partnership is " + e.Status + ", not approved"
}

// FieldError is one invalid input field.
type FieldError struct{ Field, Message string }

// ValidationError lists every invalid field of a request.
type ValidationError struct{ Fields []FieldError }

func (e *ValidationError) Error() string {
	msgs := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		msgs[i] = f.Field + ": " + f.Message
	}
	return "links: invalid input: " + strings.Join(msgs, "; ")
}

// Service is the tracking-link store and its rules.
type Service struct {
	db      *pgxpool.Pool
	baseURL string
	now     func() time.Time
}

// Options configure a Service.
type Options struct {
	// BaseURL is the public URL of the api (no trailing slash); a link's URL is
	// BaseURL + "/c/" + code.
	BaseURL string
	Now     func() time.Time
}

// NewService returns the service on the pool.
func NewService(db *pgxpool.Pool, o Options) *Service {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Service{db: db, baseURL: strings.TrimRight(o.BaseURL, "/"), now: o.Now}
}

const linkColumns = `id, code, program_id, partnership_id, affiliate_id, advertiser_id, promotion_id,
	destination_url, sub1, sub2, sub3, sub4, sub5, status, created_at, updated_at,
	(SELECT name FROM companies WHERE id = affiliate_id), (SELECT name FROM companies WHERE id = advertiser_id)`

func (s *Service) scan(row pgx.Row) (Link, error) {
	var l Link
	err := row.Scan(&l.ID, &l.Code, &l.ProgramID, &l.PartnershipID, &l.AffiliateID, &l.AdvertiserID, &l.PromotionID,
		&l.DestinationURL, &l.Sub1, &l.Sub2, &l.Sub3, &l.Sub4, &l.Sub5, &l.Status, &l.CreatedAt, &l.UpdatedAt,
		&l.AffiliateName, &l.AdvertiserName)
	l.URL = s.baseURL + "/c/" + l.Code
	return l, err
}

// Create makes a link for the affiliate. The affiliate must have an approved partnership
// with an active program; a promotion must belong to that program and not have ended; a
// destination must be an http(s) URL on the program's landing host or a subdomain of it.
func (s *Service) Create(ctx context.Context, affiliateID, companyKind string, in NewLink) (Link, error) {
	if companyKind != identity.Affiliate {
		return Link{}, ErrAffiliatesOnly
	}
	if errs := checkInput(in); len(errs) > 0 {
		return Link{}, &ValidationError{Fields: errs}
	}
	var link Link
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var programStatus, landing, advertiserID string
		err := tx.QueryRow(ctx, `SELECT status, landing_url, advertiser_id FROM programs WHERE id = $1`, in.ProgramID).
			Scan(&programStatus, &landing, &advertiserID)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrProgramNotFound
		}
		if err != nil {
			return fmt.Errorf("read program: %w", err)
		}
		// FOR SHARE: a suspension committed while we insert must wait for us, then its
		// NOTIFY evicts the new link like any other.
		var partnershipID, partnershipStatus string
		err = tx.QueryRow(ctx, `SELECT id, status FROM partnerships WHERE program_id = $1 AND affiliate_id = $2 FOR SHARE`,
			in.ProgramID, affiliateID).Scan(&partnershipID, &partnershipStatus)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return &NotApprovedError{Status: "none"}
		case err != nil:
			return fmt.Errorf("read partnership: %w", err)
		case partnershipStatus != "approved":
			return &NotApprovedError{Status: partnershipStatus}
		}
		if programStatus != "active" {
			return ErrProgramNotActive
		}
		var errs []FieldError
		if in.PromotionID != "" {
			if msg, err := s.checkPromotion(ctx, tx, in.PromotionID, in.ProgramID); err != nil {
				return err
			} else if msg != "" {
				errs = append(errs, FieldError{"promotion_id", msg})
			}
		}
		if in.DestinationURL != "" {
			if msg := checkDestination(in.DestinationURL, landing); msg != "" {
				errs = append(errs, FieldError{"destination_url", msg})
			}
		}
		if len(errs) > 0 {
			return &ValidationError{Fields: errs}
		}
		link, err = s.insert(ctx, tx, in, affiliateID, advertiserID, partnershipID)
		return err
	})
	if err != nil {
		return Link{}, err
	}
	return link, nil
}

// codeAttempts bounds the retries on a code collision, which at 71 bits needs billions of
// links to happen even once; a loop that keeps colliding means a broken random source.
const codeAttempts = 5

func (s *Service) insert(ctx context.Context, tx pgx.Tx, in NewLink, affiliateID, advertiserID, partnershipID string) (Link, error) {
	for range codeAttempts {
		code, err := newCode()
		if err != nil {
			return Link{}, err
		}
		// ON CONFLICT DO NOTHING keeps the transaction usable after a collision.
		l, err := s.scan(tx.QueryRow(ctx, `
			INSERT INTO tracking_links (id, code, partnership_id, program_id, affiliate_id, advertiser_id,
				promotion_id, destination_url, sub1, sub2, sub3, sub4, sub5)
			VALUES ($1, $2, $3, $4, $5, $6, NULLIF($7, ''), NULLIF($8, ''), $9, $10, $11, $12, $13)
			ON CONFLICT (code) DO NOTHING
			RETURNING `+linkColumns,
			ids.New(ids.Link), code, partnershipID, in.ProgramID, affiliateID, advertiserID,
			in.PromotionID, in.DestinationURL, in.Subs[0], in.Subs[1], in.Subs[2], in.Subs[3], in.Subs[4]))
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return Link{}, fmt.Errorf("insert link: %w", err)
		}
		// A redirect may have cached "unknown" for this code a moment ago.
		return l, notify(ctx, tx, l.Code)
	}
	return Link{}, fmt.Errorf("insert link: %d code collisions in a row", codeAttempts)
}

func (s *Service) checkPromotion(ctx context.Context, tx pgx.Tx, promotionID, programID string) (string, error) {
	var owner string
	var endsAt *time.Time
	err := tx.QueryRow(ctx, `SELECT program_id, ends_at FROM promotions WHERE id = $1`, promotionID).Scan(&owner, &endsAt)
	switch {
	case errors.Is(err, pgx.ErrNoRows) || (err == nil && owner != programID):
		return "is not a promotion of this program", nil
	case err != nil:
		return "", fmt.Errorf("read promotion: %w", err)
	case endsAt != nil && !s.now().Before(*endsAt):
		return "has ended", nil
	}
	return "", nil
}

// List returns a page of links, newest first: an affiliate's own links, or the links of an
// advertiser's programs.
func (s *Service) List(ctx context.Context, companyID, companyKind string, f Filter, p page.Request) ([]Link, string, error) {
	owner := "affiliate_id"
	if companyKind == identity.Advertiser {
		owner = "advertiser_id"
	}
	rows, err := s.db.Query(ctx, `SELECT `+linkColumns+` FROM tracking_links
		WHERE `+owner+` = $1 AND ($2 = '' OR program_id = $2) AND ($3 = '' OR id < $3)
		ORDER BY id DESC LIMIT $4`, companyID, f.ProgramID, p.Before, p.Limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("list links: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Link, error) { return s.scan(r) })
	if err != nil {
		return nil, "", fmt.Errorf("list links: %w", err)
	}
	out, next := page.Cut(out, p.Limit, func(l Link) string { return l.ID })
	return out, next, nil
}

// SetStatus pauses (Paused) or resumes (Active) one of the affiliate's links. A paused link
// answers the friendly 404 page and records no clicks.
func (s *Service) SetStatus(ctx context.Context, affiliateID, companyKind, linkID, status string) (Link, error) {
	if companyKind != identity.Affiliate {
		return Link{}, ErrAffiliatesOnly
	}
	if status != Active && status != Paused {
		return Link{}, fmt.Errorf("links: status %q is not active or paused", status)
	}
	if !ids.Valid(ids.Link, linkID) {
		return Link{}, ErrNotFound
	}
	var link Link
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var err error
		link, err = s.scan(tx.QueryRow(ctx, `UPDATE tracking_links
			SET status = $3, updated_at = CASE WHEN status = $3 THEN updated_at ELSE now() END
			WHERE id = $1 AND affiliate_id = $2 RETURNING `+linkColumns, linkID, affiliateID, status))
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return fmt.Errorf("set link status: %w", err)
		}
		return notify(ctx, tx, link.Code)
	})
	return link, err
}

func notify(ctx context.Context, tx pgx.Tx, payload string) error {
	if _, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, ChangedChannel, payload); err != nil {
		return fmt.Errorf("notify link change: %w", err)
	}
	return nil
}

func checkInput(in NewLink) []FieldError {
	var errs []FieldError
	if !ids.Valid(ids.Program, in.ProgramID) {
		errs = append(errs, FieldError{"program_id", "must be a program id (prg_...)"})
	}
	if in.PromotionID != "" && !ids.Valid(ids.Promotion, in.PromotionID) {
		errs = append(errs, FieldError{"promotion_id", "must be a promotion id (prm_...)"})
	}
	if len(in.DestinationURL) > MaxDestinationLen {
		errs = append(errs, FieldError{"destination_url", fmt.Sprintf("must be at most %d characters", MaxDestinationLen)})
	}
	for i, v := range in.Subs {
		if msg := freetext.Check(v, 0, MaxSubLen, false); msg != "" {
			errs = append(errs, FieldError{fmt.Sprintf("sub%d", i+1), msg})
		}
	}
	return errs
}

// checkDestination returns why dest may not be a link's destination, or "". It must stay on
// the advertiser's site: the program's landing host or a subdomain of it, so an affiliate
// cannot turn the advertiser's tracking domain into an open redirect.
func checkDestination(dest, landing string) string {
	u, err := url.Parse(dest)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return "must be an absolute http(s) URL"
	}
	if u.User != nil {
		return "must not carry credentials"
	}
	l, err := url.Parse(landing)
	if err != nil || l.Hostname() == "" {
		return "cannot be checked: the program's landing URL is not a valid URL"
	}
	host, want := strings.ToLower(u.Hostname()), strings.ToLower(l.Hostname())
	if host != want && !strings.HasSuffix(host, "."+want) {
		return fmt.Sprintf("must be on %s or one of its subdomains", want)
	}
	return ""
}

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// newCode returns CodeLen uniformly random base62 characters from crypto/rand. Bytes of 248
// and above are rejected so every character is equally likely (248 = 4 * 62).
func newCode() (string, error) {
	out := make([]byte, 0, CodeLen)
	buf := make([]byte, CodeLen*2)
	for len(out) < CodeLen {
		if _, err := rand.Read(buf); err != nil {
			return "", fmt.Errorf("links: random code: %w", err)
		}
		for _, b := range buf {
			if b < 248 && len(out) < CodeLen {
				out = append(out, base62[b%62])
			}
		}
	}
	return string(out), nil
}

// ValidCode reports whether s could be a link code, so the redirect refuses garbage without a
// lookup. It accepts the table's whole range (8 to 32 characters), not only generated codes.
func ValidCode(s string) bool {
	if len(s) < 8 || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(base62, s[i]) < 0 {
			return false
		}
	}
	return true
}
