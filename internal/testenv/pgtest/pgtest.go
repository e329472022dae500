// Package pgtest gives a test a fresh Postgres database with every migration applied. It is
// apart from testenv because the migrations' own package tests use testenv.
package pgtest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/partnerstream/partnerstream/internal/store/pgstore"
	"github.com/partnerstream/partnerstream/internal/testenv"
)

// Migrated creates a migrated database for the test and returns its URL and a pool on it,
// closed when the test ends.
func Migrated(t testing.TB) (string, *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	url := testenv.Postgres(t)
	if err := pgstore.Migrate(ctx, url, nil); err != nil {
		t.Fatalf("pgtest: migrate: %v", err)
	}
	pool, err := pgstore.Open(ctx, url)
	if err != nil {
		t.Fatalf("pgtest: open: %v", err)
	}
	t.Cleanup(pool.Close)
	return url, pool
}

// Listen runs pgstore.Listen with s until the test ends and returns once the subscription
// is live, so a notification sent after it returns is delivered. s.Live, if set, still runs.
func Listen(t testing.TB, db *pgxpool.Pool, s pgstore.Subscription) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	live := make(chan struct{}, 1)
	hook := s.Live
	s.Live = func() {
		if hook != nil {
			hook()
		}
		select {
		case live <- struct{}{}:
		default:
		}
	}
	done := make(chan struct{})
	go func() { defer close(done); pgstore.Listen(ctx, db, s) }()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-live:
	case <-time.After(15 * time.Second):
		t.Fatalf("pgtest: LISTEN %s not live after 15 s", s.Channel)
	}
}
