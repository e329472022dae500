// Package linkstest seeds the rows tracking links hang off (companies, programs, promotions,
// partnerships) straight into Postgres, for the tests and the redirect benchmark of the
// packages that build on links. It writes SQL rather than calling the programs service so
// those tests depend on the schema only.
package linkstest

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/links"
)

// T is the part of testing.TB the helpers use, so a benchmark program can pass its own.
type T interface {
	Helper()
	Fatalf(format string, args ...any)
}

func exec(t T, db *pgxpool.Pool, sql string, args ...any) {
	t.Helper()
	if _, err := db.Exec(context.Background(), sql, args...); err != nil {
		t.Fatalf("linkstest: %s: %v", sql, err)
	}
}

// Company inserts a company of the kind ("advertiser" or "affiliate") and returns its id.
func Company(t T, db *pgxpool.Pool, kind string) string {
	t.Helper()
	id := ids.New(ids.Company)
	exec(t, db, `INSERT INTO companies (id, kind, name) VALUES ($1, $2, $3)`, id, kind, kind+" "+id[len(id)-6:])
	return id
}

// Program inserts an active program with the landing URL and click parameter ("" keeps the
// default ps_click_id) and returns its id.
func Program(t T, db *pgxpool.Pool, advertiserID, landingURL, clickParam string) string {
	t.Helper()
	id := ids.New(ids.Program)
	exec(t, db, `INSERT INTO programs (id, advertiser_id, name, landing_url, currency, commission_type, commission_value, click_param)
		VALUES ($1, $2, 'Program', $3, 'EUR', 'fixed', 500, COALESCE(NULLIF($4, ''), 'ps_click_id'))`, id, advertiserID, landingURL, clickParam)
	return id
}

// Promotion inserts a promotion of the program and returns its id; landingURL "" and nil
// times mean none.
func Promotion(t T, db *pgxpool.Pool, programID, landingURL string, startsAt, endsAt *time.Time) string {
	t.Helper()
	id := ids.New(ids.Promotion)
	exec(t, db, `INSERT INTO promotions (id, program_id, title, landing_url, starts_at, ends_at) VALUES ($1, $2, 'Promo', NULLIF($3, ''), $4, $5)`,
		id, programID, landingURL, startsAt, endsAt)
	return id
}

// Partnership inserts the affiliate's partnership with the program in the status and
// returns its id.
func Partnership(t T, db *pgxpool.Pool, programID, affiliateID, status string) string {
	t.Helper()
	id := ids.New(ids.Partnership)
	exec(t, db, `INSERT INTO partnerships (id, program_id, affiliate_id, advertiser_id, status)
		SELECT $1, $2, $3, advertiser_id, $4 FROM programs WHERE id = $2`, id, programID, affiliateID, status)
	return id
}

// SetProgramStatus changes a program's status and announces it the way the programs service
// does, with a "program:<id>" notification.
func SetProgramStatus(t T, db *pgxpool.Pool, programID, status string) {
	t.Helper()
	exec(t, db, `WITH u AS (UPDATE programs SET status = $2, updated_at = now() WHERE id = $1 RETURNING id)
		SELECT pg_notify($3, $4) FROM u`, programID, status, links.ChangedChannel, links.ProgramPayload(programID))
}

// SetPartnershipStatus changes a partnership's status and announces its program's links.
func SetPartnershipStatus(t T, db *pgxpool.Pool, partnershipID, status string) {
	t.Helper()
	exec(t, db, `WITH u AS (UPDATE partnerships SET status = $2, updated_at = now() WHERE id = $1 RETURNING program_id)
		SELECT pg_notify($3, 'program:' || program_id) FROM u`, partnershipID, status, links.ChangedChannel)
}
