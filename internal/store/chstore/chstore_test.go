package chstore

import (
	"bytes"
	"context"
	"io/fs"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/partnerstream/partnerstream/internal/testenv"
)

func TestOpenFailsFast(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  Config
	}{
		{"a closed port is refused within seconds", Config{Addr: "127.0.0.1:1", Database: "partnerstream"}},
		{"an empty address is rejected", Config{}},
		{"a database name that is not an identifier is rejected", Config{Addr: "127.0.0.1:1", Database: "x; DROP DATABASE y"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			conn, err := Open(context.Background(), tt.cfg)
			if err == nil {
				_ = conn.Close()
				t.Fatal("Open succeeded")
			}
			if elapsed := time.Since(start); elapsed > 6*time.Second {
				t.Errorf("took %v to fail, want at most 6s", elapsed)
			}
			if !strings.Contains(err.Error(), "clickhouse") {
				t.Errorf("error %q does not say it is about clickhouse", err)
			}
		})
	}
}

func TestPingAnswersOnALiveConnection(t *testing.T) {
	t.Parallel()
	conn, _ := openTestDatabase(t)
	if err := Ping(context.Background(), conn); err != nil {
		t.Fatalf("Ping: %v", err)
	}
}

func TestMigrateTwiceRecordsEachVersionOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, db := openTestDatabase(t)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))

	for run := 1; run <= 2; run++ {
		if err := Migrate(ctx, conn, db, log); err != nil {
			t.Fatalf("Migrate run %d: %v", run, err)
		}
	}
	if !strings.Contains(logs.String(), "already up to date") {
		t.Errorf("second run did not report an up-to-date schema:\n%s", logs.String())
	}
	want := embeddedVersions(t)
	assertOneRowPerVersion(t, conn, db, want)
}

func TestMigrateCreatesAMissingDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, _ := openTestDatabase(t)
	db := testenv.Name("pst_new")
	t.Cleanup(func() { _ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db) })

	if err := Migrate(ctx, conn, db, nil); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	assertOneRowPerVersion(t, conn, db, embeddedVersions(t))
}

func TestMigrateRejectsADatabaseNameThatIsNotAnIdentifier(t *testing.T) {
	t.Parallel()
	conn, _ := openTestDatabase(t)
	for _, name := range []string{"", "1abc", "a.b", "a-b", "x; DROP DATABASE default"} {
		if err := Migrate(context.Background(), conn, name, nil); err == nil {
			t.Errorf("Migrate accepted database name %q", name)
		}
	}
}

func TestClicksTableAcceptsABatchAndCollapsesReplays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, db := openTestDatabase(t)
	if err := Migrate(ctx, conn, db, nil); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	at := time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)
	batch, err := conn.PrepareBatch(ctx, "INSERT INTO "+db+`.clicks (click_id, occurred_at, link_id,
		program_id, affiliate_id, advertiser_id, promotion_id, sub1, sub2, sub3, sub4, sub5, ip,
		user_agent, referrer, country, is_bot, is_duplicate, kafka_partition, kafka_offset)`)
	if err != nil {
		t.Fatalf("PrepareBatch: %v", err)
	}
	defer func() { _ = batch.Close() }()
	// clk_1 twice: ingest replaying a Kafka message after a restart.
	for i, id := range []string{"clk_1", "clk_1", "clk_2"} {
		err := batch.Append(id, at, "lnk_1", "prg_1", "co_aff", "co_adv", "", "s1", "", "", "", "",
			"203.0.113.7", "Mozilla/5.0", "https://example.com/", "ES", uint8(0), uint8(0), int32(3), int64(100+i))
		if err != nil {
			t.Fatalf("Append: %v", err)
		}
	}
	if err := batch.Send(); err != nil {
		t.Fatalf("Send: %v", err)
	}

	var rows, unique uint64
	var country string
	var occurred time.Time
	err = conn.QueryRow(ctx, "SELECT count(), uniqExact(click_id), any(country), min(occurred_at) FROM "+db+".clicks FINAL").
		Scan(&rows, &unique, &country, &occurred)
	if err != nil {
		t.Fatalf("read clicks: %v", err)
	}
	if rows != 2 || unique != 2 || country != "ES" || !occurred.Equal(at) {
		t.Errorf("got %d rows, %d unique, country %q, occurred_at %v; want 2, 2, ES, %v", rows, unique, country, occurred, at)
	}
}

func TestAFailedMigrationIsRetriedAndRecordedOnlyOnceItSucceeds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, db := openTestDatabase(t)
	const good = "CREATE TABLE IF NOT EXISTS {db}.a (x UInt8) ENGINE = MergeTree ORDER BY x;\n"
	broken := fstest.MapFS{
		"0001_a.sql": {Data: []byte(good)},
		"0002_b.sql": {Data: []byte("CREATE TABLE IF NOT EXISTS {db}.b (x UInt8) ENGINE = MergeTree ORDER BY x;\nSELECT no_such_function();\n")},
	}
	err := migrate(ctx, conn, db, broken, nil)
	if err == nil || !strings.Contains(err.Error(), "0002_b, statement 2 of 2") {
		t.Fatalf("error = %v, want one naming 0002_b, statement 2 of 2", err)
	}
	assertOneRowPerVersion(t, conn, db, []uint32{1})

	fixed := fstest.MapFS{
		"0001_a.sql": broken["0001_a.sql"],
		"0002_b.sql": {Data: []byte("CREATE TABLE IF NOT EXISTS {db}.b (x UInt8) ENGINE = MergeTree ORDER BY x;\nSELECT 1;\n")},
	}
	if err := migrate(ctx, conn, db, fixed, nil); err != nil {
		t.Fatalf("retry: %v", err)
	}
	assertOneRowPerVersion(t, conn, db, []uint32{1, 2})
}

