// Package pgtest gives a test a fresh Postgres database with every migration applied. It is
// apart from testenv because the migrations' own package tests use testenv.
package pgtest

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/partnerstream/partnerstream/internal/store/pgstore"
	"github.com/partnerstream/partnerstream/internal/testenv"
)

// Migrated creates a migrated database for the test and returns its URL and a pool on it,
// closed when the test ends.
func Migrated(t testing.TB) (string, *pgxpool.Pool) {
	t.Helper()
	url := URL(t)
	pool, err := pgstore.Open(context.Background(), url)
	if err != nil {
		t.Fatalf("pgtest: open: %v", err)
	}
	t.Cleanup(pool.Close)
	return url, pool
}

// URL creates a migrated database for the test, dropped when it ends, and returns its URL.
// The database is a copy of a template that went through pgstore.Migrate once per server and
// set of migrations: copying is a fraction of the cost of running every migration per test.
func URL(t testing.TB) string {
	t.Helper()
	admin := testenv.Require(t, testenv.EnvPostgres)
	tmpl.once.Do(func() { tmpl.name, tmpl.err = migratedTemplate(admin) })
	if tmpl.err != nil {
		t.Fatalf("pgtest: %v", tmpl.err)
	}
	return testenv.PostgresCopy(t, tmpl.name)
}

// tmpl is the template database of this test binary's server.
var tmpl struct {
	once sync.Once
	name string
	err  error
}

// templatePrefix names the template databases; the rest of a name is the migrations' digest,
// so a changed migration gets a template of its own.
const templatePrefix = "pst_template_"

// migratedTemplate returns the name of the template database of the current migrations,
// building it when the server has none. The test binaries of a run share it: an advisory
// lock makes one build it while the others wait, and it gets its name only once migrated,
// so a database of that name is always complete.
func migratedTemplate(admin string) (string, error) {
	digest, err := pgstore.MigrationsDigest()
	if err != nil {
		return "", err
	}
	name := templatePrefix + digest
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", fmt.Errorf("connect to test postgres: %w", err)
	}
	defer conn.Close(context.Background())
	// A session lock: it goes with the connection if this process dies.
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(hashtext('partnerstream pgtest template'))"); err != nil {
		return "", fmt.Errorf("lock the template: %w", err)
	}
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return "", fmt.Errorf("look for %s: %w", name, err)
	}
	if exists {
		return name, nil
	}
	dropStaleTemplates(ctx, conn)
	building := name + "_building"
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+building+" WITH (FORCE)"); err != nil {
		return "", fmt.Errorf("drop an unfinished template: %w", err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+building); err != nil {
		return "", fmt.Errorf("create %s: %w", building, err)
	}
	u, err := url.Parse(admin)
	if err != nil {
		return "", fmt.Errorf("%s is not a URL: %w", testenv.EnvPostgres, err)
	}
	u.Path = "/" + building
	if err := pgstore.Migrate(ctx, u.String(), nil); err != nil {
		return "", fmt.Errorf("migrate the template: %w", err)
	}
	// The migrator's sessions end a moment after it closes them; a database can be renamed,
	// and copied, only once no session is on it.
	for {
		var sessions int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE datname = $1", building).Scan(&sessions); err != nil {
			return "", fmt.Errorf("sessions on %s: %w", building, err)
		}
		if sessions == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("sessions on %s: %d still there: %w", building, sessions, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+building+" RENAME TO "+name); err != nil {
		return "", fmt.Errorf("name the template: %w", err)
	}
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+name+" WITH IS_TEMPLATE true ALLOW_CONNECTIONS false"); err != nil {
		return "", fmt.Errorf("mark %s a template: %w", name, err)
	}
	return name, nil
}

// dropStaleTemplates removes the templates of other migrations (a long-lived developer server
// that saw the migrations change); one still being copied stays, to go the next time.
func dropStaleTemplates(ctx context.Context, conn *pgx.Conn) {
	rows, err := conn.Query(ctx, "SELECT datname FROM pg_database WHERE datname LIKE $1", templatePrefix+"%")
	if err != nil {
		return
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return
	}
	for _, n := range names {
		db := pgx.Identifier{n}.Sanitize()
		_, _ = conn.Exec(ctx, "ALTER DATABASE "+db+" WITH IS_TEMPLATE false")
		_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+db)
	}
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
