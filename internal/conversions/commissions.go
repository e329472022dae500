package conversions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/freetext"
	"github.com/partnerstream/partnerstream/internal/money"
	"github.com/partnerstream/partnerstream/internal/outbox"
	"github.com/partnerstream/partnerstream/internal/page"
	"github.com/partnerstream/partnerstream/internal/run"
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

// MaxBulk is the most conversions one bulk approval or rejection takes.
const MaxBulk = 100

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
	scanned  exchangeColumns
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

// ErrPaidByPayout: commissions become paid only when their payout is marked paid.
var ErrPaidByPayout = errors.New("a commission becomes paid only through its payout")

// Failure is why one conversion of a bulk approval or rejection could not change.
type Failure struct {
	ID      string
	Code    string // not_found or invalid_transition
	Status  string // the current status, when found
	Allowed []string
}

// BulkError lists every conversion of a bulk request that failed; nothing was changed.
type BulkError struct {
	To       string // the status asked for: approved or rejected
	Failures []Failure
}

func (e *BulkError) Error() string {
	return fmt.Sprintf("%d of the conversions cannot change; nothing was changed", len(e.Failures))
}

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
	c.converted_amount`

func (m *Commission) targets() []any {
	return []any{&m.ID, &m.ConversionID, &m.ProgramID, &m.AdvertiserID, &m.AffiliateID, &m.OccurredAt, &m.Amount,
		&m.Currency, &m.RuleType, &m.RuleValue, &m.Status, &m.Reason, &m.HoldUntil, &m.PayoutID, &m.Version,
		&m.CreatedAt, &m.UpdatedAt, &m.scanned.amount, &m.scanned.currency, &m.scanned.rate, &m.scanned.date, &m.scanned.converted}
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
}

// statusEvents are the conversion.* events of a commission status, beside the
// commission.status_changed every change emits.
var statusEvents = map[string]string{
	Pending:  events.ConversionCreated,
	Approved: events.ConversionApproved,
	Rejected: events.ConversionRejected,
}

// emit writes the events of c's commission reaching its current status from previous (""
// for a new conversion) into the outbox, in the caller's transaction, keyed by the
// conversion id so that one conversion's events stay in order.
func emit(ctx context.Context, tx pgx.Tx, c Conversion, previous string) error {
	m := c.Commission
	d := events.ConversionData{
		ID: c.ID, Type: c.Type, Amount: money.Format(c.Amount, c.Currency), Status: m.Status, PreviousStatus: previous,
		Currency: c.Currency, CommissionID: m.ID, CommissionAmount: money.Format(m.Amount, m.Currency),
		ProgramID: c.ProgramID, AffiliateID: c.AffiliateID, AdvertiserID: c.AdvertiserID, LinkID: c.LinkID,
		ClickID: c.ClickID, ExternalID: c.ExternalID, OccurredAt: c.OccurredAt, Version: m.Version,
		Attribution: c.Attribution, CouponCode: c.CouponCode, CustomerID: c.CustomerID,
	}
	if e := c.Exchange; e != nil {
		d.OriginalAmount, d.OriginalCurrency = money.Format(e.OriginalAmount, e.OriginalCurrency), e.OriginalCurrency
		d.ExchangeRate, d.RateDate = e.Rate, e.RateDate.Format(time.DateOnly)
	}
	data, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("encode event data: %w", err)
	}
	types := []string{events.CommissionStatusChanged}
	if e, ok := statusEvents[m.Status]; ok {
		types = []string{e, events.CommissionStatusChanged}
	}
	for _, typ := range types {
		if _, err := outbox.Write(ctx, tx, c.ID, events.Envelope{Type: typ, OccurredAt: m.UpdatedAt,
			AdvertiserID: c.AdvertiserID, AffiliateID: c.AffiliateID, ProgramID: c.ProgramID, Data: data}); err != nil {
			return err
		}
	}
	return nil
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
	m := &c.Commission
	if err := tx.QueryRow(ctx, `UPDATE commissions SET status = $2, reason = $3, version = version + 1, updated_at = $4
		WHERE id = $1 RETURNING version`, m.ID, to, reason, now).Scan(&m.Version); err != nil {
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

// ApproveMany approves up to MaxBulk conversions of the advertiser in one transaction: all
// or nothing. When any cannot be approved, nothing changes and the error is a *BulkError
// listing each failure.
func (s *Service) ApproveMany(ctx context.Context, advertiserID string, conversionIDs []string) ([]Conversion, error) {
	return s.changeMany(ctx, advertiserID, conversionIDs, Approved, "")
}

// RejectMany rejects up to MaxBulk conversions of the advertiser, keeping the same reason for
// each, like ApproveMany: all or nothing, a *BulkError listing each failure.
func (s *Service) RejectMany(ctx context.Context, advertiserID string, conversionIDs []string, reason string) ([]Conversion, error) {
	return s.changeMany(ctx, advertiserID, conversionIDs, Rejected, reason)
}

// changeMany moves the commissions of the advertiser's conversions to status to in one
// transaction, and returns them in the order of conversionIDs. Every id is checked before
// anything changes, so that a failure lists them all.
func (s *Service) changeMany(ctx context.Context, advertiserID string, conversionIDs []string, to, reason string) ([]Conversion, error) {
	if len(conversionIDs) == 0 || len(conversionIDs) > MaxBulk {
		return nil, invalid("ids", "must hold 1 to %d conversion ids", MaxBulk)
	}
	seen := make(map[string]bool, len(conversionIDs))
	for _, id := range conversionIDs {
		if seen[id] {
			return nil, invalid("ids", "lists %s twice", id)
		}
		seen[id] = true
	}
	if err := checkReason(reason); err != nil {
		return nil, err
	}
	var out []Conversion
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		locked, err := lock(ctx, tx, `v.id = ANY($1) AND v.advertiser_id = $2`, conversionIDs, advertiserID)
		if err != nil {
			return err
		}
		byID := make(map[string]*Conversion, len(locked))
		for i := range locked {
			byID[locked[i].ID] = &locked[i]
		}
		var failures []Failure
		for _, id := range conversionIDs {
			switch c, ok := byID[id]; {
			case !ok:
				failures = append(failures, Failure{ID: id, Code: "not_found"})
			case !slices.Contains(transitions[c.Commission.Status], to):
				failures = append(failures, Failure{ID: id, Code: "invalid_transition", Status: c.Commission.Status, Allowed: Allowed(c.Commission.Status)})
			}
		}
		if failures != nil {
			return &BulkError{To: to, Failures: failures}
		}
		now := s.now()
		out = make([]Conversion, len(conversionIDs))
		for i, id := range conversionIDs {
			if err := move(ctx, tx, byID[id], to, reason, now); err != nil {
				return err
			}
			out[i] = *byID[id]
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s conversions: %w", to, err)
	}
	return out, nil
}

// dueBatch bounds one transaction of ApproveDue.
const dueBatch = 200

// ApproveDue approves the pending commissions whose hold ended at or before now, in batches,
// and returns how many it approved. Replicas may run it at the same time: each skips the rows
// another holds.
func (s *Service) ApproveDue(ctx context.Context, now time.Time) (int, error) {
	now = now.UTC()
	total := 0
	for {
		n := 0
		err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `SELECT `+conversionColumns+` FROM conversions v JOIN commissions c ON c.conversion_id = v.id
				WHERE c.status = 'pending' AND c.hold_until <= $1 ORDER BY c.hold_until LIMIT $2 FOR UPDATE OF c SKIP LOCKED`, now, dueBatch)
			if err != nil {
				return fmt.Errorf("read due commissions: %w", err)
			}
			due, err := collect(rows, scanConversion)
			if err != nil {
				return err
			}
			for i := range due {
				if err := move(ctx, tx, &due[i], Approved, "", now); err != nil {
					return err
				}
			}
			n = len(due)
			return nil
		})
		if err != nil {
			return total, fmt.Errorf("auto-approve: %w", err)
		}
		total += n
		if n < dueBatch {
			return total, nil
		}
	}
}

// Filter narrows a list of conversions or commissions. Zero fields do not filter.
type Filter struct {
	Status      string // commission status
	ProgramID   string
	AffiliateID string
	PayoutID    string
	// From and To bound the conversion's occurred_at: From <= t < To.
	From, To time.Time
}

// where builds the scoped, filtered, paginated condition on table alias a (conversions or
// commissions: both carry the filtered columns) ordered by a.id; a zero page is every row.
func (f Filter) where(a string, v Viewer, p page.Request) (string, []any) {
	conds := []string{a + "." + v.column() + " = $1"}
	args := []any{v.CompanyID}
	add := func(cond string, val any) {
		args = append(args, val)
		conds = append(conds, fmt.Sprintf(cond, len(args)))
	}
	if f.Status != "" {
		add("c.status = $%d", f.Status)
	}
	if f.ProgramID != "" {
		add(a+".program_id = $%d", f.ProgramID)
	}
	if f.AffiliateID != "" {
		add(a+".affiliate_id = $%d", f.AffiliateID)
	}
	if f.PayoutID != "" {
		add("c.payout_id = $%d", f.PayoutID)
	}
	if !f.From.IsZero() {
		add(a+".occurred_at >= $%d", f.From)
	}
	if !f.To.IsZero() {
		add(a+".occurred_at < $%d", f.To)
	}
	if p.Before != "" {
		add(a+".id < $%d", p.Before)
	}
	where := strings.Join(conds, " AND ") + " ORDER BY " + a + ".id DESC"
	if p.Limit == 0 {
		return where, args // every row: an export
	}
	args = append(args, p.Limit+1)
	return where + fmt.Sprintf(" LIMIT $%d", len(args)), args
}

// List returns a page of the conversions the viewer may see, newest first.
func (s *Service) List(ctx context.Context, v Viewer, f Filter, p page.Request) ([]Conversion, string, error) {
	where, args := f.where("v", v, p)
	rows, err := s.db.Query(ctx, `SELECT `+conversionColumns+` FROM conversions v
		JOIN commissions c ON c.conversion_id = v.id WHERE `+where, args...)
	if err != nil {
		return nil, "", fmt.Errorf("list conversions: %w", err)
	}
	list, err := collect(rows, scanConversion)
	if err != nil {
		return nil, "", fmt.Errorf("list conversions: %w", err)
	}
	list, next := page.Cut(list, p.Limit, func(c Conversion) string { return c.ID })
	return list, next, nil
}

// Commissions returns a page of the commissions the viewer may see, newest first.
func (s *Service) Commissions(ctx context.Context, v Viewer, f Filter, p page.Request) ([]Commission, string, error) {
	where, args := f.where("c", v, p)
	rows, err := s.db.Query(ctx, `SELECT `+commissionColumns+` FROM commissions c WHERE `+where, args...)
	if err != nil {
		return nil, "", fmt.Errorf("list commissions: %w", err)
	}
	list, err := collect(rows, scanCommission)
	if err != nil {
		return nil, "", fmt.Errorf("list commissions: %w", err)
	}
	list, next := page.Cut(list, p.Limit, func(m Commission) string { return m.ID })
	return list, next, nil
}

func scanCommission(r pgx.Row) (Commission, error) {
	var m Commission
	err := r.Scan(m.targets()...)
	m.utc()
	return m, err
}

func collect[T any](rows pgx.Rows, scan func(pgx.Row) (T, error)) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// DefaultApprovalInterval is how often AutoApproval looks for commissions whose hold ended.
const DefaultApprovalInterval = time.Minute

// AutoApproval is the api's periodic job that approves pending commissions once their hold
// has ended (programs with hold days). Every api replica may run it: ApproveDue skips the
// rows another replica holds.
type AutoApproval struct {
	Service *Service
	// Interval between runs; DefaultApprovalInterval when 0.
	Interval time.Duration
	Log      *slog.Logger
}

// Name implements run.Component.
func (AutoApproval) Name() string { return "conversions-auto-approval" }

// Run approves due commissions at each interval until ctx ends.
func (a AutoApproval) Run(ctx context.Context) error {
	interval, log := a.Interval, a.Log
	if interval <= 0 {
		interval = DefaultApprovalInterval
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	run.Every(ctx, interval, log, a.Name(), func(ctx context.Context) error {
		n, err := a.Service.ApproveDue(ctx, a.Service.now())
		if n > 0 {
			log.Info("commissions approved after their hold", "count", n)
		}
		return err
	})
	return nil
}
