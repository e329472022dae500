package chstore

import (
	"cmp"
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// placeholder stands for the target database in migration files, so that one set of files
// serves every deployment and every per-test database.
const placeholder = "{db}"

// bookkeeping creates what Migrate needs before it can read which migrations have run.
// ReplacingMergeTree keyed by version collapses a version recorded twice (runs that were not
// serialised, or an insert whose acknowledgement was lost) into one row; readers use FINAL.
var bookkeeping = []string{
	"CREATE DATABASE IF NOT EXISTS {db}",
	`CREATE TABLE IF NOT EXISTS {db}.schema_migrations
(version UInt32, name String, applied_at DateTime('UTC'))
ENGINE = ReplacingMergeTree ORDER BY version`,
}

var fileName = regexp.MustCompile(`^([0-9]{4})_([a-z0-9_]+)\.sql$`)

type migration struct {
	version    uint32
	name       string
	statements []string
}

// Migrate creates database if needed and applies, in version order, the embedded migrations it
// has not recorded yet. Each statement must be idempotent (IF NOT EXISTS), because a version is
// recorded only after all its statements ran: a crash in between re-runs the whole file.
// Migrate does not guard against a concurrent run; the caller serialises pods (see
// internal/migrate).
//
// On a connection opened for a cluster (Config.Cluster, Replicas), every statement is
// rewritten for it (onCluster): DDL runs ON CLUSTER, which needs every server of the cluster
// up, and backfills (INSERT ... SELECT) and the bookkeeping's inserts run once, on the replica
// conn uses, and reach the others by replication. schema_migrations is replicated as well, so
// every replica reads the same versions.
func Migrate(ctx context.Context, conn driver.Conn, database string, log *slog.Logger) error {
	files, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return fmt.Errorf("clickhouse: read embedded migrations: %w", err)
	}
	return migrate(ctx, conn, database, files, log)
}

func migrate(ctx context.Context, conn driver.Conn, database string, files fs.FS, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := validateDatabase(database); err != nil {
		return err
	}
	migrations, err := load(files)
	if err != nil {
		return fmt.Errorf("clickhouse: %w", err)
	}
	t := target{database: database}
	if r, ok := conn.(*Replicas); ok {
		t.cluster = r.Cluster()
	}
	for _, stmt := range bookkeeping {
		sql, err := t.statement(stmt)
		if err == nil {
			err = conn.Exec(ctx, sql)
		}
		if err != nil {
			return fmt.Errorf("clickhouse: prepare database %s: %w", database, err)
		}
	}
	done, err := appliedVersions(ctx, conn, database)
	if err != nil {
		return err
	}
	log.Info("clickhouse: migrating", "database", database, "from", latest(done))
	pending := slices.DeleteFunc(migrations, func(m migration) bool { return done[m.version] })
	if len(pending) == 0 {
		log.Info("clickhouse: schema already up to date", "database", database, "version", latest(done))
		return nil
	}
	for _, m := range pending {
		if err := apply(ctx, conn, t, m, log); err != nil {
			return err
		}
		done[m.version] = true
	}
	log.Info("clickhouse: migrated", "database", database, "to", latest(done))
	return nil
}

// target is where migrations apply: a database, on one server or ON CLUSTER.
type target struct {
	database string
	cluster  string // empty: one server
}

// statement is stmt as it runs on the target.
func (t target) statement(stmt string) (string, error) {
	if t.cluster != "" {
		var err error
		if stmt, err = onCluster(stmt, t.cluster); err != nil {
			return "", err
		}
	}
	return qualify(stmt, t.database), nil
}

func apply(ctx context.Context, conn driver.Conn, t target, m migration, log *slog.Logger) error {
	database := t.database
	log.Info("clickhouse: applying migration", "database", database, "cluster", t.cluster, "version", m.version, "name", m.name)
	for i, stmt := range m.statements {
		sql, err := t.statement(stmt)
		if err == nil {
			err = conn.Exec(ctx, sql)
		}
		if err != nil && !columnAlreadyAdded(stmt, err) {
			return fmt.Errorf("clickhouse: migration %04d_%s, statement %d of %d: %w",
				m.version, m.name, i+1, len(m.statements), err)
		}
	}
	if err := record(ctx, conn, database, m); err != nil {
		return fmt.Errorf("clickhouse: record migration %04d_%s: %w", m.version, m.name, err)
	}
	return nil
}

// addColumn matches a statement that adds one column, the only ALTER that cannot say IF NOT
// EXISTS on ClickHouse 18.16.
var addColumn = regexp.MustCompile(`(?is)^\s*ALTER\s+TABLE\s+\S+\s+ADD\s+COLUMN\s+[^,]+$`)

