package conversions_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/partnerstream/partnerstream/internal/conversions"
)

// The duplicate reads of registration run in the generic plan Postgres caches for the
// insert: each must use the index made for it, never walk the advertiser's or the program's
// conversions (as LIMIT 1 made the order read do in bench-conversions, and as the customer
// read did while its predicate named the parameter, which keeps a generic plan off the
// partial index conversions_customer). It must hold whatever the statistics say: a
// connection plans the statement once and keeps the plan until an analysis replaces the
// statistics, so a plan made on a new, never-analysed table (where every index looked as
// cheap and the order read walked conversions_advertiser) serves thousands of conversions.
func TestTheDuplicateReadsUseTheirIndexInTheGenericPlan(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	checkDuplicatePlans(t, e.db, "an empty table never analysed")
	var analysed bool
	if err := e.db.QueryRow(ctx, `SELECT reltuples >= 0 FROM pg_class WHERE oid = 'conversions'::regclass`).Scan(&analysed); err != nil {
		t.Fatal(err)
	}
	if analysed {
		t.Fatal("the new table has statistics already: the first case tested nothing")
	}
	// Statistics of a nearly empty table make a scan of its page or two the cheapest plan,
	// which connections then keep while the table grows: autovacuum must not take them.
	var threshold int
	if err := e.db.QueryRow(ctx, `SELECT COALESCE((SELECT split_part(o, '=', 2)::int FROM pg_class c, unnest(c.reloptions) o
		WHERE c.oid = 'conversions'::regclass AND o LIKE 'autovacuum_analyze_threshold=%'), 50)`).Scan(&threshold); err != nil {
		t.Fatal(err)
	}
	if threshold < 5000 {
		t.Errorf("autovacuum analyses the conversions after %d changes: a plan made from those statistics scans the table", threshold)
	}
	// Conversions of one advertiser and affiliate, as registration finds them between two
	// autovacuum analyses: the statistics do not know them yet. A few (the table's first page,
	// where the advertiser's index cost as little) and then many.
	for i, click := range e.clicks(t, e.program, e.aff, e.clock.Now().Add(-time.Hour), 2000) {
		if _, _, err := e.svc.Register(ctx, e.adv, conversions.NewConversion{ClickID: click, ExternalID: fmt.Sprint("plan-", i),
			CustomerID: fmt.Sprint("customer-", i)}); err != nil {
			t.Fatal(err)
		}
		if i == 19 {
			checkDuplicatePlans(t, e.db, "20 conversions never analysed")
		}
	}
	checkDuplicatePlans(t, e.db, "2,000 conversions the statistics may not know")
	if _, err := e.db.Exec(ctx, `ANALYZE conversions`); err != nil {
		t.Fatal(err)
	}
	checkDuplicatePlans(t, e.db, "an analysed table")
}

// checkDuplicatePlans explains the duplicate reads in the generic plan, as the table is now.
func checkDuplicatePlans(t *testing.T, db *pgxpool.Pool, table string) {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	// The insert's parameters, by number: the reads use $2, $3, $4, $11, $21 and $22.
	types := make([]string, 22)
	for i := range types {
		types[i] = "text"
	}
	types[21] = "bytea"
	args := strings.Repeat("'x', ", 21) + "'\\x00'::bytea"
	if _, err := conn.Exec(ctx, `SET plan_cache_mode = force_generic_plan`); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = conn.Exec(ctx, `RESET plan_cache_mode`) }()
	for name, want := range map[string][]string{
		"duplicate_order":    {"conversions_order"},
		"duplicate_customer": {"conversions_customer", "conversions_customer_email"},
	} {
		sql := conversions.Duplicates[1][0]
		if name == "duplicate_customer" {
			sql = conversions.Duplicates[0][1]
		}
		if _, err := conn.Exec(ctx, `PREPARE q(`+strings.Join(types, ", ")+`) AS SELECT `+sql); err != nil {
			t.Fatal(err)
		}
		rows, err := conn.Query(ctx, `EXPLAIN EXECUTE q(`+args+`)`)
		if err != nil {
			t.Fatal(err)
		}
		var plan []string
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, line)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		text := strings.Join(plan, "\n")
		for _, index := range want {
			// An index scan says "using <index> on", a bitmap one "Index Scan on <index>".
			if !strings.Contains(text, "using "+index+" on") && !strings.Contains(text, "Index Scan on "+index+" ") {
				t.Errorf("%s: %s does not use %s:\n%s", table, name, index, text)
			}
		}
		if strings.Contains(text, "conversions_advertiser") || strings.Contains(text, "conversions_pkey") {
			t.Errorf("%s: %s walks another index:\n%s", table, name, text)
		}
		if _, err := conn.Exec(ctx, `DEALLOCATE q`); err != nil {
			t.Fatal(err)
		}
	}
}
