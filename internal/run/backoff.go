package run

import (
	"context"
	"time"
)

// Backoff is the wait before retry number attempt (from 1) of a failing dependency: it
// doubles from 100 ms up to 5 s.
func Backoff(attempt int) time.Duration {
	return BackoffBetween(attempt, 100*time.Millisecond, 5*time.Second)
}

// BackoffBetween is the wait before retry number attempt (from 1) when the caller cannot
// wait as long as Backoff does: it doubles from lo up to hi.
func BackoffBetween(attempt int, lo, hi time.Duration) time.Duration {
	return min(lo<<min(max(attempt, 1)-1, 16), hi)
}

// Sleep waits d, or returns false as soon as ctx ends.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
