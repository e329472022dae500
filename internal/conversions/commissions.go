package conversions

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/fraud"
	"github.com/partnerstream/partnerstream/internal/freetext"
	"github.com/partnerstream/partnerstream/internal/money"
)

// Commission statuses (declared with the events that carry them).
const (
	Pending  = events.CommissionPending
	Approved = events.CommissionApproved
	Rejected = events.CommissionRejected
	Paid     = events.CommissionPaid
	Reversed = events.CommissionReversed
)

// Statuses lists the commission statuses.
var Statuses = events.CommissionStatuses

// transitions are the only legal status changes (docs/architecture.md, "Domain states").
// approved -> paid happens only through a payout.
var transitions = map[string][]string{
	Pending:  {Approved, Rejected},
	Approved: {Paid, Reversed},
	Rejected: {},
	Paid:     {},
	Reversed: {},
}

// Allowed returns the statuses a commission in status may move to.
func Allowed(status string) []string { return slices.Clone(transitions[status]) }

// MaxReason is the longest rejection or reversal reason, in characters.
const MaxReason = 500

// Commission is what the affiliate earns for a conversion, in the program currency.
type Commission struct {
	ID           string
	ConversionID string
	ProgramID    string
	AdvertiserID string
	AffiliateID  string
	OccurredAt   time.Time // the conversion's
	Amount       int64     // minor units of Currency
	Currency     string
	RuleType     string // fixed or percent
	RuleValue    int64  // minor units, or basis points
	Status       string
	Reason       string
	HoldUntil    *time.Time // auto-approval from then on; nil: by hand only
	PayoutID     string
	Version      int64
	CreatedAt    time.Time
	UpdatedAt    time.Time
	// Exchange is the conversion's exchange snapshot (nil in the program currency).
	Exchange *Exchange
	// The companies' names, read for the export (CommissionRows); empty elsewhere.
	AdvertiserName, AffiliateName string
	// HeldAt is when a fraud rule put the commission on hold (nil: not held). A held
	// commission is not approved by the hold days and not paid until the advertiser releases
	// or rejects it.
	HeldAt *time.Time
	// Findings are the fraud rules that fired on it, shadow ones included (docs/fraud.md).
	Findings []fraud.Finding
	scanned  exchangeColumns
}

// Verdict is the commission's fraud verdict.
func (m Commission) Verdict() fraud.Verdict {
	return fraud.Verdict{Findings: m.Findings, HeldAt: m.HeldAt}
}

// TransitionError is a status change the state machine does not allow.
type TransitionError struct {
	ID       string // the conversion (or payout)
	From, To string
	Allowed  []string
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("%s is %s and cannot become %s", e.ID, e.From, e.To)
}

// ErrInPayout: an approved commission gathered in a pending payout cannot be reversed until
// the payout is canceled or fails.
var ErrInPayout = errors.New("the commission is in a pending payout")

// ErrHeld: a commission a fraud rule holds is not approved until the advertiser releases it.
var ErrHeld = errors.New("the commission is on hold: release it first")

// ErrPaidByPayout: commissions become paid only when their payout is marked paid.
var ErrPaidByPayout = errors.New("a commission becomes paid only through its payout")

// commissionAmount applies a rule to a sale amount: a fixed amount, or basis points of the
// amount rounded half up to the minor unit.
func commissionAmount(ruleType string, ruleValue, amount int64) (int64, error) {
	switch ruleType {
	case "fixed":
		return ruleValue, nil
	case "percent":
		// money.Percent computes amount*bps+5000 in int64.
		if ruleValue > 0 && amount > (math.MaxInt64-5000)/ruleValue {
			return 0, invalid("amount", "is too large")
		}
		return money.Percent(amount, ruleValue), nil
	}
	return 0, fmt.Errorf("unknown commission rule %q", ruleType)
}

const commissionColumns = `c.id, c.conversion_id, c.program_id, c.advertiser_id, c.affiliate_id, c.occurred_at,
	c.amount, c.currency, c.rule_type, c.rule_value, c.status, c.reason, c.hold_until, COALESCE(c.payout_id, ''),
	c.version, c.created_at, c.updated_at, c.original_amount, c.original_currency, trim_scale(c.exchange_rate)::text, c.rate_date,
	c.converted_amount, c.held_at, ` + fraud.VerdictColumns

