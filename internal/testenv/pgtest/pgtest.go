// Package pgtest gives a test a fresh Postgres database with every migration applied. It is
// apart from testenv because the migrations' own package tests use testenv.
package pgtest

import (
	"context"
	"testing"

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
