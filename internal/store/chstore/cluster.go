package chstore

import (
	"fmt"
	"regexp"
	"strings"
)

// The replicated form of the schema (Config.Cluster, docs/stats.md "A replicated ClickHouse")
// is derived from the migrations as they are written for one server, so that every migration,
// today's and those to come, gets it without a second copy: onCluster rewrites one statement.

// replicatedEngines are the engines the rewrite knows: each has a Replicated form that takes
// the ZooKeeper path and the replica name before its own arguments.
var replicatedEngines = map[string]bool{
	"MergeTree":                    true,
	"ReplacingMergeTree":           true,
	"SummingMergeTree":             true,
	"AggregatingMergeTree":         true,
	"CollapsingMergeTree":          true,
	"VersionedCollapsingMergeTree": true,
}

// ddlHead matches the statements that run on every server of the cluster, up to the name of
// what they create or drop: ON CLUSTER goes right after that name.
var ddlHead = regexp.MustCompile(`(?is)^\s*(?:CREATE\s+(?:TABLE|MATERIALIZED\s+VIEW|VIEW|DATABASE)|DROP\s+(?:TABLE|VIEW|DATABASE))\s+(?:IF\s+(?:NOT\s+)?EXISTS\s+)?([A-Za-z0-9_{}]+(?:\.[A-Za-z0-9_{}]+)?)`)

// onceHead matches what runs once, on the replica Migrate is connected to, and reaches the
// others through the table's replication: a backfill (INSERT ... SELECT), and ALTER TABLE,
// which a replicated table applies on every replica from its log in ZooKeeper. ALTER ... ON
// CLUSTER would do the same through the DDL queue, but on ClickHouse 18.16 both replicas of a
// shard race for the task, and the loser's DDL worker fails on "Node exists" and never
// reports, so the statement hangs until distributed_ddl_task_timeout.
var onceHead = regexp.MustCompile(`(?is)^\s*(?:INSERT\s+INTO|ALTER\s+TABLE)\s`)

var createTable = regexp.MustCompile(`(?is)^\s*CREATE\s+TABLE\s`)

var engineClause = regexp.MustCompile(`(?is)\bENGINE\s*=\s*([A-Za-z]+)`)

// onCluster returns stmt as it runs on cluster: CREATE and DROP ON CLUSTER, tables with the Replicated
// form of their engine, whose ZooKeeper path is /clickhouse/tables/{shard}/<database>/<table>
// and replica name {replica} (the macros each server defines). It refuses what it does not
// know how to replicate, so a migration in a new shape fails its tests rather than creating
// an unreplicated table on each server.
func onCluster(stmt, cluster string) (string, error) {
	if onceHead.MatchString(stmt) {
		return stmt, nil
	}
	head := ddlHead.FindStringSubmatchIndex(stmt)
	if head == nil {
		return "", fmt.Errorf("statement %q is neither DDL the replicated rewrite knows (CREATE, DROP, ALTER TABLE) nor a backfill (INSERT)", firstLine(stmt))
	}
	name := stmt[head[2]:head[3]]
	out := stmt[:head[1]] + " ON CLUSTER " + cluster + stmt[head[1]:]
	if !createTable.MatchString(stmt) {
		return out, nil
	}
	return replicatedEngine(out, name)
}

// replicatedEngine turns the table's ENGINE = XMergeTree[(args)] into
// ReplicatedXMergeTree('<path>', '{replica}'[, args]).
func replicatedEngine(stmt, name string) (string, error) {
	m := engineClause.FindStringSubmatchIndex(stmt)
	if m == nil {
		return "", fmt.Errorf("table %s has no ENGINE clause for the replicated rewrite", name)
	}
	engine := stmt[m[2]:m[3]]
	if !replicatedEngines[engine] {
		return "", fmt.Errorf("table %s: engine %s has no replicated form the rewrite knows (known: the MergeTree family)", name, engine)
	}
	db, table, ok := strings.Cut(name, ".")
	if !ok {
		return "", fmt.Errorf("table %s is not named database.table ({db}.name)", name)
	}
	args := fmt.Sprintf("'/clickhouse/tables/{shard}/%s/%s', '{replica}'", db, table)
	rest := stmt[m[1]:]
	if trimmed := strings.TrimLeft(rest, " \t\n"); strings.HasPrefix(trimmed, "(") {
		open := len(rest) - len(trimmed)
		end := closingParen(rest, open)
		if end < 0 {
			return "", fmt.Errorf("table %s: unbalanced parentheses after ENGINE = %s", name, engine)
		}
		if own := strings.TrimSpace(rest[open+1 : end]); own != "" {
			args += ", " + own
		}
		rest = rest[end+1:]
	}
	return stmt[:m[2]] + "Replicated" + engine + "(" + args + ")" + rest, nil
}

// closingParen is the index of the parenthesis that closes the one at open, or -1.
func closingParen(s string, open int) int {
	depth := 0
	for i := open; i < len(s); i++ {
		switch s[i] {
		case '(':
			depth++
		case ')':
			if depth--; depth == 0 {
				return i
			}
		}
	}
	return -1
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return line
}
