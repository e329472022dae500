package delivery

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/events"
)

func TestCooldownDoublesFromThirtySecondsUpToFiveMinutes(t *testing.T) {
	for failures, want := range map[int]time.Duration{5: 30 * time.Second, 6: time.Minute, 7: 2 * time.Minute, 8: 4 * time.Minute, 9: 5 * time.Minute, 1000: 5 * time.Minute} {
		if got := cooldown(failures); got != want {
			t.Errorf("cooldown(%d) = %s, want %s", failures, got, want)
		}
	}
}

func TestObserve(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	fail := func(s int) observation { return observation{at: at(s)} }
	ok := func(s int) observation { return observation{at: at(s), ok: true} }
	now := at(100)
	tests := []struct {
		name   string
		before endpoint
		obs    []observation
		want   endpoint
	}{
		{"four failures in a row leave the breaker closed", endpoint{}, []observation{fail(1), fail(2), fail(3), fail(4)},
			endpoint{failures: 4, lastFailure: at(4), failingSince: at(1)}},
		{"the fifth failure in a row opens it for 30 seconds", endpoint{failures: 4, lastFailure: at(4), failingSince: at(1)}, []observation{fail(5)},
			endpoint{failures: 5, lastFailure: at(5), failingSince: at(1), openUntil: now.Add(30 * time.Second)}},
		{"a failed probe opens it again for twice as long", endpoint{failures: 5, failingSince: at(1), openUntil: at(50)}, []observation{fail(60)},
			endpoint{failures: 6, lastFailure: at(60), failingSince: at(1), openUntil: now.Add(time.Minute)}},
		{"a success closes it and ends the failing period", endpoint{failures: 9, failingSince: at(1), openUntil: at(50)}, []observation{ok(60)},
			endpoint{lastSuccess: at(60)}},
		{"failures after a success in the same batch count from that success", endpoint{failures: 3, failingSince: at(1)}, []observation{fail(2), ok(3), fail(4), fail(5)},
			endpoint{failures: 2, lastSuccess: at(3), lastFailure: at(5), failingSince: at(4)}},
		{"an attempt sent to a disabled target means it is active again: it counts afresh", endpoint{failures: 900, failingSince: at(1), disabled: at(10), notified: at(11), lastSuccess: at(0)}, []observation{fail(20)},
			endpoint{failures: 1, failingSince: at(20), lastFailure: at(20), lastSuccess: at(0)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.before.observe(tt.obs, now); got != tt.want {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

// endpointRow reads a target's stored health.
func endpointRow(t *testing.T, s *Service, kind, id string) (failures int, openUntil, probeUntil *time.Time) {
	t.Helper()
	err := s.o.DB.QueryRow(context.Background(), `SELECT consecutive_failures, open_until, probe_until FROM delivery_endpoints WHERE kind = $1 AND target_id = $2`,
		kind, id).Scan(&failures, &openUntil, &probeUntil)
	if err != nil {
		t.Fatal(err)
	}
	return failures, openUntil, probeUntil
}

func TestABreakerOpensAfterFiveFailuresHoldsDeliveriesAndLetsOneReplicaProbe(t *testing.T) {
	t.Parallel()
	var alive atomic.Bool
	f := newFixture(t, func(w http.ResponseWriter, _ *http.Request) {
		if alive.Load() {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}, Options{})
	// A second replica on the same database and clock.
	other := newService(t, f.db, Options{Subscriptions: f.sub, Now: f.clk.Now, Jitter: func() float64 { return 0.5 }})
	for range 5 {
		f.enqueue(t)
	}
	if outs := f.s.step(t); len(outs) != 5 || len(f.rc.requests()) != 5 {
		t.Fatalf("%d attempts, %d requests; want the 5 sent", len(outs), len(f.rc.requests()))
	}
	failures, openUntil, _ := endpointRow(t, f.s, KindWebhook, f.hook.ID)
	if failures != 5 || openUntil == nil || !openUntil.Equal(f.clk.Now().Add(30*time.Second)) {
		t.Fatalf("after 5 failures: %d failures, open until %v; want 5, open 30 s", failures, openUntil)
	}

	// While open, new deliveries are held on either replica, their attempts unused.
	held := []string{f.enqueue(t), f.enqueue(t), f.enqueue(t)}
	f.s.step(t)
	other.step(t)
	if n := len(f.rc.requests()); n != 5 {
		t.Errorf("the receiver got %d requests while the breaker was open, want the 5 before", n)
	}
	for _, id := range held {
		r := rows(t, f.db, "WHERE id = $1", id)[0]
		if r.status != StatusPending || r.attempts != 0 || r.next == nil || !r.next.Equal(*openUntil) || !strings.Contains(deref(r.lastError), "circuit breaker is open") {
			t.Errorf("a delivery while open: status %s, %d attempts, next %v, error %s; want pending, no attempt, held until %s, naming the breaker",
				r.status, r.attempts, r.next, deref(r.lastError), openUntil)
		}
	}

	// After the cool-down, several deliveries are due at both replicas: one probe is sent,
	// the others wait for it.
	f.clk.Advance(31 * time.Second)
	var wg sync.WaitGroup
	for _, s := range []*Service{f.s, other} {
		wg.Go(func() { s.step(t) })
	}
	wg.Wait()
	if n := len(f.rc.requests()); n != 6 {
		t.Fatalf("the receiver got %d requests after the cool-down, want 5 + one probe", n)
	}
	failures, openUntil, probe := endpointRow(t, f.s, KindWebhook, f.hook.ID)
	if failures != 6 || openUntil == nil || !openUntil.Equal(f.clk.Now().Add(time.Minute)) || probe != nil {
		t.Fatalf("after a failed probe: %d failures, open until %v, probe %v; want 6, open 1 min, no probe", failures, openUntil, probe)
	}
	if r := rows(t, f.db, "WHERE attempts = 0"); len(r) != 2 {
		t.Errorf("%d deliveries without an attempt after the probe, want the 2 held ones", len(r))
	}

	// The receiver is back: the next probe closes the breaker, then everything flows.
	alive.Store(true)
	f.clk.Advance(61 * time.Second)
	f.s.step(t)
	if failures, openUntil, _ := endpointRow(t, f.s, KindWebhook, f.hook.ID); failures != 0 || openUntil != nil {
		t.Fatalf("after a successful probe: %d failures, open until %v; want closed", failures, openUntil)
	}
	for range 4 {
		f.clk.Advance(101 * time.Minute)
		f.s.step(t)
	}
	if left := rows(t, f.db, "WHERE status <> 'succeeded'"); len(left) != 0 {
		t.Errorf("%d deliveries did not succeed after the receiver came back: %+v", len(left), left)
	}
	// The held deliveries used an attempt only for the failed probe and for their success.
	total := 0
	for _, id := range held {
		total += len(attemptsOf(t, f.db, id))
	}
	if total != len(held)+1 {
		t.Errorf("the %d held deliveries made %d attempts, want one each and the failed probe", len(held), total)
	}
}

func TestADeadReceiverHoldsFewWorkersAndTheOthersKeepFlowing(t *testing.T) {
	t.Parallel()
	db, cos := newDB(t, 2)
	var dead atomic.Int64
	never := newReceiver(t, func(_ http.ResponseWriter, r *http.Request) { dead.Add(1); <-r.Context().Done() })
	healthy := newReceiver(t, nil)
	sub := newSubs()
	deadHook, _ := sub.add(cos[0], never.URL, events.ConversionCreated)
	sub.add(cos[1], healthy.URL, events.ConversionCreated)
	const perTarget = 4
	s := newService(t, db, Options{Subscriptions: sub, Workers: 8, PerTarget: perTarget, ClaimBatch: 50, PollInterval: 20 * time.Millisecond})
	s.sender.timeout = 500 * time.Millisecond
	for _, co := range cos { // the dead target's deliveries come first in the queue
		var envs []events.Envelope
		for range 60 {
			envs = append(envs, envelope(events.ConversionCreated, co, ""))
		}
		if _, err := s.record(context.Background(), envs); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.dispatch(ctx) }()
	eventually(t, 30*time.Second, func() error {
		if n := len(healthy.requests()); n != 60 {
			return fmt.Errorf("the healthy receiver got %d of 60 beside a dead one", n)
		}
		tried := len(rows(t, db, "WHERE target_id = $1 AND attempts = 1", deadHook.ID))
		held := len(rows(t, db, "WHERE target_id = $1 AND attempts = 0 AND last_error LIKE 'held:%'", deadHook.ID))
		if tried+held != 60 {
			return fmt.Errorf("of the dead receiver's 60 deliveries %d were tried and %d held", tried, held)
		}
		return nil
	})
	cancel()
	<-done
	// Sent until the breaker opened (the fifth failure, with the attempts already in flight
	// then); the rest wait for the cool-down.
	if n := dead.Load(); n < breakerThreshold || n > breakerThreshold+perTarget {
		t.Errorf("the dead receiver got %d requests, want %d to %d", n, breakerThreshold, breakerThreshold+perTarget)
	}
}
