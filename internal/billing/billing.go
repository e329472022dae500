// Package billing turns a brand's billing events into conversions and reversals, so that a
// brand that bills through Stripe integrates without code (docs/integrations.md): a paid
// checkout or invoice registers a conversion through package conversions, a refund or a
// dispute takes its commission back. Each program has its own endpoint, named by a secret
// token, and each event is verified with the program's Stripe endpoint secret through
// Stripe's own library (stripe-go's webhook package, used here alone) before anything is
// read from it.
package billing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/partnerstream/partnerstream/internal/conversions"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/programtoken"
)

// Conversions is what billing events change; *conversions.Service is one.
type Conversions interface {
	Register(ctx context.Context, advertiserID string, in conversions.NewConversion) (conversions.Conversion, bool, error)
	Reverse(ctx context.Context, advertiserID, programID, externalID, reason string) (conversions.Conversion, bool, error)
}

// tokenPrefix starts a Stripe endpoint's token (package programtoken says the rest).
const tokenPrefix = "stp_"

// Errors. Handlers map them to problems.
var (
	// ErrNotFound: no such program of the advertiser, or no integration.
	ErrNotFound = errors.New("not found")
	// ErrInvalidToken: the endpoint token is malformed, unknown or was replaced.
	ErrInvalidToken = errors.New("the integration token is not valid")
	// ErrBadSignature: the Stripe-Signature header does not sign the body with the
	// endpoint secret (or is missing, malformed or too old).
	ErrBadSignature = errors.New("the Stripe signature does not verify")
)

// InvalidError is input that fails validation, naming the field.
type InvalidError struct{ Field, Message string }

func (e *InvalidError) Error() string { return e.Field + ": " + e.Message }

// endpointSecret is the shape of the signing secret Stripe shows for an endpoint.
var endpointSecret = regexp.MustCompile(`^whsec_[A-Za-z0-9]{1,200}$`)

// Integration is a program's Stripe endpoint, without its token or secret.
type Integration struct {
	ProgramID   string
	CreatedAt   time.Time
	LastEventAt *time.Time
}

// Options of the service.
type Options struct {
	Now func() time.Time
	Log *slog.Logger
	// Tolerance is how old a signature's timestamp may be; 0: stripe-go's default (5 min).
	Tolerance time.Duration
}

// Service keeps the integrations and receives their events.
type Service struct {
	db        *pgxpool.Pool
	conv      Conversions
	now       func() time.Time
	log       *slog.Logger
	tolerance time.Duration
}

// New returns the service.
func New(db *pgxpool.Pool, conv Conversions, o Options) *Service {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return &Service{db: db, conv: conv, now: func() time.Time { return o.Now().UTC() }, log: o.Log, tolerance: o.Tolerance}
}

// ConnectStripe makes (or replaces) the Stripe endpoint of the advertiser's program with the
// endpoint secret Stripe showed, and returns the new token of its URL: it is not stored and
// cannot be shown again. A replaced token stops working at once.
func (s *Service) ConnectStripe(ctx context.Context, advertiserID, programID, secret string) (string, error) {
	if !endpointSecret.MatchString(secret) {
		return "", &InvalidError{Field: "endpoint_secret", Message: "must be the endpoint's signing secret as Stripe shows it (whsec_...)"}
	}
	if !ids.Valid(ids.Program, programID) {
		return "", ErrNotFound
	}
	token, hash, err := programtoken.New(tokenPrefix, programID)
	if err != nil {
		return "", err
	}
	tag, err := s.db.Exec(ctx, `INSERT INTO stripe_integrations (program_id, token_hash, endpoint_secret, created_at)
		SELECT id, $3, $4, $5 FROM programs WHERE id = $1 AND advertiser_id = $2
		ON CONFLICT (program_id) DO UPDATE SET token_hash = EXCLUDED.token_hash,
			endpoint_secret = EXCLUDED.endpoint_secret, created_at = EXCLUDED.created_at`,
		programID, advertiserID, hash, secret, s.now())
	if err != nil {
		return "", fmt.Errorf("store stripe integration of %s: %w", programID, err)
	}
	if tag.RowsAffected() == 0 {
		return "", ErrNotFound
	}
	return token, nil
}

// StripeIntegration returns the Stripe endpoint of the advertiser's program, or ErrNotFound.
func (s *Service) StripeIntegration(ctx context.Context, advertiserID, programID string) (Integration, error) {
	var in Integration
	err := s.db.QueryRow(ctx, `SELECT i.program_id, i.created_at, i.last_event_at FROM stripe_integrations i
		JOIN programs p ON p.id = i.program_id WHERE i.program_id = $1 AND p.advertiser_id = $2`,
		programID, advertiserID).Scan(&in.ProgramID, &in.CreatedAt, &in.LastEventAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Integration{}, ErrNotFound
	}
	if err != nil {
		return Integration{}, fmt.Errorf("read stripe integration of %s: %w", programID, err)
	}
	in.CreatedAt = in.CreatedAt.UTC()
	if in.LastEventAt != nil {
		t := in.LastEventAt.UTC()
		in.LastEventAt = &t
	}
	return in, nil
}

// DisconnectStripe deletes the Stripe endpoint of the advertiser's program: its URL stops
// working. What its events registered stays.
func (s *Service) DisconnectStripe(ctx context.Context, advertiserID, programID string) error {
	tag, err := s.db.Exec(ctx, `DELETE FROM stripe_integrations i USING programs p
		WHERE i.program_id = $1 AND p.id = i.program_id AND p.advertiser_id = $2`, programID, advertiserID)
	if err != nil {
		return fmt.Errorf("delete stripe integration of %s: %w", programID, err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

// endpoint is a valid token's program, advertiser and signing secret.
type endpoint struct{ programID, advertiserID, secret string }

// check returns the endpoint of a valid token.
func (s *Service) check(ctx context.Context, token string) (endpoint, error) {
	programID, ok := programtoken.Program(tokenPrefix, token)
	if !ok {
		return endpoint{}, ErrInvalidToken
	}
	e := endpoint{programID: programID}
	var stored []byte
	err := s.db.QueryRow(ctx, `SELECT i.token_hash, i.endpoint_secret, p.advertiser_id FROM stripe_integrations i
		JOIN programs p ON p.id = i.program_id WHERE i.program_id = $1`, e.programID).Scan(&stored, &e.secret, &e.advertiserID)
	if errors.Is(err, pgx.ErrNoRows) {
		return endpoint{}, ErrInvalidToken
	}
	if err != nil {
		return endpoint{}, fmt.Errorf("read stripe integration of %s: %w", e.programID, err)
	}
	if !programtoken.Matches(token, stored) {
		return endpoint{}, ErrInvalidToken
	}
	return e, nil
}
