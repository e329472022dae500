package pgstore_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/golang-migrate/migrate/v4/database"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/partnerstream/partnerstream/internal/store/pgstore"
	"github.com/partnerstream/partnerstream/internal/testenv"
)

// entrypoints are the functions that take a connection string from configuration; each must
// fail fast and keep the password out of its errors.
var entrypoints = map[string]func(ctx context.Context, url string) error{
	"Open": func(ctx context.Context, url string) error {
		pool, err := pgstore.Open(ctx, url)
		if err == nil {
			pool.Close()
		}
		return err
	},
	"Connect": func(ctx context.Context, url string) error {
		conn, err := pgstore.Connect(ctx, url)
		if err == nil {
			_ = conn.Close(ctx)
		}
		return err
	},
	"Migrate": func(ctx context.Context, url string) error {
		return pgstore.Migrate(ctx, url, nil)
	},
}

func TestUnreachableServerFailsFast(t *testing.T) {
	t.Parallel()
	const url = "postgres://partnerstream:hunter2secret@127.0.0.1:1/partnerstream?sslmode=disable"
	for name, call := range entrypoints {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			err := call(context.Background(), url)
			elapsed := time.Since(start)
			if err == nil {
				t.Fatal("connected to a closed port")
			}
			if elapsed > 6*time.Second {
				t.Errorf("took %v to fail, want at most 6s", elapsed)
			}
			if !strings.Contains(err.Error(), "postgres") {
				t.Errorf("error %q does not say it is about postgres", err)
			}
			if strings.Contains(err.Error(), "hunter2secret") {
				t.Errorf("error %q leaks the password", err)
			}
		})
	}
}

func TestMalformedConnectionStringDoesNotLeakPassword(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		url  string
		what string // a fragment of the error saying what is wrong
	}{
		{"a port that is not a number", "postgres://bob:s3cretPW@localhost:notaport/db", "port"},
		{"a port out of range", "postgres://bob:s3cretPW@localhost:99999/db", "port"},
		{"a bad percent-escape in the password", "postgres://bob:s3cr%zzetPW@localhost:5432/db", "percent"},
		{"a slash inside the password", "postgres://bob:s3c/retPW@localhost:5432/db", "port"},
		{"a space inside the password", "postgres://bob:s3c retPW@localhost:5432/db", "space"},
		{"an unclosed IPv6 host", "postgres://bob:s3cretPW@[::1/db", "IPv6"},
		{"an invalid sslmode", "postgres://bob:s3cretPW@localhost/db?sslmode=bogus", "sslmode"},
		{"a password in the query and a bad timeout", "postgres://bob@localhost/db?password=s3cretPW&connect_timeout=abc", "connect_timeout"},
		{"a keyword/value string with a bad port", "host=localhost user=bob password=s3cretPW port=abc", "port"},
		{"a quoted keyword/value password", "host=localhost user=bob password='s3c retPW' port=abc", "port"},
		{"a keyword/value password with an escaped space", `host=localhost user=bob password=s3c\ retPW port=abc`, "port"},
		{"spaces around the equals sign", "host=localhost user=bob password = s3cretPW port=abc", "port"},
		{"an unescaped at sign in the password", "postgres://bob:s3c@retPW@localhost:bad/db", "port"},
	}
	for _, tt := range tests {
		for name, call := range entrypoints {
			t.Run(tt.name+"/"+name, func(t *testing.T) {
				t.Parallel()
				err := call(context.Background(), tt.url)
				if err == nil {
					t.Fatal("accepted a malformed connection string")
				}
				msg := err.Error()
				// Every password above starts with s3c and ends with etPW: neither half may show.
				if strings.Contains(msg, "s3c") || strings.Contains(msg, "etPW") {
					t.Errorf("error %q leaks the password", msg)
				}
				if !strings.Contains(msg, "postgres") || !strings.Contains(msg, tt.what) {
					t.Errorf("error %q should mention postgres and %q", msg, tt.what)
				}
			})
		}
	}
}