// columnAlreadyAdded reports whether stmt adds a single column and failed because the column
// exists: a migration retried after a crash between its statements finds its own column, and
// that statement is done. ClickHouse answers 44 (ILLEGAL_COLUMN) on 18.16, 15
// (DUPLICATE_COLUMN) on some later versions.
func columnAlreadyAdded(stmt string, err error) bool {
	var ex *clickhouse.Exception
	return addColumn.MatchString(stmt) && errors.As(err, &ex) && (ex.Code == 44 || ex.Code == 15) &&
		strings.Contains(strings.ToLower(ex.Message), "already exists")
}

func appliedVersions(ctx context.Context, conn driver.Conn, database string) (map[uint32]bool, error) {
	rows, err := conn.Query(ctx, qualify("SELECT version FROM {db}.schema_migrations FINAL", database))
	if err != nil {
		return nil, fmt.Errorf("clickhouse: read applied migrations: %w", err)
	}
	defer rows.Close()
	done := map[uint32]bool{}
	for rows.Next() {
		var v uint32
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("clickhouse: read applied migrations: %w", err)
		}
		done[v] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("clickhouse: read applied migrations: %w", err)
	}
	return done, nil
}

// record inserts through PrepareBatch because that is the insert path that works on 18.16 and
// on current servers alike (docs/architecture.md, "The ClickHouse SQL subset").
func record(ctx context.Context, conn driver.Conn, database string, m migration) error {
	batch, err := conn.PrepareBatch(ctx, qualify("INSERT INTO {db}.schema_migrations (version, name, applied_at)", database))
	if err != nil {
		return err
	}
	defer func() { _ = batch.Close() }()
	if err := batch.Append(m.version, m.name, time.Now().UTC()); err != nil {
		return err
	}
	return batch.Send()
}

// load reads and orders every migration file, rejecting names it cannot order so that a
// misnamed file fails the run instead of being skipped.
func load(files fs.FS) ([]migration, error) {
	names, err := fs.Glob(files, "*.sql")
	if err != nil {
		return nil, fmt.Errorf("list migrations: %w", err)
	}
	var migrations []migration
	seen := map[uint32]string{}
	for _, name := range names {
		m, err := loadFile(files, name)
		if err != nil {
			return nil, err
		}
		if other, dup := seen[m.version]; dup {
			return nil, fmt.Errorf("migrations %s and %s share version %d", other, name, m.version)
		}
		seen[m.version] = name
		migrations = append(migrations, m)
	}
	slices.SortFunc(migrations, func(a, b migration) int { return cmp.Compare(a.version, b.version) })
	return migrations, nil
}

func loadFile(files fs.FS, name string) (migration, error) {
	parts := fileName.FindStringSubmatch(name)
	if parts == nil {
		return migration{}, fmt.Errorf("migration file %s is not named NNNN_name.sql", name)
	}
	version, err := strconv.ParseUint(parts[1], 10, 32)
	if err != nil {
		return migration{}, fmt.Errorf("migration file %s: version: %w", name, err)
	}
	body, err := fs.ReadFile(files, name)
	if err != nil {
		return migration{}, fmt.Errorf("read migration %s: %w", name, err)
	}
	statements := splitStatements(string(body))
	if len(statements) == 0 {
		return migration{}, fmt.Errorf("migration file %s holds no statement", name)
	}
	return migration{version: uint32(version), name: parts[2], statements: statements}, nil
}

// splitStatements cuts a file into statements, because the native protocol takes one per
// query. A statement ends at a line whose last non-blank character is ';'. Whole-line comments
// are dropped first, so a ';' in a comment cannot end a statement.
func splitStatements(sql string) []string {
	var statements []string
	var current strings.Builder
	for line := range strings.Lines(sql) {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "--") {
			continue
		}
		if !strings.HasSuffix(trimmed, ";") {
			current.WriteString(line)
			continue
		}
		current.WriteString(strings.TrimSuffix(trimmed, ";"))
		statements = appendStatement(statements, current.String())
		current.Reset()
	}
	return appendStatement(statements, current.String())
}

func appendStatement(statements []string, s string) []string {
	if s = strings.TrimSpace(s); s != "" {
		statements = append(statements, s)
	}
	return statements
}

func qualify(stmt, database string) string {
	return strings.ReplaceAll(stmt, placeholder, database)
}

// latest names the highest applied version for logs.
func latest(done map[uint32]bool) string {
	if len(done) == 0 {
		return "none"
	}
	var top uint32
	for v := range done {
		top = max(top, v)
	}
	return fmt.Sprint(top)
}
