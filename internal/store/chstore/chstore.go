// Package chstore connects to ClickHouse, the store of click and conversion statistics, and
// owns its schema migrations.
//
// Everything here sticks to the SQL subset of docs/architecture.md ("The ClickHouse SQL
// subset"), which runs on ClickHouse 18.16 as well as on current versions, over the native
// protocol.
package chstore

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// connectTimeout bounds dialling and pinging so that an unreachable server fails a pod's start
// in seconds, with a clear error, instead of after the driver's default of 30 s.
const connectTimeout = 5 * time.Second

// Config locates a ClickHouse server and the database PartnerStream keeps its tables in.
type Config struct {
	// Addr is host:port of the native protocol; several, comma-separated, for replicas.
	Addr string
	// Database holds PartnerStream's tables. Open does not select it (it may not exist before
	// Migrate creates it); queries name their tables as database.table instead.
	Database string
	Username string
	Password string
	// Cluster, when set, names the cluster (remote_servers) of a replicated ClickHouse: Open
	// returns Replicas over the addresses, and Migrate creates the schema ON CLUSTER with
	// replicated engines. Empty: one server, plain MergeTree engines.
	Cluster string
}

// identifier matches the database names that are safe to splice into SQL unquoted.
var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Open connects to the server over the native protocol and pings it; with cfg.Cluster, to the
// replicas of the cluster, one at a time (Replicas). The caller closes the connection.
func Open(ctx context.Context, cfg Config) (driver.Conn, error) {
	addrs := splitAddrs(cfg.Addr)
	if len(addrs) == 0 {
		return nil, errors.New("clickhouse: no server address configured")
	}
	if cfg.Database != "" {
		if err := validateDatabase(cfg.Database); err != nil {
			return nil, err
		}
	}
	if cfg.Cluster != "" {
		if err := validateCluster(cfg.Cluster); err != nil {
			return nil, err
		}
		if cfg.Database == "" {
			return nil, errors.New("clickhouse: a replicated ClickHouse needs the database named, to catch replicas up on it")
		}
		return openReplicas(ctx, cfg, addrs)
	}
	conn, err := clickhouse.Open(&clickhouse.Options{
		Addr:        addrs,
		Auth:        clickhouse.Auth{Database: "default", Username: cfg.Username, Password: cfg.Password},
		DialTimeout: connectTimeout,
	})
	if err != nil {
		return nil, fmt.Errorf("clickhouse: open %s: %w", cfg.Addr, err)
	}
	if err := ping(ctx, conn); err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("clickhouse: connect to %s: %w", cfg.Addr, err)
	}
	return conn, nil
}

// Ping checks that the server answers within a few seconds, for readiness probes.
func Ping(ctx context.Context, conn driver.Conn) error {
	if err := ping(ctx, conn); err != nil {
		return fmt.Errorf("clickhouse: ping: %w", err)
	}
	return nil
}

func ping(ctx context.Context, conn driver.Conn) error {
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	return conn.Ping(ctx)
}

func splitAddrs(addr string) []string {
	var addrs []string
	for a := range strings.SplitSeq(addr, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	return addrs
}

func validateCluster(name string) error {
	if !identifier.MatchString(name) {
		return fmt.Errorf("clickhouse: cluster name %q is not a plain identifier (letters, digits, _)", name)
	}
	return nil
}

func validateDatabase(name string) error {
	if !identifier.MatchString(name) {
		return fmt.Errorf("clickhouse: database name %q is not a plain identifier (letters, digits, _)", name)
	}
	return nil
}

// InList is an IN list of a placeholder per value, "(?, ?)", whose values it appends to args:
// the driver binds a slice as an array, which IN does not take.
func InList(args *[]any, values []string) string {
	marks := make([]string, len(values))
	for i, v := range values {
		marks[i] = "?"
		*args = append(*args, v)
	}
	return "(" + strings.Join(marks, ", ") + ")"
}
