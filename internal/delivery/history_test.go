package delivery_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/partnerstream/partnerstream/internal/delivery"
	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/page"
	"github.com/partnerstream/partnerstream/internal/testenv/pgtest"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

type historyFixture struct {
	db        *pgxpool.Pool
	h         *delivery.History
	now       time.Time
	co, peer  string // two companies
	wh, other string // two webhook ids of co
}

func newHistoryFixture(t *testing.T) *historyFixture {
	t.Helper()
	_, db := pgtest.Migrated(t)
	f := &historyFixture{db: db, now: t0.Add(48 * time.Hour), wh: ids.New(ids.Webhook), other: ids.New(ids.Webhook)}
	f.h = delivery.NewHistory(db, func() time.Time { return f.now })
	store := identity.NewStore(db)
	for _, co := range []*string{&f.co, &f.peer} {
		c, _, err := store.CreateCompany(context.Background(), identity.NewCompany{Kind: identity.Advertiser, Name: "co", OwnerEmail: ids.New("u") + "@example.test"})
		if err != nil {
			t.Fatal(err)
		}
		*co = c.ID
	}
	return f
}

// stored is a delivery row as a test writes it; the engine's columns are set directly.
type stored struct {
	company, kind, target, status, eventType string
	created                                  time.Time
	// codes are the status codes of its scheduled attempts (0: no response).
	codes []int
}

// insert writes the delivery and its attempts and returns its id. Ids are time-sortable, so
// rows inserted in order list in reverse order.
func (f *historyFixture) insert(t *testing.T, s stored) string {
	t.Helper()
	if s.kind == "" {
		s.kind, s.target = delivery.KindWebhook, f.wh
	}
	if s.eventType == "" {
		s.eventType = events.ConversionCreated
	}
	if s.created.IsZero() {
		s.created = t0
	}
	id := ids.New(ids.Delivery)
	var next *time.Time
	if s.status == delivery.StatusPending {
		next = &s.created
	}
	ctx := context.Background()
	if _, err := f.db.Exec(ctx, `INSERT INTO deliveries (id, company_id, kind, target_id, url, event_id, event_type, body, status,
		attempts, next_attempt_at, created_at, updated_at) VALUES ($1, $2, $3, $4, 'https://receiver.example/h', $5, $6, '{}', $7, $8, $9, $10, $10)`,
		id, s.company, s.kind, s.target, ids.New(ids.Event), s.eventType, s.status, len(s.codes), next, s.created); err != nil {
		t.Fatal(err)
	}
	for i, code := range s.codes {
		var status *int
		var msg *string
		if code != 0 {
			status = &code
		} else {
			e := "connection refused"
			msg = &e
		}
		if _, err := f.db.Exec(ctx, `INSERT INTO delivery_attempts (delivery_id, n, trigger, started_at, duration_ms, status_code, error, response_excerpt)
			VALUES ($1, $2, 'scheduled', $3, 12, $4, $5, 'nope')`, id, i+1, s.created.Add(time.Duration(i)*time.Minute), status, msg); err != nil {
			t.Fatal(err)
		}
	}
	return id
}

func idsOf(ds []delivery.Delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}