// A retried migration whose ADD COLUMN ran before the crash finds the column there: that
// statement is done, and the rest of the file runs. Other failures still fail.
func TestARetriedMigrationSkipsAColumnItAddedBefore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	conn, db := openTestDatabase(t)
	files := fstest.MapFS{
		"0001_a.sql": {Data: []byte("CREATE TABLE IF NOT EXISTS {db}.a (x UInt8) ENGINE = MergeTree ORDER BY x;\n" +
			"ALTER TABLE {db}.a ADD COLUMN y String DEFAULT 'click';\nSELECT 1;\n")},
	}
	if err := migrate(ctx, conn, db, files, nil); err != nil {
		t.Fatal(err)
	}
	if err := conn.Exec(ctx, "DROP TABLE "+db+".schema_migrations"); err != nil {
		t.Fatal(err)
	}
	if err := migrate(ctx, conn, db, files, nil); err != nil {
		t.Fatalf("retry: %v", err)
	}
	other := fstest.MapFS{"0002_b.sql": {Data: []byte("ALTER TABLE {db}.a ADD COLUMN z NoSuchType;\n")}}
	if err := migrate(ctx, conn, db, other, nil); err == nil {
		t.Fatal("a failing ADD COLUMN of another kind passed")
	}
}

func TestLoadRejectsFilesItCannotOrder(t *testing.T) {
	t.Parallel()
	const stmt = "SELECT 1;"
	tests := []struct {
		name  string
		files fstest.MapFS
		want  string
	}{
		{"a name without a four-digit version", fstest.MapFS{"1_clicks.sql": {Data: []byte(stmt)}}, "NNNN_name.sql"},
		{"two files with one version", fstest.MapFS{"0001_a.sql": {Data: []byte(stmt)}, "0001_b.sql": {Data: []byte(stmt)}}, "share version 1"},
		{"a file with only comments", fstest.MapFS{"0001_a.sql": {Data: []byte("-- nothing;\n")}}, "no statement"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := load(tt.files); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("load error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestSplitStatements(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		sql  string
		want []string
	}{
		{"one statement without a trailing semicolon", "SELECT 1", []string{"SELECT 1"}},
		{"statements end at a line ending in a semicolon", "CREATE TABLE t\n(x UInt8)\nENGINE = Log;\nSELECT 1;  \n", []string{"CREATE TABLE t\n(x UInt8)\nENGINE = Log", "SELECT 1"}},
		{"a semicolon inside a line does not split", "SELECT ';' AS s, 1;\n", []string{"SELECT ';' AS s, 1"}},
		{"a commented-out semicolon does not split", "-- first;\nSELECT\n-- why;\n1;\n", []string{"SELECT\n1"}},
		{"blank text yields nothing", "\n  \n-- only a comment\n", nil},
		{"CRLF line ends are handled", "SELECT 1;\r\nSELECT 2;\r\n", []string{"SELECT 1", "SELECT 2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := splitStatements(tt.sql); !slices.Equal(got, tt.want) {
				t.Errorf("splitStatements(%q) = %q, want %q", tt.sql, got, tt.want)
			}
		})
	}
}

// openTestDatabase connects to the test server and returns a fresh database's name.
func openTestDatabase(t *testing.T) (driver.Conn, string) {
	t.Helper()
	addr, db := testenv.ClickHouse(t)
	conn, err := Open(context.Background(), Config{Addr: addr, Database: db})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn, db
}

func embeddedVersions(t *testing.T) []uint32 {
	t.Helper()
	files, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	migrations, err := load(files)
	if err != nil || len(migrations) == 0 {
		t.Fatalf("embedded migrations: %d, %v", len(migrations), err)
	}
	var versions []uint32
	for _, m := range migrations {
		versions = append(versions, m.version)
	}
	return versions
}

// assertOneRowPerVersion checks the merged view (FINAL) and the raw rows: ReplacingMergeTree
// would hide a version recorded twice from FINAL, so only the raw count proves it was inserted
// once.
func assertOneRowPerVersion(t *testing.T, conn driver.Conn, db string, want []uint32) {
	t.Helper()
	for _, final := range []string{"FINAL", ""} {
		got := map[uint32]uint64{}
		rows, err := conn.Query(context.Background(),
			"SELECT version, count() FROM "+db+".schema_migrations "+final+" GROUP BY version")
		if err != nil {
			t.Fatalf("read schema_migrations: %v", err)
		}
		for rows.Next() {
			var v uint32
			var n uint64
			if err := rows.Scan(&v, &n); err != nil {
				t.Fatalf("scan schema_migrations: %v", err)
			}
			got[v] = n
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("read schema_migrations: %v", err)
		}
		_ = rows.Close()
		if !slices.Equal(slices.Sorted(maps.Keys(got)), want) {
			t.Errorf("versions recorded (%s) = %v, want %v", final, slices.Sorted(maps.Keys(got)), want)
		}
		for v, n := range got {
			if n != 1 {
				t.Errorf("version %d recorded %d times (%s), want once", v, n, final)
			}
		}
	}
}

func TestInListHasAPlaceholderPerValueAndAppendsTheValues(t *testing.T) {
	args := []any{"first"}
	if got := InList(&args, []string{"a", "b"}); got != "(?, ?)" {
		t.Errorf("InList = %q, want (?, ?)", got)
	}
	if len(args) != 3 || args[1] != "a" || args[2] != "b" {
		t.Errorf("args = %v, want [first a b]", args)
	}
}
