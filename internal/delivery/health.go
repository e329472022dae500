package delivery

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/partnerstream/partnerstream/internal/ids"
)

// Breaker states of an endpoint, as its health shows them.
const (
	BreakerClosed   = "closed"   // attempts are sent
	BreakerOpen     = "open"     // attempts wait for the cool-down, then one probe
	BreakerDisabled = "disabled" // failed without a success for too long (disable.go)
)

// Health is a delivery target's health, as the delivery list and the dashboard show it.
type Health struct {
	// Breaker is closed, open or disabled.
	Breaker             string     `json:"breaker"`
	ConsecutiveFailures int        `json:"consecutive_failures"`
	OpenUntil           *time.Time `json:"open_until"`
	LastSuccessAt       *time.Time `json:"last_success_at"`
	LastFailureAt       *time.Time `json:"last_failure_at"`
	// FailingSince is the first failure since the last success.
	FailingSince *time.Time `json:"failing_since"`
	DisabledAt   *time.Time `json:"disabled_at"`
	// FailedSinceFailing counts the target's failed deliveries created since FailingSince:
	// what a bulk retry from then replays once the receiver is back.
	FailedSinceFailing int `json:"failed_since_failing"`
	// Attempts24h and Succeeded24h count the attempts of the deliveries created in the
	// last 24 hours; SuccessRate24h is their ratio (null without attempts).
	Attempts24h    int      `json:"attempts_24h"`
	Succeeded24h   int      `json:"succeeded_24h"`
	SuccessRate24h *float64 `json:"success_rate_24h"`
}

// Health reads the health of one of the company's targets: a webhook, or (kind postback)
// its postback URL, whose target id is the company id. A target never attempted is closed.
func (h *History) Health(ctx context.Context, companyID, kind, targetID string) (Health, error) {
	var out Health
	var disabled *time.Time
	err := h.db.QueryRow(ctx, `SELECT consecutive_failures, open_until, last_success_at, last_failure_at, failing_since, disabled_at
FROM delivery_endpoints WHERE kind = $1 AND target_id = $2 AND company_id = $3`, kind, targetID, companyID).Scan(
		&out.ConsecutiveFailures, &out.OpenUntil, &out.LastSuccessAt, &out.LastFailureAt, &out.FailingSince, &disabled)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return Health{}, fmt.Errorf("read the health of %s %s: %w", kind, targetID, err)
	}
	out.DisabledAt = disabled
	switch {
	case disabled != nil:
		out.Breaker = BreakerDisabled
	case out.OpenUntil != nil:
		out.Breaker = BreakerOpen
	default:
		out.Breaker = BreakerClosed
	}
	// The history index finds the target's deliveries of the day: ids sort by creation time.
	since := h.now().Add(-24 * time.Hour)
	err = h.db.QueryRow(ctx, `SELECT count(a.n), count(a.n) FILTER (WHERE a.status_code BETWEEN 200 AND 299)
FROM deliveries d JOIN delivery_attempts a ON a.delivery_id = d.id
WHERE d.company_id = $1 AND d.kind = $2 AND d.target_id = $3 AND d.id >= $4 AND d.created_at >= $5`,
		companyID, kind, targetID, ids.Floor(ids.Delivery, since), since).Scan(&out.Attempts24h, &out.Succeeded24h)
	if err != nil {
		return Health{}, fmt.Errorf("count the attempts of %s %s: %w", kind, targetID, err)
	}
	if out.FailingSince != nil {
		if out.FailedSinceFailing, err = h.failedSince(ctx, companyID, kind, targetID, *out.FailingSince); err != nil {
			return Health{}, err
		}
	}
	if out.Attempts24h > 0 {
		r := float64(out.Succeeded24h) / float64(out.Attempts24h)
		out.SuccessRate24h = &r
	}
	return out, nil
}

// failedSince counts the target's failed deliveries created at or after since.
func (h *History) failedSince(ctx context.Context, companyID, kind, targetID string, since time.Time) (int, error) {
	var n int
	err := h.db.QueryRow(ctx, `SELECT count(*) FROM deliveries
WHERE company_id = $1 AND kind = $2 AND target_id = $3 AND id >= $4 AND created_at >= $5 AND status = 'failed'`,
		companyID, kind, targetID, ids.Floor(ids.Delivery, since), since).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count the failed deliveries of %s %s: %w", kind, targetID, err)
	}
	return n, nil
}
