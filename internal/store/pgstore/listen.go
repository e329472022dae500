package pgstore

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Subscription is what Listen needs to keep a cache in step with a Postgres NOTIFY channel.
type Subscription struct {
	// Channel is the NOTIFY channel.
	Channel string
	// Notify receives the payload of each notification.
	Notify func(payload string)
	// Reset runs every time the subscription is live: the first time and after each
	// reconnect, once the LISTEN is in place and before any notification is passed on.
	// Notifications sent while nothing listened are lost, so it must drop whatever they
	// could have invalidated. Running it only once the LISTEN is live leaves no gap: a change
	// made after Reset is announced on the new subscription.
	Reset func()
	// Live, when set, runs right after Reset. Tests wait for it instead of sleeping.
	Live func()
	// Log receives the reconnections; nothing when nil.
	Log *slog.Logger
	// RetryAfter is the pause before reconnecting (default 1 s).
	RetryAfter time.Duration
}

// Listen passes the notifications of s.Channel to s.Notify until ctx ends, on a connection
// of db it holds for as long, and subscribes again on a new one whenever that connection is
// lost.
func Listen(ctx context.Context, db *pgxpool.Pool, s Subscription) {
	if s.RetryAfter <= 0 {
		s.RetryAfter = time.Second
	}
	if s.Log == nil {
		s.Log = slog.New(slog.DiscardHandler)
	}
	for ctx.Err() == nil {
		err := listenOnce(ctx, db, s)
		if ctx.Err() != nil {
			return
		}
		s.Log.Warn("postgres: listener reconnecting; caches fed by it are reset once it is back",
			"channel", s.Channel, "in", s.RetryAfter, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.RetryAfter):
		}
	}
}

func listenOnce(ctx context.Context, db *pgxpool.Pool, s Subscription) error {
	conn, err := db.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire a connection: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{s.Channel}.Sanitize()); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	// A LISTENing connection must not go back to the pool still subscribed.
	defer func() {
		uctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, _ = conn.Exec(uctx, "UNLISTEN *")
	}()
	s.Reset()
	if s.Live != nil {
		s.Live()
	}
	for {
		n, err := conn.Conn().WaitForNotification(ctx)
		if err != nil {
			return fmt.Errorf("wait for a notification: %w", err)
		}
		s.Notify(n.Payload)
	}
}
