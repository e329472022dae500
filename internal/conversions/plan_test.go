package conversions_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/conversions"
)

// The duplicate reads of registration run in the generic plan Postgres caches for the
// insert: each must use the index made for it, never walk the advertiser's or the program's
// conversions (as LIMIT 1 made the order read do in bench-conversions, and as the customer
// read did while its predicate named the parameter, which keeps a generic plan off the
// partial index conversions_customer).
func TestTheDuplicateReadsUseTheirIndexInTheGenericPlan(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	// A table as registration finds it between two autovacuum analyses: conversions of one
	// advertiser and affiliate that the statistics do not know yet.
	for i, click := range e.clicks(t, e.program, e.aff, e.clock.Now().Add(-time.Hour), 2000) {
		if _, _, err := e.svc.Register(ctx, e.adv, conversions.NewConversion{ClickID: click, ExternalID: fmt.Sprint("plan-", i),
			CustomerID: fmt.Sprint("customer-", i)}); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := e.db.Acquire(ctx)
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
		text := strings.Join(plan, "\n")
		for _, index := range want {
			if !strings.Contains(text, "using "+index+" on") {
				t.Errorf("%s does not use %s:\n%s", name, index, text)
			}
		}
		if strings.Contains(text, "conversions_advertiser") || strings.Contains(text, "conversions_pkey") {
			t.Errorf("%s walks another index:\n%s", name, text)
		}
		if _, err := conn.Exec(ctx, `DEALLOCATE q`); err != nil {
			t.Fatal(err)
		}
	}
}
