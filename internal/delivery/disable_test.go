package delivery

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/testenv"
)

func TestATargetFailingForDaysIsDisabledAndItsPendingDeliveriesFail(t *testing.T) {
	t.Parallel()
	db, cos := newDB(t, 3)
	rc := newReceiver(t, nil)
	sub, pbs, susp, clk := newSubs(), newPostbacks(), &suspended{}, testenv.NewClock()
	hook, _ := sub.add(cos[0], rc.URL+"/hook", events.ConversionCreated)
	pbs.set(cos[0], rc.URL+"/postback")
	young, _ := sub.add(cos[1], rc.URL+"/young", events.ConversionCreated)
	quiet, _ := sub.add(cos[2], rc.URL+"/quiet", events.ConversionCreated)
	s := newService(t, db, Options{Subscriptions: sub, Postbacks: pbs, Suspender: susp, Now: clk.Now, Jitter: func() float64 { return 0 }})
	ctx := context.Background()
	now := clk.Now()
	// failing writes a target's health: failing since then, last failed at last.
	failing := func(kind, id, company string, since, last time.Time) {
		t.Helper()
		if _, err := db.Exec(ctx, `INSERT INTO delivery_endpoints (kind, target_id, company_id, consecutive_failures, open_until, last_failure_at, failing_since, updated_at)
			VALUES ($1, $2, $3, 900, $4, $5, $6, $5)`, kind, id, company, now.Add(time.Minute), last, since); err != nil {
			t.Fatal(err)
		}
	}
	failing(KindWebhook, hook.ID, cos[0], now.Add(-6*24*time.Hour), now.Add(-time.Hour))
	failing(KindPostback, cos[0], cos[0], now.Add(-6*24*time.Hour), now.Add(-time.Hour))
	failing(KindWebhook, young.ID, cos[1], now.Add(-4*24*time.Hour), now.Add(-time.Hour))      // not for 5 days yet
	failing(KindWebhook, quiet.ID, cos[2], now.Add(-6*24*time.Hour), now.Add(-2*24*time.Hour)) // no failure lately
	for _, co := range cos {
		if _, err := s.record(ctx, []events.Envelope{envelope(events.CommissionStatusChanged, co, ""), envelope(events.ConversionCreated, co, "")}); err != nil {
			t.Fatal(err)
		}
	}

	if err := s.disableDead(ctx); err != nil {
		t.Fatal(err)
	}
	if got := susp.list(); len(got) != 1 || got[0] != hook.ID {
		t.Fatalf("suspended %v, want only the webhook failing for 6 days, %s", got, hook.ID)
	}
	for _, r := range rows(t, db, "") {
		dead := r.company == cos[0]
		if want := map[bool]string{true: StatusFailed, false: StatusPending}[dead]; r.status != want {
			t.Errorf("%s delivery of %s: status %s, want %s", r.kind, r.target, r.status, want)
		}
		if dead && !strings.Contains(deref(r.lastError), "disabled: no successful delivery since") {
			t.Errorf("a delivery failed by the disabling says %s", deref(r.lastError))
		}
	}
	h := NewHistory(db, clk.Now)
	health, err := h.Health(ctx, cos[0], KindPostback, cos[0])
	if err != nil || health.Breaker != BreakerDisabled || health.DisabledAt == nil || health.OpenUntil != nil || health.FailedSinceFailing != 1 {
		t.Fatalf("the disabled postback's health is %+v (%v), want disabled, no breaker, 1 failed delivery since it began failing", health, err)
	}
	if again := s.disableDead(ctx); again != nil || len(susp.list()) != 1 {
		t.Errorf("a second run: %v, suspended %v; want nothing more", again, susp.list())
	}

	// A disabled postback URL fails its new deliveries at once, without sending them.
	if _, err := s.record(ctx, []events.Envelope{envelope(events.CommissionStatusChanged, cos[0], "")}); err != nil {
		t.Fatal(err)
	}
	s.step(t)
	if n := len(rc.requests()); n != 0 {
		t.Errorf("the receiver got %d requests from disabled targets", n)
	}
	failed := rows(t, db, "WHERE kind = 'postback' AND company_id = $1 AND status = 'failed' AND last_error LIKE '%re-enable it%'", cos[0])
	if len(failed) != 1 {
		t.Errorf("%d new postback deliveries failed naming the disabling, want 1", len(failed))
	}

	// Re-enabled: it says what failed meanwhile, a bulk retry from then replays it, and it is sent.
	re, err := h.EnablePostback(ctx, cos[0])
	if err != nil || re.FailingSince == nil || !re.FailingSince.Equal(now.Add(-6*24*time.Hour)) || re.Failed != 2 || re.Endpoint.Breaker != BreakerClosed {
		t.Fatalf("EnablePostback = %+v, %v; want failing since 6 days, 2 failed, closed", re, err)
	}
	n, err := h.RetryFailed(ctx, cos[0], RetryFilter{Postbacks: true, From: *re.FailingSince})
	if err != nil || n != 2 {
		t.Fatalf("retrying the postbacks queued %d (%v), want 2", n, err)
	}
	s.step(t)
	if got := rc.requests(); len(got) != 2 || got[0].header.Get(pathHeader) != "/postback" {
		t.Errorf("after re-enabling, the receiver got %d requests, want the 2 postbacks", len(got))
	}
}
