package chstore

import (
	"context"
	"io/fs"
	"regexp"
	"strings"
	"testing"

	"github.com/partnerstream/partnerstream/internal/testenv"
)

// Every embedded migration, today's and any added later, must have a replicated form: a
// migration in a shape the rewrite does not know fails here rather than creating an
// unreplicated table on each server of a cluster.
func TestEveryMigrationHasAReplicatedForm(t *testing.T) {
	t.Parallel()
	files, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	migrations, err := load(files)
	if err != nil {
		t.Fatal(err)
	}
	plainEngine := regexp.MustCompile(`(?i)ENGINE\s*=\s*([A-Za-z]+)`)
	statements := append([]string{}, bookkeeping...)
	for _, m := range migrations {
		statements = append(statements, m.statements...)
	}
	tables := 0
	for _, stmt := range statements {
		got, err := onCluster(stmt, "ps")
		if err != nil {
			t.Errorf("%s: %v", firstLine(stmt), err)
			continue
		}
		if once := strings.ToUpper(strings.TrimSpace(stmt)); strings.HasPrefix(once, "INSERT") || strings.HasPrefix(once, "ALTER") {
			if got != stmt {
				t.Errorf("a statement that runs once was rewritten: %q", got)
			}
			continue
		}
		if !strings.Contains(got, " ON CLUSTER ps") {
			t.Errorf("%s: not ON CLUSTER: %q", firstLine(stmt), got)
		}
		if e := plainEngine.FindStringSubmatch(got); e != nil {
			tables++
			if !strings.HasPrefix(e[1], "Replicated") {
				t.Errorf("%s: engine %s is not replicated", firstLine(stmt), e[1])
			}
			if !strings.Contains(got, "('/clickhouse/tables/{shard}/{db}/") || !strings.Contains(got, "'{replica}'") {
				t.Errorf("%s: no ZooKeeper path and replica macros: %q", firstLine(stmt), got)
			}
		}
	}
	if tables < 12 {
		t.Errorf("rewrote %d tables, want every table of the migrations (at least 12)", tables)
	}
}

func TestOnCluster(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in, want string }{
		{"a table keeps its engine's own arguments after the path and replica",
			"CREATE TABLE IF NOT EXISTS {db}.conversions\n(\n    conversion_id String,\n    version UInt64\n)\nENGINE = ReplacingMergeTree(version)\nORDER BY conversion_id",
			"CREATE TABLE IF NOT EXISTS {db}.conversions ON CLUSTER ps\n(\n    conversion_id String,\n    version UInt64\n)\nENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/{db}/conversions', '{replica}', version)\nORDER BY conversion_id"},
		{"nested arguments",
			"CREATE TABLE {db}.s (a UInt64, b UInt64) ENGINE = SummingMergeTree((a, b)) ORDER BY tuple()",
			"CREATE TABLE {db}.s ON CLUSTER ps (a UInt64, b UInt64) ENGINE = ReplicatedSummingMergeTree('/clickhouse/tables/{shard}/{db}/s', '{replica}', (a, b)) ORDER BY tuple()"},
		{"an engine without arguments",
			"CREATE TABLE {db}.c (x String) ENGINE = MergeTree PARTITION BY x ORDER BY x",
			"CREATE TABLE {db}.c ON CLUSTER ps (x String) ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/{db}/c', '{replica}') PARTITION BY x ORDER BY x"},
		{"a view feeding a table",
			"CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.v_mv TO {db}.v AS\nSELECT x FROM {db}.c",
			"CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.v_mv ON CLUSTER ps TO {db}.v AS\nSELECT x FROM {db}.c"},
		{"an added column reaches the other replicas through the table's replication", "ALTER TABLE {db}.c ADD COLUMN y String DEFAULT ''", "ALTER TABLE {db}.c ADD COLUMN y String DEFAULT ''"},
		{"a dropped view", "DROP TABLE IF EXISTS {db}.v_mv", "DROP TABLE IF EXISTS {db}.v_mv ON CLUSTER ps"},
		{"the database", "CREATE DATABASE IF NOT EXISTS {db}", "CREATE DATABASE IF NOT EXISTS {db} ON CLUSTER ps"},
		{"a backfill runs once", "INSERT INTO {db}.v (x) SELECT x FROM {db}.c", "INSERT INTO {db}.v (x) SELECT x FROM {db}.c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := onCluster(tt.in, "ps")
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestOnClusterRefusesWhatItCannotReplicate(t *testing.T) {
	t.Parallel()
	for stmt, want := range map[string]string{
		"CREATE TABLE {db}.m (x String) ENGINE = Memory":                                    "engine Memory",
		"CREATE TABLE {db}.k (x String) ENGINE = Log":                                       "engine Log",
		"CREATE TABLE {db}.r (x String) ENGINE = ReplicatedMergeTree('/p', 'r') ORDER BY x": "engine ReplicatedMergeTree",
		"CREATE TABLE {db}.n (x String) AS {db}.c":                                          "no ENGINE",
		"RENAME TABLE {db}.a TO {db}.b":                                                     "neither DDL",
		"OPTIMIZE TABLE {db}.c FINAL":                                                       "neither DDL",
		"CREATE TABLE {db}.u (x String) ENGINE = MergeTree((x ORDER BY x":                   "unbalanced",
		"CREATE TABLE nodb (x String) ENGINE = MergeTree ORDER BY x":                        "database.table",
	} {
		_, err := onCluster(stmt, "ps")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one saying %q", stmt, err, want)
		}
	}
}

// A replica that does not answer is passed over, at start and later, and the connection
// stays on the one that answers. (The replicated behaviour itself, against ZooKeeper and two
// servers, is internal/ingest's TestAReplicatedClickHouseKeepsFiguresExactThroughAStoppedReplica.)
func TestReplicasMoveOnFromAnAddressThatDoesNotAnswer(t *testing.T) {
	t.Parallel()
	addr, db := testenv.ClickHouse(t)
	dead := testenv.FreeAddr(t) // nothing listens there
	ctx := context.Background()
	conn, err := Open(ctx, Config{Addr: dead + "," + addr, Database: db, Cluster: "ps"})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer conn.Close()
	r, ok := conn.(*Replicas)
	if !ok {
		t.Fatalf("Open with a cluster returned %T, want *Replicas", conn)
	}
	if got := r.Replica(); got != addr {
		t.Errorf("queries go to %s, want %s, the replica that answers", got, addr)
	}
	var one uint8
	if err := conn.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1: %v, %d", err, one)
	}
	if err := CatchUp(ctx, conn); err != nil {
		t.Errorf("CatchUp on a database without replicated tables: %v", err)
	}
	if _, err := Open(ctx, Config{Addr: dead, Database: db, Cluster: "ps"}); err == nil || !strings.Contains(err.Error(), "no replica answers") {
		t.Errorf("Open with no replica that answers: %v, want an error saying so", err)
	}
	if _, err := Open(ctx, Config{Addr: addr, Database: db, Cluster: "my cluster"}); err == nil || !strings.Contains(err.Error(), "cluster name") {
		t.Errorf("Open with a cluster name that is not an identifier: %v", err)
	}
}
