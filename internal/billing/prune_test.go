package billing_test

import (
	"context"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/billing"
)

// Pruning deletes the event ids and unmatched reversals older than the retention and keeps
// the younger ones, so a redelivery within it is still recognised.
func TestPruneKeepsEventIdsForTheirRetention(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	old, young := time.Now().Add(-billing.EventRetention-time.Hour), time.Now().Add(-billing.EventRetention+time.Hour)
	for i, at := range []time.Time{old, young} {
		e.exec(t, `INSERT INTO stripe_events (program_id, event_id, type, outcome, received_at) VALUES ($1, $2, 'invoice.paid', 'registered', $3)`,
			e.program, []string{"evt_old", "evt_young"}[i], at)
		e.exec(t, `INSERT INTO stripe_reversals (program_id, ref, reason, received_at) VALUES ($1, $2, 'refund', $3)`,
			e.program, []string{"ch_old", "ch_young"}[i], at)
	}
	n, err := e.svc.Prune(ctx)
	if err != nil || n != 2 {
		t.Fatalf("Prune deleted %d rows (%v), want the old event and the old reversal", n, err)
	}
	if got := e.count(t, `SELECT count(*) FROM stripe_events WHERE event_id = 'evt_young'`) +
		e.count(t, `SELECT count(*) FROM stripe_reversals WHERE ref = 'ch_young'`); got != 2 {
		t.Fatalf("%d of the young event and reversal are left, want both", got)
	}
}
