package migrate_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/partnerstream/partnerstream/internal/migrate"
	"github.com/partnerstream/partnerstream/internal/store/chstore"
	"github.com/partnerstream/partnerstream/internal/store/pgstore"
	"github.com/partnerstream/partnerstream/internal/testenv"
)

func TestConcurrentRunsAllSucceedAndRecordEachVersionOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pgURL := testenv.Postgres(t)
	addr, db := testenv.ClickHouse(t)

	// Several pods, each with its own ClickHouse connection, started at the same moment.
	const pods = 3
	errs := make([]error, pods)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range pods {
		conn := openClickHouse(t, addr, db)
		wg.Go(func() {
			<-start
			errs[i] = migrate.Run(ctx, pgURL, conn, db, nil)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("run %d: %v", i, err)
		}
	}

	conn := openClickHouse(t, addr, db)
	for _, final := range []string{"FINAL", ""} {
		counts := versionCounts(t, conn, db, final)
		if counts[1] == 0 {
			t.Errorf("schema_migrations (%s) lacks version 1: %v", final, counts)
		}
		for v, n := range counts {
			if n != 1 {
				t.Errorf("version %d recorded %d times (%s), want once", v, n, final)
			}
		}
	}
	assertPostgresMigrated(t, pgURL)
	assertLockFree(t, pgURL)
}

func TestRunWaitsForTheLockOnlyAsLongAsItsContext(t *testing.T) {
	t.Parallel()
	pgURL := testenv.Postgres(t)
	addr, db := testenv.ClickHouse(t)
	ch := openClickHouse(t, addr, db)

	holder, err := pgstore.Connect(context.Background(), pgURL)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	defer func() { _ = holder.Close(context.Background()) }()
	if _, err := holder.Exec(context.Background(), "SELECT pg_advisory_lock($1)", migrate.LockKey); err != nil {
		t.Fatalf("hold the lock: %v", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	err = migrate.Run(ctx, pgURL, ch, db, nil)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run while the lock is held = %v, want a deadline error", err)
	}
	if elapsed := time.Since(start); elapsed > 4*time.Second {
		t.Errorf("Run gave up after %v, want about 1s", elapsed)
	}
	var exists bool
	if err := holder.QueryRow(context.Background(), "SELECT to_regclass('companies') IS NOT NULL").Scan(&exists); err != nil || exists {
		t.Errorf("Postgres migrated without the lock (companies exists=%v, %v)", exists, err)
	}

	if _, err := holder.Exec(context.Background(), "SELECT pg_advisory_unlock($1)", migrate.LockKey); err != nil {
		t.Fatalf("release the lock: %v", err)
	}
	if err := migrate.Run(context.Background(), pgURL, ch, db, nil); err != nil {
		t.Fatalf("Run once the lock is free: %v", err)
	}
	assertPostgresMigrated(t, pgURL)
}

func openClickHouse(t *testing.T, addr, db string) driver.Conn {
	t.Helper()
	conn, err := chstore.Open(context.Background(), chstore.Config{Addr: addr, Database: db})
	if err != nil {
		t.Fatalf("chstore.Open: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// versionCounts counts schema_migrations rows per version. Without FINAL it sees every insert,
// which is what proves that concurrent runs did not both apply a migration.
func versionCounts(t *testing.T, conn driver.Conn, db, final string) map[uint32]uint64 {
	t.Helper()
	rows, err := conn.Query(context.Background(),
		"SELECT version, count() FROM "+db+".schema_migrations "+final+" GROUP BY version")
	if err != nil {
		t.Fatalf("read schema_migrations: %v", err)
	}
	defer func() { _ = rows.Close() }()
	counts := map[uint32]uint64{}
	for rows.Next() {
		var v uint32
		var n uint64
		if err := rows.Scan(&v, &n); err != nil {
			t.Fatalf("scan schema_migrations: %v", err)
		}
		counts[v] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read schema_migrations: %v", err)
	}
	return counts
}

func assertPostgresMigrated(t *testing.T, pgURL string) {
	t.Helper()
	pool, err := pgstore.Open(context.Background(), pgURL)
	if err != nil {
		t.Fatalf("pgstore.Open: %v", err)
	}
	defer pool.Close()
	var version int64
	var dirty bool
	if err := pool.QueryRow(context.Background(), "SELECT version, dirty FROM schema_migrations").Scan(&version, &dirty); err != nil {
		t.Fatalf("read Postgres schema_migrations: %v", err)
	}
	if version < 1 || dirty {
		t.Errorf("Postgres schema_migrations = (%d, dirty=%v), want a clean version >= 1", version, dirty)
	}
}

// assertLockFree fails when a run kept the lock, which would block every later run forever.
func assertLockFree(t *testing.T, pgURL string) {
	t.Helper()
	conn, err := pgstore.Connect(context.Background(), pgURL)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	var got bool
	if err := conn.QueryRow(context.Background(), "SELECT pg_try_advisory_lock($1)", migrate.LockKey).Scan(&got); err != nil || !got {
		t.Errorf("lock %d still held after Run (%v)", migrate.LockKey, err)
	}
}