func TestOpenPingsAReachableServer(t *testing.T) {
	t.Parallel()
	url := testenv.Postgres(t)
	pool, err := pgstore.Open(context.Background(), url)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer pool.Close()
	var one int
	if err := pool.QueryRow(context.Background(), "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1 = %d, %v", one, err)
	}
}

func TestMigrateTwiceIsANoOpTheSecondTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testenv.Postgres(t)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))

	if err := pgstore.Migrate(ctx, url, log); err != nil {
		t.Fatalf("first Migrate: %v", err)
	}
	if !strings.Contains(logs.String(), "postgres: migrated") {
		t.Errorf("first run did not log that it migrated:\n%s", logs.String())
	}
	pool := openPool(t, url)
	mustExec(t, pool, `INSERT INTO companies (id, kind, name) VALUES ('co_keep', 'advertiser', 'Acme')`)

	logs.Reset()
	if err := pgstore.Migrate(ctx, url, log); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	if !strings.Contains(logs.String(), "already up to date") {
		t.Errorf("second run did not report an up-to-date schema:\n%s", logs.String())
	}

	var version int64
	var dirty bool
	if err := pool.QueryRow(ctx, "SELECT version, dirty FROM schema_migrations").Scan(&version, &dirty); err != nil {
		t.Fatalf("read schema_migrations: %v", err)
	}
	latest, err := pgstore.LatestVersion()
	if err != nil || latest < 1 {
		t.Fatalf("LatestVersion = %d, %v", latest, err)
	}
	if version != int64(latest) || dirty {
		t.Errorf("schema_migrations = (%d, dirty=%v), want (%d, false)", version, dirty, latest)
	}
	for _, table := range []string{"companies", "users", "api_keys"} {
		var exists bool
		if err := pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", table).Scan(&exists); err != nil || !exists {
			t.Errorf("table %s exists = %v (%v)", table, exists, err)
		}
	}
	var kept int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM companies WHERE id = 'co_keep'").Scan(&kept); err != nil || kept != 1 {
		t.Errorf("a row written between the runs survived %d times (%v), want 1", kept, err)
	}
}

func TestMigrateGivesUpOnAHeldLockWhenItsContextEnds(t *testing.T) {
	t.Parallel()
	url := testenv.Postgres(t)
	holder, err := pgstore.Connect(context.Background(), url)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	defer func() { _ = holder.Close(context.Background()) }()
	// The key golang-migrate derives for this database's schema_migrations: another pod's run.
	key, err := database.GenerateAdvisoryLockId(holder.Config().Database, "public", "schema_migrations")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Exec(context.Background(), "SELECT pg_advisory_lock($1::bigint)", key); err != nil {
		t.Fatalf("hold golang-migrate's lock: %v", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- pgstore.Migrate(ctx, url, nil) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "lock") {
			t.Errorf("Migrate while the lock is held = %v, want a lock timeout", err)
		}
	case <-time.After(6 * time.Second):
		t.Fatal("Migrate still waiting for the lock 5s after its context ended")
	}
}

