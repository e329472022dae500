package delivery

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/partnerstream/partnerstream/internal/ids"
)

// DefaultRetention is how long delivery history is kept when the operator sets nothing.
const DefaultRetention = 30 * 24 * time.Hour

// retentionBatch bounds one DELETE: its locks last milliseconds, and a worker or a replay
// that meets a row being deleted waits at most that long.
const retentionBatch = 1000

// Retention deletes delivery history: deliveries whose last change (an attempt, a replay) is
// more than Keep ago, with their attempts. A delivery still pending is kept whatever its age,
// and a failed one stays replayable for the whole period.
type Retention struct {
	DB   *pgxpool.Pool
	Keep time.Duration
	// Now is the clock; time.Now if nil.
	Now func() time.Time
}

// Prune runs the deletion in batches until nothing is left to delete and returns how many
// deliveries it deleted. Several replicas may run it at once: each batch skips the rows
// another one holds.
func (r Retention) Prune(ctx context.Context) (int64, error) {
	if r.Keep <= 0 {
		return 0, errors.New("delivery retention: the period must be positive")
	}
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	cutoff := now().Add(-r.Keep)
	// Ids sort by creation time, so the primary key finds the old rows; updated_at then
	// spares those touched since.
	floor := ids.Floor(ids.Delivery, cutoff)
	var total int64
	for {
		tag, err := r.DB.Exec(ctx, `DELETE FROM deliveries WHERE id IN (
			SELECT id FROM deliveries WHERE id < $1 AND status <> $2 AND updated_at < $3
			ORDER BY id LIMIT $4 FOR UPDATE SKIP LOCKED)`, floor, StatusPending, cutoff, retentionBatch)
		if err != nil {
			return total, fmt.Errorf("delivery retention: delete history before %s: %w", cutoff.Format(time.RFC3339), err)
		}
		total += tag.RowsAffected()
		prunedTotal.Add(float64(tag.RowsAffected()))
		if tag.RowsAffected() < retentionBatch {
			return total, nil
		}
	}
}
