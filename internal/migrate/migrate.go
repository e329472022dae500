// Package migrate brings every store's schema up to date. `partnerstream migrate` runs it,
// possibly from several pods at once (a Job retried, a Helm hook racing an old one), so it
// serialises them with a Postgres advisory lock: golang-migrate locks the Postgres migrations
// on its own, but the ClickHouse migrations have no lock of their own.
package migrate

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/jackc/pgx/v5"

	"github.com/partnerstream/partnerstream/internal/store/chstore"
	"github.com/partnerstream/partnerstream/internal/store/pgstore"
)

// LockKey is the key of the session advisory lock (pg_advisory_lock) that Run holds. Its bytes
// spell "PSMIGR" and a 16-bit generation: every binary that may run side by side must use the
// same key, so change it never, or only in a release that no older pod can overlap with.
// Advisory locks are scoped to a database, so installations sharing a server do not contend.
// golang-migrate's own key is a CRC32-derived number, which cannot reasonably collide with it.
const LockKey int64 = 0x50534d4947520001

// releaseTimeout bounds the unlock, which runs even after ctx is done.
const releaseTimeout = 5 * time.Second

// Run migrates Postgres, then ClickHouse's chDatabase through ch, while holding LockKey on a
// dedicated Postgres session. Waiting for the lock ends with ctx.
func Run(ctx context.Context, pgURL string, ch driver.Conn, chDatabase string, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	release, err := acquire(ctx, pgURL, log)
	if err != nil {
		return err
	}
	defer release()

	if err := pgstore.Migrate(ctx, pgURL, log); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if err := chstore.Migrate(ctx, ch, chDatabase, log); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	log.Info("migrate: all stores up to date")
	return nil
}

// acquire takes LockKey, saying in the log when it has to wait for another pod, and returns
// the function that gives it back. The lock belongs to the session, so the connection is kept
// for the whole run rather than borrowed from a pool.
func acquire(ctx context.Context, pgURL string, log *slog.Logger) (release func(), err error) {
	conn, err := pgstore.Connect(ctx, pgURL)
	if err != nil {
		return nil, fmt.Errorf("migrate: connect for the migration lock: %w", err)
	}
	if err := lock(ctx, conn, log); err != nil {
		closeConn(conn)
		return nil, fmt.Errorf("migrate: take advisory lock %d: %w", LockKey, err)
	}
	log.Info("migrate: holding the migration lock", "key", LockKey)
	return func() { unlock(conn, log) }, nil
}

func lock(ctx context.Context, conn *pgx.Conn, log *slog.Logger) error {
	var got bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", LockKey).Scan(&got); err != nil || got {
		return err
	}
	log.Info("migrate: another migration is running; waiting for its lock", "key", LockKey)
	_, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", LockKey)
	return err
}

// unlock gives the lock back even when the run's ctx is done. Should that fail, closing the
// session releases the lock all the same; the warning only explains a slow next run.
func unlock(conn *pgx.Conn, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_unlock($1)", LockKey); err != nil {
		log.Warn("migrate: release the migration lock; closing the session instead", "error", err)
	}
	closeConn(conn)
}

func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	_ = conn.Close(ctx)
}