func TestIdentitySchemaEnforcesTheDomain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testenv.Postgres(t)
	if err := pgstore.Migrate(ctx, url, nil); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	pool := openPool(t, url)
	mustExec(t, pool, `INSERT INTO companies (id, kind, name) VALUES ('co_1', 'advertiser', 'Acme')`)
	mustExec(t, pool, `INSERT INTO users (id, company_id, email, role) VALUES ('usr_1', 'co_1', 'Ana@Example.com', 'owner')`)
	mustExec(t, pool, `INSERT INTO api_keys (id, company_id, name, prefix, hash) VALUES ('key_1', 'co_1', 'prod', 'ps_live_ab', sha256('k1'))`)

	const (
		ok              = ""
		checkViolation  = "23514"
		uniqueViolation = "23505"
		fkViolation     = "23503"
		notNull         = "23502"
	)
	tests := []struct {
		name     string
		sql      string
		wantCode string
	}{
		{"an affiliate company with a Spanish locale is accepted", `INSERT INTO companies (id, kind, name, locale) VALUES ('co_2', 'affiliate', 'Ana', 'es')`, ok},
		{"a company of an unknown kind is rejected", `INSERT INTO companies (id, kind, name) VALUES ('co_2', 'publisher', 'X')`, checkViolation},
		{"a company without a kind is rejected", `INSERT INTO companies (id, name) VALUES ('co_2', 'X')`, notNull},
		{"an empty company name is rejected", `INSERT INTO companies (id, kind, name) VALUES ('co_2', 'affiliate', '')`, checkViolation},
		{"a company name of 200 characters is accepted", `INSERT INTO companies (id, kind, name) VALUES ('co_2', 'affiliate', repeat('n', 200))`, ok},
		{"a company name of 201 characters is rejected", `INSERT INTO companies (id, kind, name) VALUES ('co_2', 'affiliate', repeat('n', 201))`, checkViolation},
		{"a company locale other than en or es is rejected", `INSERT INTO companies (id, kind, name, locale) VALUES ('co_2', 'affiliate', 'X', 'fr')`, checkViolation},
		{"a user whose email differs only in case is rejected", `INSERT INTO users (id, company_id, email, role) VALUES ('usr_2', 'co_1', 'ana@EXAMPLE.com', 'member')`, uniqueViolation},
		{"a user of a missing company is rejected", `INSERT INTO users (id, company_id, email, role) VALUES ('usr_2', 'co_none', 'b@example.com', 'member')`, fkViolation},
		{"a user with an unknown role is rejected", `INSERT INTO users (id, company_id, email, role) VALUES ('usr_2', 'co_1', 'b@example.com', 'guest')`, checkViolation},
		{"a user locale other than en or es is rejected", `INSERT INTO users (id, company_id, email, role, locale) VALUES ('usr_2', 'co_1', 'b@example.com', 'admin', 'de')`, checkViolation},
		{"an API key whose hash is not a SHA-256 is rejected", `INSERT INTO api_keys (id, company_id, name, prefix, hash) VALUES ('key_2', 'co_1', 'x', 'ps_', '\x0102')`, checkViolation},
		{"a second API key with the same hash is rejected", `INSERT INTO api_keys (id, company_id, name, prefix, hash) VALUES ('key_2', 'co_1', 'x', 'ps_', sha256('k1'))`, uniqueViolation},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := codeOf(execRolledBack(ctx, pool, tt.sql)); got != tt.wantCode {
				t.Errorf("SQLSTATE = %q, want %q", got, tt.wantCode)
			}
		})
	}

	t.Run("defaults fill locale, name and timestamps", func(t *testing.T) {
		var locale, name string
		var loginNull bool
		err := pool.QueryRow(ctx, `SELECT u.locale, u.name, u.last_login_at IS NULL FROM users u
			JOIN companies c ON c.id = u.company_id WHERE u.id = 'usr_1' AND c.locale = 'en'
			AND c.created_at <= now() AND u.created_at <= now()`).Scan(&locale, &name, &loginNull)
		if err != nil || locale != "en" || name != "" || !loginNull {
			t.Errorf("defaults = (%q, %q, last_login_at null=%v), %v", locale, name, loginNull, err)
		}
	})
	t.Run("deleting a company deletes its users and keys", func(t *testing.T) {
		mustExec(t, pool, `DELETE FROM companies WHERE id = 'co_1'`)
		var left int
		if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM users) + (SELECT count(*) FROM api_keys)`).Scan(&left); err != nil || left != 0 {
			t.Errorf("%d users and keys left (%v), want 0", left, err)
		}
	})
}

// execRolledBack runs sql in a transaction it rolls back, so each case sees the same data.
func execRolledBack(ctx context.Context, pool *pgxpool.Pool, sql string) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, sql)
	return err
}

func codeOf(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	if err != nil {
		return "not a postgres error: " + err.Error()
	}
	return ""
}

func openPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgstore.Open(context.Background(), url)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func mustExec(t *testing.T, pool *pgxpool.Pool, sql string) {
	t.Helper()
	if _, err := pool.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}
