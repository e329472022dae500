package pgstore

import (
	"context"
	"io/fs"
	"strings"
	"testing"

	"github.com/partnerstream/partnerstream/internal/testenv"
)

// TestDownMigrationsUndoTheirUp applies each up file, its down file, then the up file again:
// a down that forgets an object makes the second up fail with "already exists".
func TestDownMigrationsUndoTheirUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := Open(ctx, testenv.Postgres(t))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer pool.Close()

	ups, err := fs.Glob(migrationFiles, "migrations/*.up.sql")
	if err != nil || len(ups) == 0 {
		t.Fatalf("no up migrations embedded (%v)", err)
	}
	for _, up := range ups {
		down := strings.TrimSuffix(up, ".up.sql") + ".down.sql"
		for _, file := range []string{up, down, up} {
			sql, err := fs.ReadFile(migrationFiles, file)
			if err != nil {
				t.Fatalf("read %s: %v", file, err)
			}
			if _, err := pool.Exec(ctx, string(sql)); err != nil {
				t.Fatalf("apply %s: %v", file, err)
			}
		}
	}
}
