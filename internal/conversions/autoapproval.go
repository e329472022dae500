package conversions

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/partnerstream/partnerstream/internal/run"
)

// dueBatch bounds one transaction of ApproveDue.
const dueBatch = 200

// ApproveDue approves the pending commissions whose hold ended at or before now, in batches,
// and returns how many it approved. A commission a fraud rule holds waits for its release. Replicas may run it at the same time: each skips the rows
// another holds.
func (s *Service) ApproveDue(ctx context.Context, now time.Time) (int, error) {
	now = now.UTC()
	total := 0
	for {
		n := 0
		err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, `SELECT `+conversionColumns+` FROM conversions v JOIN commissions c ON c.conversion_id = v.id
				WHERE c.status = 'pending' AND c.hold_until <= $1 AND c.held_at IS NULL ORDER BY c.hold_until LIMIT $2 FOR UPDATE OF c SKIP LOCKED`, now, dueBatch)
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
