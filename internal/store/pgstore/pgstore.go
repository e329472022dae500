// Package pgstore connects to Postgres, the store of everything transactional, and owns its
// schema migrations.
package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// connectTimeout bounds dialling and pinging so that an unreachable server fails a pod's start
// in seconds, with a clear error, instead of hanging until the kernel gives up on TCP.
const connectTimeout = 5 * time.Second

// Open returns a pool connected to the database at url, once the server has answered a ping.
// The caller closes the pool.
func Open(ctx context.Context, url string) (*pgxpool.Pool, error) {
	cfg, err := parseConfig(url)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: create pool for %s: %w", target(cfg.ConnConfig.Config), err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: ping %s: %w", target(cfg.ConnConfig.Config), err)
	}
	return pool, nil
}

// Connect returns one dedicated connection, for session-scoped state a pool would lose between
// calls, such as an advisory lock. The caller closes it.
func Connect(ctx context.Context, url string) (*pgx.Conn, error) {
	cfg, err := parseConfig(url)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
	if err != nil {
		return nil, fmt.Errorf("postgres: connect to %s: %w", target(cfg.ConnConfig.Config), err)
	}
	return conn, nil
}

// parseConfig parses a URL or keyword/value connection string. Parsing through pgxpool strips
// the pool_* settings, so the connection config it holds is also safe to use on its own.
func parseConfig(url string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: invalid connection string: %w", redact(err, url))
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = connectTimeout
	}
	return cfg, nil
}

// target names a server in errors and logs without its password.
func target(cfg pgconn.Config) string {
	return fmt.Sprintf("%s@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, cfg.Database)
}
