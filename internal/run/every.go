package run

import (
	"context"
	"log/slog"
	"time"
)

// Every runs fn at each interval until ctx ends: housekeeping such as pruning expired rows.
// Failures are logged and retried at the next tick; several replicas running the same job is
// expected, so jobs must be idempotent.
func Every(ctx context.Context, interval time.Duration, log *slog.Logger, name string, fn func(ctx context.Context) error) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := fn(ctx); err != nil && ctx.Err() == nil {
				log.Warn("periodic job failed", "job", name, "err", err)
			}
		}
	}
}