func (m *Commission) targets() []any {
	return []any{&m.ID, &m.ConversionID, &m.ProgramID, &m.AdvertiserID, &m.AffiliateID, &m.OccurredAt, &m.Amount,
		&m.Currency, &m.RuleType, &m.RuleValue, &m.Status, &m.Reason, &m.HoldUntil, &m.PayoutID, &m.Version,
		&m.CreatedAt, &m.UpdatedAt, &m.scanned.amount, &m.scanned.currency, &m.scanned.rate, &m.scanned.date, &m.scanned.converted, &m.HeldAt, &m.Findings}
}

// utc normalises what targets scanned: times in UTC, the exchange snapshot or nil.
func (m *Commission) utc() {
	m.Exchange = m.scanned.exchange()
	m.scanned = exchangeColumns{}
	m.OccurredAt, m.CreatedAt, m.UpdatedAt = m.OccurredAt.UTC(), m.CreatedAt.UTC(), m.UpdatedAt.UTC()
	if m.HoldUntil != nil {
		h := m.HoldUntil.UTC()
		m.HoldUntil = &h
	}
	if m.HeldAt != nil {
		h := m.HeldAt.UTC()
		m.HeldAt = &h
	}
	for i := range m.Findings {
		m.Findings[i].DecidedAt = m.Findings[i].DecidedAt.UTC()
	}
}

// move changes a locked commission's status and writes the events, in tx.
func move(ctx context.Context, tx pgx.Tx, c *Conversion, to, reason string, now time.Time) error {
	from := c.Commission.Status
	if !slices.Contains(transitions[from], to) {
		return &TransitionError{ID: c.ID, From: from, To: to, Allowed: Allowed(from)}
	}
	if to == Reversed && c.Commission.PayoutID != "" {
		return fmt.Errorf("%w %s: cancel the payout first", ErrInPayout, c.Commission.PayoutID)
	}
	if to == Approved && c.Commission.HeldAt != nil {
		return fmt.Errorf("%w: %s", ErrHeld, c.ID)
	}
	m := &c.Commission
	// Rejecting or reversing ends a hold: the advertiser decided.
	if err := tx.QueryRow(ctx, `UPDATE commissions SET status = $2, reason = $3, version = version + 1, updated_at = $4,
		held_at = CASE WHEN $2 IN ('rejected', 'reversed') THEN NULL ELSE held_at END
		WHERE id = $1 RETURNING version, held_at`, m.ID, to, reason, now).Scan(&m.Version, &m.HeldAt); err != nil {
		return fmt.Errorf("update commission %s: %w", m.ID, err)
	}
	m.Status, m.Reason, m.UpdatedAt = to, reason, now
	return emit(ctx, tx, *c, from)
}

// lock reads and locks the commissions of the advertiser's conversions, in id order so that
// concurrent bulk requests cannot deadlock.
func lock(ctx context.Context, tx pgx.Tx, where string, args ...any) ([]Conversion, error) {
	rows, err := tx.Query(ctx, `SELECT `+conversionColumns+` FROM conversions v JOIN commissions c ON c.conversion_id = v.id
		WHERE `+where+` ORDER BY c.id FOR UPDATE OF c`, args...)
	if err != nil {
		return nil, fmt.Errorf("lock commissions: %w", err)
	}
	return collect(rows, scanConversion)
}

// ChangeStatus moves the commission of an advertiser's conversion to approved, rejected or
// reversed (reason is kept for the last two). A transition the state machine does not allow
// is a *TransitionError.
func (s *Service) ChangeStatus(ctx context.Context, advertiserID, conversionID, to, reason string) (Conversion, error) {
	if to == Paid {
		return Conversion{}, ErrPaidByPayout
	}
	if err := checkReason(reason); err != nil {
		return Conversion{}, err
	}
	var c Conversion
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		locked, err := lock(ctx, tx, `v.id = $1 AND v.advertiser_id = $2`, conversionID, advertiserID)
		if err != nil {
			return err
		}
		if len(locked) == 0 {
			return ErrNotFound
		}
		c = locked[0]
		return move(ctx, tx, &c, to, reason, s.now())
	})
	if err != nil {
		return Conversion{}, fmt.Errorf("%s conversion %s: %w", to, conversionID, err)
	}
	return c, nil
}

func checkReason(reason string) error {
	if msg := freetext.Check(reason, 0, MaxReason, true); msg != "" {
		return invalid("reason", "%s", msg)
	}
	return nil
}
