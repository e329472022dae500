package programs

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/money"
)

// Where a test conversion came from: the brand's server with an API key, or the dashboard.
const (
	TestFromAPI       = "api"
	TestFromDashboard = "dashboard"
)

// TestConversionInput is a test conversion: what a real one says about the order, without
// anyone who brought it (a new brand has no partner yet).
type TestConversionInput struct {
	ProgramID  string `json:"program_id"`
	ExternalID string `json:"external_id"`
	// Amount is the sale amount in the program's currency; "" is zero.
	Amount string `json:"amount"`
}

// TestConversion is a recorded test conversion with the commission a real one would earn. It
// is kept apart from conversions: it pays nothing and no statistic, export, payout, webhook
// or postback ever sees it.
type TestConversion struct {
	ID           string `json:"id"`
	Test         bool   `json:"test"` // always true, so that a reader never takes it for a sale
	ProgramID    string `json:"program_id"`
	AdvertiserID string `json:"advertiser_id"`
	ExternalID   string `json:"external_id"`
	Amount       string `json:"amount"`
	// Commission is what the program's rule would give an affiliate; nothing is paid.
	Commission string    `json:"commission"`
	Currency   string    `json:"currency"`
	Source     string    `json:"source"`
	CreatedAt  time.Time `json:"created_at"`
}

// Onboarding is a brand's progress through its first steps.
type Onboarding struct {
	Steps OnboardingSteps `json:"steps"`
	// Done is every step done; Dismissed is the brand's choice to hide the steps.
	Done      bool `json:"done"`
	Dismissed bool `json:"dismissed"`
	// Program is the brand's newest program, whose id the examples use; nil before one.
	Program *Program `json:"program"`
	// LastTest is the newest test conversion; nil before one.
	LastTest *TestConversion `json:"last_test"`
}

// OnboardingSteps says which steps are done. Tracking is done when a test conversion came
// from the brand's own server (an API key): that is the part of tracking the platform can
// see; TestConversion when any test conversion arrived; Partner when a program has a partner.
type OnboardingSteps struct {
	Program        bool `json:"program"`
	Tracking       bool `json:"tracking"`
	TestConversion bool `json:"test_conversion"`
	Partner        bool `json:"partner"`
}

func (a Actor) requireAdvertiser() error {
	if a.Kind != identity.Advertiser {
		return &ForbiddenError{Reason: "only advertisers have an onboarding and test conversions"}
	}
	return nil
}

// Onboarding returns the brand's onboarding.
func (s *Service) Onboarding(ctx context.Context, a Actor) (Onboarding, error) {
	if err := a.requireAdvertiser(); err != nil {
		return Onboarding{}, err
	}
	var o Onboarding
	err := s.db.QueryRow(ctx, `SELECT
		EXISTS (SELECT 1 FROM test_conversions WHERE advertiser_id = $1 AND source = 'api'),
		EXISTS (SELECT 1 FROM partnerships WHERE advertiser_id = $1),
		EXISTS (SELECT 1 FROM onboarding WHERE company_id = $1)`, a.CompanyID).
		Scan(&o.Steps.Tracking, &o.Steps.Partner, &o.Dismissed)
	if err != nil {
		return Onboarding{}, fmt.Errorf("read onboarding: %w", err)
	}
	args := pgx.NamedArgs{"company": a.CompanyID}
	if o.Program, err = maybeOne(ctx, s.db, "program", `SELECT `+programColumns+` FROM programs p WHERE p.advertiser_id = @company ORDER BY p.id DESC LIMIT 1`,
		args, scanProgram); err != nil {
		return Onboarding{}, err
	}
	if o.LastTest, err = maybeOne(ctx, s.db, "test conversion", `SELECT `+testColumns+` FROM test_conversions WHERE advertiser_id = @company ORDER BY id DESC LIMIT 1`,
		args, scanTest); err != nil {
		return Onboarding{}, err
	}
	o.Steps.Program, o.Steps.TestConversion = o.Program != nil, o.LastTest != nil
	o.Done = o.Steps.Program && o.Steps.Tracking && o.Steps.TestConversion && o.Steps.Partner
	return o, nil
}

