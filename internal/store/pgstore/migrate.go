package pgstore

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/golang-migrate/migrate/v4"
	"github.com/golang-migrate/migrate/v4/database"
	pgxmigrate "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrate brings the schema of the database at url up to the newest embedded migration.
// Running it again, or from several pods at once, is safe: golang-migrate serialises runs with
// a Postgres advisory lock, and an up-to-date schema is success. It stops between migrations
// once ctx is done.
func Migrate(ctx context.Context, url string, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg, err := parseConfig(url)
	if err != nil {
		return err
	}
	where := target(cfg.ConnConfig.Config)
	wait := lockWait(ctx)
	m, err := newMigrator(cfg.ConnConfig, wait)
	if err != nil {
		return failure(where, wait, fmt.Errorf("prepare migrations: %w", err))
	}
	defer closeMigrator(m, log)

	log.Info("postgres: migrating", "database", where, "from", describeVersion(m))
	switch err := up(ctx, m); {
	case errors.Is(err, migrate.ErrNoChange):
		log.Info("postgres: schema already up to date", "database", where, "version", describeVersion(m))
		return nil
	case err != nil:
		return failure(where, wait, err)
	}
	log.Info("postgres: migrated", "database", where, "to", describeVersion(m))
	return nil
}

// failure says what an operator can do about the golang-migrate errors that need one.
func failure(where string, wait time.Duration, err error) error {
	var dirty migrate.ErrDirty
	switch {
	case errors.As(err, &dirty):
		return fmt.Errorf("postgres: schema of %s is dirty at version %d: that migration failed part-way; "+
			"repair the schema by hand, then force the version with the migrate CLI: %w", where, dirty.Version, err)
	case isLockTimeout(err):
		return fmt.Errorf("postgres: migrate %s: waited over %v for a lock held by another session "+
			"(another migrator, or a long transaction on a table being altered): %w", where, wait.Round(time.Millisecond), err)
	}
	return fmt.Errorf("postgres: migrate %s: %w", where, err)
}

// newMigrator bounds every lock wait with the server-side lock_timeout. golang-migrate waits
// for its advisory lock in a statement it cannot cancel, and closing it then blocks until that
// lock comes, however long another pod holds it: only the server can end that wait cleanly.
// The same setting makes a migration's DDL that is stuck behind a long transaction fail rather
// than queue every query on that table behind it.
func newMigrator(cfg *pgx.ConnConfig, lockWait time.Duration) (*migrate.Migrate, error) {
	cfg = cfg.Copy()
	cfg.RuntimeParams["lock_timeout"] = strconv.FormatInt(max(lockWait.Milliseconds(), 1), 10)
	src, err := iofs.New(migrationFiles, "migrations")
	if err != nil {
		return nil, fmt.Errorf("read embedded migrations: %w", err)
	}
	db := stdlib.OpenDB(*cfg)
	drv, err := pgxmigrate.WithInstance(db, &pgxmigrate.Config{})
	if err != nil {
		_ = db.Close()
		_ = src.Close()
		return nil, fmt.Errorf("connect: %w", err)
	}
	m, err := migrate.NewWithInstance("iofs", src, "pgx5", drv)
	if err != nil {
		_ = drv.Close()
		_ = src.Close()
		return nil, err
	}
	// The server's lock_timeout must fire first: it leaves no statement behind to block Close.
	m.LockTimeout = lockWait + time.Second
	return m, nil
}

// lockWait is how long Migrate may wait for a lock: until ctx's deadline, or golang-migrate's
// default when ctx has none.
func lockWait(ctx context.Context) time.Duration {
	if deadline, ok := ctx.Deadline(); ok {
		return time.Until(deadline)
	}
	return migrate.DefaultLockTimeout
}

// up runs golang-migrate, which takes no context, within ctx: a cancellation stops it between
// two migrations (the one already sent to the server completes, so the schema is never left
// half-applied by us), and a done ctx is reported even when Up itself succeeded.
func up(ctx context.Context, m *migrate.Migrate) error {
	stop := context.AfterFunc(ctx, func() {
		select {
		case m.GracefulStop <- true:
		default:
		}
	})
	defer stop()
	err := m.Up()
	ctxErr := ctx.Err()
	switch {
	case ctxErr == nil || errors.Is(err, migrate.ErrNoChange):
		return err
	case err == nil:
		return ctxErr
	}
	return fmt.Errorf("%w: %w", ctxErr, err)
}

func isLockTimeout(err error) bool {
	pgErr, ok := serverError(err)
	return errors.Is(err, migrate.ErrLockTimeout) || (ok && pgErr.Code == pgerrcode.LockNotAvailable)
}

// serverError finds the Postgres error behind err. golang-migrate's database.Error, returned by
// value and by pointer, holds it in OrigErr without an Unwrap method.
func serverError(err error) (*pgconn.PgError, bool) {
	var pgErr *pgconn.PgError
	var byValue database.Error
	var byPointer *database.Error
	switch {
	case errors.As(err, &pgErr):
		return pgErr, true
	case errors.As(err, &byValue):
		return serverError(byValue.OrigErr)
	case errors.As(err, &byPointer):
		return serverError(byPointer.OrigErr)
	}
	return nil, false
}

func describeVersion(m *migrate.Migrate) string {
	v, dirty, err := m.Version()
	switch {
	case errors.Is(err, migrate.ErrNilVersion):
		return "none"
	case err != nil:
		return "unknown (" + err.Error() + ")"
	case dirty:
		return fmt.Sprintf("%d (dirty)", v)
	}
	return fmt.Sprint(v)
}

func closeMigrator(m *migrate.Migrate, log *slog.Logger) {
	if srcErr, dbErr := m.Close(); srcErr != nil || dbErr != nil {
		log.Warn("postgres: close migrator", "source_error", srcErr, "database_error", dbErr)
	}
}

// MigrationsDigest is a digest of the embedded migrations' names and contents: two builds
// with the same digest migrate a database to the same schema (a test's template database is
// named by it).
func MigrationsDigest() (string, error) {
	entries, err := migrationFiles.ReadDir("migrations")
	if err != nil {
		return "", fmt.Errorf("read embedded migrations: %w", err)
	}
	h := sha256.New()
	for _, e := range entries {
		b, err := migrationFiles.ReadFile("migrations/" + e.Name())
		if err != nil {
			return "", fmt.Errorf("read embedded migration %s: %w", e.Name(), err)
		}
		fmt.Fprintf(h, "%s %d\n", e.Name(), len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// LatestVersion is the version of the newest embedded migration.
func LatestVersion() (uint, error) {
	entries, err := migrationFiles.ReadDir("migrations")
	if err != nil {
		return 0, fmt.Errorf("read embedded migrations: %w", err)
	}
	var latest uint
	for _, e := range entries {
		var v uint
		if _, err := fmt.Sscanf(e.Name(), "%d_", &v); err == nil && v > latest {
			latest = v
		}
	}
	return latest, nil
}
