package delivery

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/partnerstream/partnerstream/internal/page"
)

// Kinds of delivery targets (the deliveries.kind column).
const (
	KindWebhook  = "webhook"
	KindPostback = "postback"
)

// Delivery statuses (the deliveries.status column).
const (
	StatusPending   = "pending"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
)

// Statuses lists every delivery status, for filters.
var Statuses = []string{StatusPending, StatusSucceeded, StatusFailed}

// Attempt triggers: the retry schedule, or a replay / bulk retry.
const (
	TriggerScheduled = "scheduled"
	TriggerManual    = "manual"
)

// Delivery is one event sent to one target, as the history shows it. The body is left out:
// it is the event's webhook body, which the receiver already has, and it can be large.
type Delivery struct {
	// ID is the webhook-id header of every attempt (msg_...).
	ID   string `json:"id"`
	Kind string `json:"kind"`
	// TargetID is the webhook id (wh_...), or the company id for its postback URL.
	TargetID  string `json:"target_id"`
	URL       string `json:"url"`
	EventID   string `json:"event_id"`
	EventType string `json:"event_type"`
	Status    string `json:"status"`
	// AttemptCount is how many attempts were made.
	AttemptCount int `json:"attempt_count"`
	// NextAttemptAt and NextTrigger are set while the delivery is pending.
	NextAttemptAt  *time.Time `json:"next_attempt_at"`
	NextTrigger    *string    `json:"next_trigger"`
	LastStatusCode *int       `json:"last_status_code"`
	LastError      *string    `json:"last_error"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
	// Attempts, oldest first.
	Attempts []Attempt `json:"attempts"`
}

// Attempt is one try of a delivery.
type Attempt struct {
	N          int       `json:"n"`
	Trigger    string    `json:"trigger"`
	StartedAt  time.Time `json:"started_at"`
	DurationMS int       `json:"duration_ms"`
	// StatusCode is nil when no response came (timeout, refused connection, SSRF refusal).
	StatusCode      *int    `json:"status_code"`
	Error           *string `json:"error"`
	ResponseExcerpt *string `json:"response_excerpt"`
}

// Filter narrows a history list; zero fields do not filter. From is inclusive, To exclusive.
type Filter struct {
	Status    string
	EventType string
	From, To  time.Time
}

// RetryFilter narrows a bulk retry; zero fields do not filter. WebhookID keeps only that
// webhook's deliveries (no postbacks); From is inclusive, To exclusive, on the creation time.
type RetryFilter struct {
	WebhookID string
	// Postbacks keeps only the postback URL's deliveries (not with WebhookID).
	Postbacks bool
	From, To  time.Time
}

// ErrNotFound is returned for a delivery id that does not exist or belongs to another company.
var ErrNotFound = errors.New("delivery not found")

// StateError says a delivery cannot be replayed in its status.
type StateError struct {
	ID     string
	Status string
}

func (e *StateError) Error() string {
	return fmt.Sprintf("delivery %s is %s: only a failed delivery can be replayed", e.ID, e.Status)
}

// History reads a company's deliveries and queues them again (replay, bulk retry) for the
// dashboard API. Queuing only marks rows: the delivery workers make the attempt, exactly one
// for a row marked manual, with the same webhook-id.
type History struct {
	db  *pgxpool.Pool
	now func() time.Time
}

// NewHistory returns a History on the database; now is time.Now when nil.
func NewHistory(db *pgxpool.Pool, now func() time.Time) *History {
	if now == nil {
		now = time.Now
	}
	return &History{db: db, now: now}
}

const deliveryColumns = `id, kind, target_id, url, event_id, event_type, status, attempts, next_attempt_at,
	CASE WHEN status = 'pending' THEN next_trigger END, last_status, last_error, created_at, updated_at`

func scanDelivery(row pgx.CollectableRow) (Delivery, error) {
	var d Delivery
	err := row.Scan(&d.ID, &d.Kind, &d.TargetID, &d.URL, &d.EventID, &d.EventType, &d.Status, &d.AttemptCount,
		&d.NextAttemptAt, &d.NextTrigger, &d.LastStatusCode, &d.LastError, &d.CreatedAt, &d.UpdatedAt)
	d.Attempts = []Attempt{}
	return d, err
}

// Webhook lists the company's deliveries of one webhook, newest first. The caller checks
// that the webhook is the company's; the query is scoped by company anyway.
func (h *History) Webhook(ctx context.Context, companyID, webhookID string, f Filter, p page.Request) (page.List[Delivery], error) {
	return h.list(ctx, companyID, KindWebhook, webhookID, f, p)
}

// Postbacks lists the company's postback deliveries, newest first.
func (h *History) Postbacks(ctx context.Context, companyID string, f Filter, p page.Request) (page.List[Delivery], error) {
	return h.list(ctx, companyID, KindPostback, companyID, f, p)
}

func (h *History) list(ctx context.Context, companyID, kind, targetID string, f Filter, p page.Request) (page.List[Delivery], error) {
	if p.Limit <= 0 {
		p.Limit = page.DefaultLimit
	}
	var out []Delivery
	// One snapshot, so that the attempts match their deliveries' counts.
	err := pgx.BeginTxFunc(ctx, h.db, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		rows, _ := tx.Query(ctx, `SELECT `+deliveryColumns+` FROM deliveries
WHERE company_id = @company AND kind = @kind AND target_id = @target
	AND (@status = '' OR status = @status) AND (@event_type = '' OR event_type = @event_type)
	AND (@from::timestamptz IS NULL OR created_at >= @from) AND (@to::timestamptz IS NULL OR created_at < @to)
	AND (@before = '' OR id < @before)
ORDER BY id DESC LIMIT @limit`, pgx.NamedArgs{"company": companyID, "kind": kind, "target": targetID,
			"status": f.Status, "event_type": f.EventType, "from": optionalTime(f.From), "to": optionalTime(f.To),
			"before": p.Before, "limit": p.Limit + 1})
		var err error
		if out, err = pgx.CollectRows(rows, scanDelivery); err != nil {
			return err
		}
		return withAttempts(ctx, tx, out)
	})
	if err != nil {
		return page.List[Delivery]{}, fmt.Errorf("list %s deliveries of %s: %w", kind, targetID, err)
	}
	data, next := page.Cut(out, p.Limit, func(d Delivery) string { return d.ID })
	return page.List[Delivery]{Data: data, NextCursor: next}, nil
}

// withAttempts fills in the attempts of the deliveries.
func withAttempts(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, ds []Delivery) error {
	if len(ds) == 0 {
		return nil
	}
	idx := make(map[string]int, len(ds))
	ids := make([]string, len(ds))
	for i, d := range ds {
		idx[d.ID], ids[i] = i, d.ID
	}
	rows, _ := q.Query(ctx, `SELECT delivery_id, n, trigger, started_at, duration_ms, status_code, error, response_excerpt
FROM delivery_attempts WHERE delivery_id = ANY($1) ORDER BY delivery_id, n`, ids)
	var (
		id string
		a  Attempt
	)
	_, err := pgx.ForEachRow(rows, []any{&id, &a.N, &a.Trigger, &a.StartedAt, &a.DurationMS, &a.StatusCode, &a.Error, &a.ResponseExcerpt}, func() error {
		d := &ds[idx[id]]
		d.Attempts = append(d.Attempts, a)
		return nil
	})
	if err != nil {
		return fmt.Errorf("attempts: %w", err)
	}
	return nil
}

// queue is the update that replay and bulk retry share: the workers make one attempt, marked
// manual, as soon as they see the row.
const queue = `UPDATE deliveries SET status = 'pending', next_attempt_at = @now, next_trigger = 'manual', updated_at = @now`

// Replay queues one failed delivery of the company for one manual attempt with the same
// webhook-id. An unknown or foreign id is ErrNotFound; a pending or succeeded delivery is a
// *StateError.
func (h *History) Replay(ctx context.Context, companyID, deliveryID string) (Delivery, error) {
	// The status may change between the update and the look that explains why it matched
	// nothing (another replay's attempt failing meanwhile): then the update is tried again.
	for range 3 {
		rows, _ := h.db.Query(ctx, queue+` WHERE id = @id AND company_id = @company AND status = 'failed'
RETURNING `+deliveryColumns, pgx.NamedArgs{"id": deliveryID, "company": companyID, "now": h.now()})
		d, err := pgx.CollectExactlyOneRow(rows, scanDelivery)
		if errors.Is(err, pgx.ErrNoRows) {
			var status string
			err = h.db.QueryRow(ctx, `SELECT status FROM deliveries WHERE id = $1 AND company_id = $2`, deliveryID, companyID).Scan(&status)
			switch {
			case errors.Is(err, pgx.ErrNoRows):
				return Delivery{}, ErrNotFound
			case err != nil:
			case status == StatusFailed:
				continue
			default:
				return Delivery{}, &StateError{ID: deliveryID, Status: status}
			}
		}
		if err != nil {
			return Delivery{}, fmt.Errorf("replay delivery %s: %w", deliveryID, err)
		}
		ds := []Delivery{d}
		if err := withAttempts(ctx, h.db, ds); err != nil {
			return Delivery{}, fmt.Errorf("replay delivery %s: %w", deliveryID, err)
		}
		return ds[0], nil
	}
	return Delivery{}, fmt.Errorf("replay delivery %s: its status keeps changing", deliveryID)
}

// RetryFailed queues every failed delivery of the company that the filter keeps, in one
// statement, for one manual attempt each. It returns how many were queued.
func (h *History) RetryFailed(ctx context.Context, companyID string, f RetryFilter) (int64, error) {
	tag, err := h.db.Exec(ctx, queue+` WHERE company_id = @company AND status = 'failed'
	AND (@webhook = '' OR (kind = 'webhook' AND target_id = @webhook))
	AND (NOT @postbacks OR kind = 'postback')
	AND (@from::timestamptz IS NULL OR created_at >= @from) AND (@to::timestamptz IS NULL OR created_at < @to)`,
		pgx.NamedArgs{"company": companyID, "webhook": f.WebhookID, "postbacks": f.Postbacks, "from": optionalTime(f.From), "to": optionalTime(f.To), "now": h.now()})
	if err != nil {
		return 0, fmt.Errorf("retry failed deliveries of %s: %w", companyID, err)
	}
	return tag.RowsAffected(), nil
}

// optionalTime is NULL for the zero time, so that an unset bound does not filter.
func optionalTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
