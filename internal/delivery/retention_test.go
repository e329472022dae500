package delivery_test

import (
	"context"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/delivery"
	"github.com/partnerstream/partnerstream/internal/ids"
)

// idAt is a delivery id made at t, as New would have made it then.
func idAt(t time.Time, n int) string {
	b, _ := ids.Bytes(ids.Delivery, ids.Floor(ids.Delivery, t))
	b[8], b[14], b[15] = 0x80, byte(n>>8), byte(n)
	return ids.FromBytes(ids.Delivery, b)
}

func TestRetentionDeletesOnlyHistoryOlderThanThePeriod(t *testing.T) {
	f := newHistoryFixture(t)
	ctx := context.Background()
	now := t0.Add(90 * 24 * time.Hour)
	old, young := now.Add(-31*24*time.Hour), now.Add(-29*24*time.Hour)
	// insert writes a delivery created at created, last changed at updated, with one attempt.
	insert := func(n int, status string, created, updated time.Time) string {
		t.Helper()
		id := idAt(created, n)
		var next *time.Time
		if status == delivery.StatusPending {
			next = &updated
		}
		if _, err := f.db.Exec(ctx, `INSERT INTO deliveries (id, company_id, kind, target_id, url, event_id, event_type, body, status,
			attempts, next_attempt_at, created_at, updated_at) VALUES ($1, $2, 'webhook', $3, 'https://receiver.example/h', $4, 'conversion.created', '{}', $5, 1, $6, $7, $8)`,
			id, f.co, f.wh, ids.New(ids.Event), status, next, created, updated); err != nil {
			t.Fatal(err)
		}
		if _, err := f.db.Exec(ctx, `INSERT INTO delivery_attempts (delivery_id, n, trigger, started_at, duration_ms, status_code)
			VALUES ($1, 1, 'scheduled', $2, 12, 500)`, id, created); err != nil {
			t.Fatal(err)
		}
		return id
	}
	// More old rows than one batch deletes, so the job has to loop.
	const oldRows = 2345
	for n := range oldRows {
		status := delivery.StatusSucceeded
		if n%3 == 0 {
			status = delivery.StatusFailed
		}
		insert(n, status, old.Add(-time.Duration(n)*time.Minute), old.Add(-time.Duration(n)*time.Minute))
	}
	kept := []string{
		insert(10_001, delivery.StatusSucceeded, young, young),                                                              // younger than the period
		insert(10_002, delivery.StatusFailed, old, young),                                                                   // old, but replayed since
		insert(10_003, delivery.StatusPending, old, old),                                                                    // old, still pending
		insert(10_004, delivery.StatusFailed, now.Add(-30*24*time.Hour+time.Minute), now.Add(-30*24*time.Hour+time.Minute)), // just inside
	}

	r := delivery.Retention{DB: f.db, Keep: 30 * 24 * time.Hour, Now: func() time.Time { return now }}
	deleted, err := r.Prune(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if deleted != oldRows {
		t.Errorf("deleted %d deliveries, want %d", deleted, oldRows)
	}
	var left []string
	rows, err := f.db.Query(ctx, `SELECT id FROM deliveries ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		left = append(left, id)
	}
	if len(left) != len(kept) {
		t.Fatalf("%d deliveries left, want the %d kept ones", len(left), len(kept))
	}
	for _, id := range kept {
		var attempts int
		if err := f.db.QueryRow(ctx, `SELECT count(*) FROM delivery_attempts WHERE delivery_id = $1`, id).Scan(&attempts); err != nil || attempts != 1 {
			t.Errorf("delivery %s kept %d attempts (%v), want 1", id, attempts, err)
		}
	}
	var orphans int
	if err := f.db.QueryRow(ctx, `SELECT count(*) FROM delivery_attempts`).Scan(&orphans); err != nil || orphans != len(kept) {
		t.Errorf("%d attempts left (%v), want %d", orphans, err, len(kept))
	}

	// The replayed one stays replayable until its own period ends.
	if again, err := r.Prune(ctx); err != nil || again != 0 {
		t.Errorf("a second run deleted %d (%v), want 0", again, err)
	}
	if _, err := f.h.Replay(ctx, f.co, kept[1]); err != nil {
		t.Errorf("replay of a failed delivery inside the period: %v", err)
	}
}

func TestRetentionRefusesAnEmptyPeriod(t *testing.T) {
	if _, err := (delivery.Retention{Keep: 0}).Prune(context.Background()); err == nil {
		t.Fatal("a zero period deleted history")
	}
}
