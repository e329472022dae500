// Package chtest gives a test a fresh ClickHouse database with every migration applied. It is
// apart from testenv because the migrations' own package tests use testenv.
package chtest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/partnerstream/partnerstream/internal/procstat"
	"github.com/partnerstream/partnerstream/internal/store/chstore"
	"github.com/partnerstream/partnerstream/internal/testenv"
)

// Migrated creates a migrated database for the test and returns the server's address, the
// database's name and a connection to it, closed when the test ends.
func Migrated(t testing.TB) (addr, db string, conn driver.Conn) {
	t.Helper()
	ctx := context.Background()
	addr, db = testenv.ClickHouse(t)
	conn, err := chstore.Open(ctx, chstore.Config{Addr: addr, Database: db})
	if err != nil {
		t.Fatalf("chtest: open: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if err := chstore.Migrate(ctx, conn, db, nil); err != nil {
		t.Fatalf("chtest: migrate: %v", err)
	}
	return addr, db, conn
}

// ServerCPU is the CPU time used so far by the ClickHouse server that hack/test.sh started
// under the worktree's .local (for a package directory two levels below the root), zero when
// the tests use a server elsewhere.
func ServerCPU() time.Duration {
	local := os.Getenv("PARTNERSTREAM_LOCAL_DIR")
	if local == "" {
		local = filepath.Join("..", "..", ".local")
	}
	if pid, ok := procstat.PIDFile(filepath.Join(local, "clickhouse", "server.pid")); ok {
		return procstat.CPU(pid)
	}
	return 0
}