// maybeOne is queryOne where no row is nil, not an error.
func maybeOne[T any](ctx context.Context, q querier, what, sql string, args pgx.NamedArgs, scan pgx.RowToFunc[T]) (*T, error) {
	v, err := queryOne(ctx, q, what, sql, args, scan)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &v, nil
}

// DismissOnboarding hides the brand's onboarding for good (for the whole company).
func (s *Service) DismissOnboarding(ctx context.Context, a Actor) (Onboarding, error) {
	if err := a.requireAdvertiserWriter(); err != nil {
		return Onboarding{}, err
	}
	if _, err := s.db.Exec(ctx, `INSERT INTO onboarding (company_id, dismissed_at) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
		a.CompanyID, s.now()); err != nil {
		return Onboarding{}, fmt.Errorf("dismiss onboarding: %w", err)
	}
	return s.Onboarding(ctx, a)
}

const testColumns = `id, program_id, advertiser_id, external_id, amount, commission, currency, source, created_at`

func scanTest(row pgx.CollectableRow) (TestConversion, error) {
	var (
		t                  TestConversion
		amount, commission int64
	)
	err := row.Scan(&t.ID, &t.ProgramID, &t.AdvertiserID, &t.ExternalID, &amount, &commission, &t.Currency, &t.Source, &t.CreatedAt)
	t.Test, t.CreatedAt = true, t.CreatedAt.UTC()
	if err == nil {
		t.Amount, t.Commission = money.Format(amount, t.Currency), money.Format(commission, t.Currency)
	}
	return t, err
}

// RegisterTestConversion records a test conversion of one of the brand's programs (any
// status) from source, with the commission the program's rule would give.
func (s *Service) RegisterTestConversion(ctx context.Context, a Actor, source string, in TestConversionInput) (TestConversion, error) {
	if err := a.requireAdvertiser(); err != nil {
		return TestConversion{}, err
	}
	if !a.canWrite() {
		return TestConversion{}, &ForbiddenError{Reason: "only owners and admins send test conversions"}
	}
	v := &validator{}
	v.id("program_id", ids.Program, in.ProgramID)
	v.text("external_id", in.ExternalID, 1, 255, false)
	if err := v.err(); err != nil {
		return TestConversion{}, err
	}
	prog, err := s.Program(ctx, a, in.ProgramID)
	if err != nil {
		return TestConversion{}, err
	}
	if in.Amount == "" {
		in.Amount = "0"
	}
	amount, err := money.Parse(in.Amount, prog.Currency)
	if err == nil && amount > math.MaxInt64/10000 {
		err = money.ErrAmount // a percentage of it would overflow
	}
	if err != nil {
		return TestConversion{}, &ValidationError{Fields: []FieldError{{Field: "amount", Message: "must be a decimal amount in " + prog.Currency + " with at most its decimals"}}}
	}
	commission := prog.Commission.Value
	if prog.Commission.Type == Percent {
		commission = money.Percent(amount, prog.Commission.Value)
	}
	t := TestConversion{ID: ids.New(ids.TestConversion), Test: true, ProgramID: prog.ID, AdvertiserID: a.CompanyID, ExternalID: in.ExternalID,
		Amount: money.Format(amount, prog.Currency), Commission: money.Format(commission, prog.Currency), Currency: prog.Currency,
		Source: source, CreatedAt: s.now()}
	if _, err := s.db.Exec(ctx, `INSERT INTO test_conversions (`+testColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		t.ID, t.ProgramID, t.AdvertiserID, t.ExternalID, amount, commission, t.Currency, t.Source, t.CreatedAt); err != nil {
		return TestConversion{}, fmt.Errorf("record test conversion: %w", err)
	}
	return t, nil
}
