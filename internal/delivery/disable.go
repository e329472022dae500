package delivery

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Reasons a target is disabled, as the Webhook's Delivering condition shows them.
const (
	ReasonReceiverGone = "ReceiverGone" // it answered 410 Gone
	ReasonReceiverDead = "ReceiverDead" // no successful delivery for DisableAfter
)

// DefaultDisableAfter is how long a target may fail without a single success before it is
// disabled, when the operator sets nothing (Svix's figure).
const DefaultDisableAfter = 5 * 24 * time.Hour

// disableInterval is how often each replica looks for targets to disable.
const disableInterval = 10 * time.Minute

// errDisabled fails the attempts of a postback URL disabled for failing: it is re-enabled
// in the dashboard (a webhook is suspended instead, which its resolution sees).
var errDisabled = errors.New("the postback URL was disabled after failing for days; re-enable it in the dashboard and replay what failed")

// disableDead disables the targets that failed without a success since before
// DisableAfter and still fail: a webhook is suspended (the owners resume it), a postback URL
// marked disabled. Their pending deliveries fail, so that a bulk retry can replay them once
// the receiver is back. The api tells the owners by e-mail (Notices).
func (s *Service) disableDead(ctx context.Context) error {
	now := s.o.Now()
	rows, err := s.o.DB.Query(ctx, `SELECT kind, target_id, company_id, failing_since FROM delivery_endpoints
WHERE disabled_at IS NULL AND failing_since <= $1 AND last_failure_at >= $2`, now.Add(-s.o.DisableAfter), now.Add(-24*time.Hour))
	if err != nil {
		return fmt.Errorf("find the dead delivery targets: %w", err)
	}
	type dead struct {
		target
		company string
		since   time.Time
	}
	var found []dead
	var d dead
	if _, err := pgx.ForEachRow(rows, []any{&d.kind, &d.id, &d.company, &d.since}, func() error { found = append(found, d); return nil }); err != nil {
		return fmt.Errorf("find the dead delivery targets: %w", err)
	}
	for _, d := range found {
		why := fmt.Sprintf("no successful delivery since %s (%d days)", d.since.UTC().Format(time.RFC3339), int(now.Sub(d.since)/(24*time.Hour)))
		if d.kind == KindWebhook {
			if s.o.Suspender == nil {
				s.o.Log.Warn("a webhook failed for days, but no Kubernetes client can suspend it", "webhook", d.id, "failing_since", d.since)
				continue
			}
			if err := s.o.Suspender.SuspendWebhook(ctx, d.company, d.id, ReasonReceiverDead+": "+why); err != nil {
				return fmt.Errorf("disable webhook %s: %w", d.id, err)
			}
		}
		err := pgx.BeginFunc(ctx, s.o.DB, func(tx pgx.Tx) error {
			tag, err := tx.Exec(ctx, `UPDATE delivery_endpoints SET disabled_at = $3, open_until = NULL, probe_until = NULL, updated_at = $3
WHERE kind = $1 AND target_id = $2 AND disabled_at IS NULL`, d.kind, d.id, now)
			if err != nil || tag.RowsAffected() == 0 {
				return err // another replica did it
			}
			_, err = tx.Exec(ctx, `UPDATE deliveries SET status = 'failed', next_attempt_at = NULL, next_trigger = 'scheduled', last_error = $4, updated_at = $5
WHERE company_id = $1 AND kind = $2 AND target_id = $3 AND status = 'pending'`, d.company, d.kind, d.id, "disabled: "+why, now)
			return err
		})
		if err != nil {
			return fmt.Errorf("disable %s %s: %w", d.kind, d.id, err)
		}
		disabledTotal.WithLabelValues(d.kind).Inc()
		s.o.Log.Warn("disabled a delivery target that failed for days", "kind", d.kind, "target", d.id, "company", d.company, "failing_since", d.since)
	}
	return nil
}

// Reenabled is a postback URL enabled again, and what failed while it was failing.
type Reenabled struct {
	Endpoint Health `json:"endpoint"`
	// FailingSince is when it began failing (null if it was not disabled), and Failed how
	// many of its deliveries failed since: a bulk retry of the postbacks from then replays them.
	FailingSince *time.Time `json:"failing_since"`
	Failed       int        `json:"failed"`
}

// EnablePostback re-enables the company's postback URL after it was disabled for failing:
// its health starts afresh.
func (h *History) EnablePostback(ctx context.Context, companyID string) (Reenabled, error) {
	var out Reenabled
	err := h.db.QueryRow(ctx, `WITH old AS (
    SELECT kind, target_id, failing_since FROM delivery_endpoints
    WHERE kind = 'postback' AND target_id = $1 AND company_id = $1 AND disabled_at IS NOT NULL FOR UPDATE
), done AS (
    UPDATE delivery_endpoints e SET disabled_at = NULL, notified_at = NULL, failing_since = NULL,
           consecutive_failures = 0, open_until = NULL, probe_until = NULL, updated_at = $2
    FROM old WHERE e.kind = old.kind AND e.target_id = old.target_id
)
SELECT failing_since FROM old`, companyID, h.now()).Scan(&out.FailingSince)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return Reenabled{}, fmt.Errorf("enable the postback URL of %s: %w", companyID, err)
	}
	if out.FailingSince != nil {
		if out.Failed, err = h.failedSince(ctx, companyID, KindPostback, companyID, *out.FailingSince); err != nil {
			return Reenabled{}, err
		}
	}
	if out.Endpoint, err = h.Health(ctx, companyID, KindPostback, companyID); err != nil {
		return Reenabled{}, err
	}
	return out, nil
}