func TestHistoryListsNewestFirstWithAttemptsAndPages(t *testing.T) {
	f := newHistoryFixture(t)
	ctx := context.Background()
	var want []string
	for i := range 5 {
		want = append(want, f.insert(t, stored{company: f.co, status: delivery.StatusFailed, codes: []int{500, 0, 503, 500}[:min(i+1, 4)]}))
	}
	slices.Reverse(want)
	// Another company's delivery to the same target id, and a postback of the company.
	f.insert(t, stored{company: f.peer, status: delivery.StatusFailed})
	pb := f.insert(t, stored{company: f.co, kind: delivery.KindPostback, target: f.co, status: delivery.StatusSucceeded, codes: []int{200}})

	var got []string
	p := page.Request{Limit: 2}
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatal("the pages do not end")
		}
		l, err := f.h.Webhook(ctx, f.co, f.wh, delivery.Filter{}, p)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, idsOf(l.Data)...)
		if l.NextCursor == "" {
			break
		}
		if p, err = page.Parse("2", l.NextCursor); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("listed %v, want %v", got, want)
	}

	l, err := f.h.Webhook(ctx, f.co, f.wh, delivery.Filter{}, page.Request{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	d := l.Data[0] // the fifth: four attempts
	if d.AttemptCount != 4 || len(d.Attempts) != 4 || d.Status != delivery.StatusFailed || d.NextAttemptAt != nil || d.NextTrigger != nil {
		t.Fatalf("delivery %+v", d)
	}
	for i, a := range d.Attempts {
		if a.N != i+1 || a.Trigger != delivery.TriggerScheduled || a.DurationMS != 12 || *a.ResponseExcerpt != "nope" {
			t.Errorf("attempt %d = %+v", i, a)
		}
	}
	if d.Attempts[1].StatusCode != nil || d.Attempts[1].Error == nil || *d.Attempts[1].Error != "connection refused" || *d.Attempts[2].StatusCode != 503 {
		t.Errorf("attempts %+v %+v", d.Attempts[1], d.Attempts[2])
	}

	pbs, err := f.h.Postbacks(ctx, f.co, delivery.Filter{}, page.Request{})
	if err != nil || !slices.Equal(idsOf(pbs.Data), []string{pb}) || len(pbs.Data[0].Attempts) != 1 {
		t.Fatalf("postbacks %+v, %v", pbs, err)
	}
	if peer, err := f.h.Webhook(ctx, f.peer, f.wh, delivery.Filter{}, page.Request{}); err != nil || len(peer.Data) != 1 {
		t.Fatalf("the other company sees %d deliveries, want only its own one (%v)", len(peer.Data), err)
	}
	if peer, err := f.h.Postbacks(ctx, f.peer, delivery.Filter{}, page.Request{}); err != nil || len(peer.Data) != 0 {
		t.Fatalf("the other company sees the postbacks %v (%v)", idsOf(peer.Data), err)
	}
}

func TestHistoryFilters(t *testing.T) {
	f := newHistoryFixture(t)
	failed := f.insert(t, stored{company: f.co, status: delivery.StatusFailed, created: t0})
	ok := f.insert(t, stored{company: f.co, status: delivery.StatusSucceeded, eventType: events.ConversionApproved, created: t0.Add(time.Hour)})
	pending := f.insert(t, stored{company: f.co, status: delivery.StatusPending, created: t0.Add(2 * time.Hour)})
	cases := []struct {
		name   string
		filter delivery.Filter
		want   []string
	}{
		{"no filter lists everything", delivery.Filter{}, []string{pending, ok, failed}},
		{"a status keeps that status", delivery.Filter{Status: delivery.StatusFailed}, []string{failed}},
		{"an event type keeps that type", delivery.Filter{EventType: events.ConversionApproved}, []string{ok}},
		{"from is inclusive", delivery.Filter{From: t0.Add(time.Hour)}, []string{pending, ok}},
		{"to is exclusive", delivery.Filter{To: t0.Add(time.Hour)}, []string{failed}},
		{"filters combine", delivery.Filter{Status: delivery.StatusPending, From: t0, To: t0.Add(time.Hour)}, []string{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l, err := f.h.Webhook(context.Background(), f.co, f.wh, c.filter, page.Request{})
			if err != nil {
				t.Fatal(err)
			}
			if got := idsOf(l.Data); !slices.Equal(got, c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
	l, _ := f.h.Webhook(context.Background(), f.co, f.wh, delivery.Filter{Status: delivery.StatusPending}, page.Request{})
	if d := l.Data[0]; d.NextAttemptAt == nil || !d.NextAttemptAt.Equal(t0.Add(2*time.Hour)) || d.NextTrigger == nil || *d.NextTrigger != delivery.TriggerScheduled {
		t.Errorf("a pending delivery shows its next attempt: %+v", d)
	}
}

func TestReplayQueuesOnlyAFailedDeliveryOfTheCompany(t *testing.T) {
	f := newHistoryFixture(t)
	ctx := context.Background()
	failed := f.insert(t, stored{company: f.co, status: delivery.StatusFailed, codes: []int{500, 500, 500, 500}})
	cases := []struct {
		name   string
		id     string
		status string // the *StateError's, or "" for a success
		err    error
	}{
		{"a pending delivery is a conflict", f.insert(t, stored{company: f.co, status: delivery.StatusPending}), delivery.StatusPending, nil},
		{"a succeeded delivery is a conflict", f.insert(t, stored{company: f.co, status: delivery.StatusSucceeded}), delivery.StatusSucceeded, nil},
		{"another company's failed delivery is not found", f.insert(t, stored{company: f.peer, status: delivery.StatusFailed}), "", delivery.ErrNotFound},
		{"an unknown id is not found", ids.New(ids.Delivery), "", delivery.ErrNotFound},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := f.h.Replay(ctx, f.co, c.id)
			var se *delivery.StateError
			switch {
			case c.err != nil && !errors.Is(err, c.err):
				t.Fatalf("err %v, want %v", err, c.err)
			case c.err == nil && (!errors.As(err, &se) || se.Status != c.status):
				t.Fatalf("err %v, want a conflict in status %s", err, c.status)
			}
		})
	}

	d, err := f.h.Replay(ctx, f.co, failed)
	if err != nil {
		t.Fatal(err)
	}
	if d.ID != failed || d.Status != delivery.StatusPending || d.NextAttemptAt == nil || !d.NextAttemptAt.Equal(f.now) ||
		d.NextTrigger == nil || *d.NextTrigger != delivery.TriggerManual || !d.UpdatedAt.Equal(f.now) || len(d.Attempts) != 4 {
		t.Fatalf("replayed %+v", d)
	}
	var se *delivery.StateError
	if _, err := f.h.Replay(ctx, f.co, failed); !errors.As(err, &se) || se.Status != delivery.StatusPending {
		t.Fatalf("a second replay before the attempt: %v, want a conflict", err)
	}
}

func TestRetryFailedQueuesTheCompanysFailedDeliveries(t *testing.T) {
	cases := []struct {
		name   string
		filter func(f *historyFixture) delivery.RetryFilter
		want   int64
	}{
		{"every failed delivery, webhooks and postbacks", func(*historyFixture) delivery.RetryFilter { return delivery.RetryFilter{} }, 4},
		{"one webhook's", func(f *historyFixture) delivery.RetryFilter { return delivery.RetryFilter{WebhookID: f.wh} }, 2},
		{"the other webhook's", func(f *historyFixture) delivery.RetryFilter { return delivery.RetryFilter{WebhookID: f.other} }, 1},
		{"an unknown webhook's: none", func(*historyFixture) delivery.RetryFilter {
			return delivery.RetryFilter{WebhookID: ids.New(ids.Webhook)}
		}, 0},
		{"a time range, from inclusive and to exclusive", func(*historyFixture) delivery.RetryFilter {
			return delivery.RetryFilter{From: t0.Add(time.Hour), To: t0.Add(3 * time.Hour)}
		}, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newHistoryFixture(t)
			ctx := context.Background()
			f.insert(t, stored{company: f.co, status: delivery.StatusFailed, created: t0})
			f.insert(t, stored{company: f.co, status: delivery.StatusFailed, created: t0.Add(time.Hour)})
			f.insert(t, stored{company: f.co, kind: delivery.KindPostback, target: f.co, status: delivery.StatusFailed, created: t0.Add(2 * time.Hour)})
			f.insert(t, stored{company: f.co, kind: delivery.KindWebhook, target: f.other, status: delivery.StatusFailed, created: t0.Add(3 * time.Hour)})
			f.insert(t, stored{company: f.co, status: delivery.StatusSucceeded, created: t0.Add(time.Hour)})
			f.insert(t, stored{company: f.co, status: delivery.StatusPending, created: t0.Add(time.Hour)})
			f.insert(t, stored{company: f.peer, status: delivery.StatusFailed, created: t0.Add(time.Hour)})
			filter := c.filter(f)
			n, err := f.h.RetryFailed(ctx, f.co, filter)
			if err != nil || n != c.want {
				t.Fatalf("queued %d (%v), want %d", n, err, c.want)
			}
			var manual, peerFailed int64
			if err := f.db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'pending' AND next_trigger = 'manual' AND next_attempt_at = $1 AND company_id = $2),
				count(*) FILTER (WHERE status = 'failed' AND company_id = $3) FROM deliveries`, f.now, f.co, f.peer).Scan(&manual, &peerFailed); err != nil {
				t.Fatal(err)
			}
			if manual != c.want || peerFailed != 1 {
				t.Fatalf("%d rows queued for a manual attempt, want %d; the other company's failed: %d, want 1", manual, c.want, peerFailed)
			}
			if again, err := f.h.RetryFailed(ctx, f.co, filter); err != nil || again != 0 {
				t.Fatalf("a second bulk retry queued %d (%v), want 0: they are pending", again, err)
			}
		})
	}
}
