package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/ratelimit"
	"github.com/partnerstream/partnerstream/internal/testenv"
	"github.com/partnerstream/partnerstream/internal/testenv/pgtest"
)

var minute = ratelimit.Limit{Budget: 0, Window: time.Minute}

func limit(budget int) ratelimit.Limit { l := minute; l.Budget = budget; return l }

// replicas are n counters of one scope over store, each flushed by its own Run until the
// test ends (or stop is called), as n api replicas would be.
func replicas(t *testing.T, store ratelimit.Store, n int, l ratelimit.Limit, o ratelimit.Options) (cs []*ratelimit.Counter, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range n {
		c := ratelimit.NewCounter(store, "test", l, o)
		cs = append(cs, c)
		wg.Go(func() { ratelimit.Run(ctx, store, func(err error) { t.Errorf("Run: %v", err) }, c) })
	}
	stop = func() { cancel(); wg.Wait() }
	t.Cleanup(stop)
	return cs, stop
}

// hammer takes key events, spread round robin over the counters by concurrent clients,
// and returns how many were allowed.
func hammer(cs []*ratelimit.Counter, key string, events int) int {
	var allowed atomic.Int64
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 12 {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(events) {
					return
				}
				if cs[int(i)%len(cs)].Take(context.Background(), key).Allowed {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return int(allowed.Load())
}

// Three replicas hammered at once through one key admit its budget, within 10 %, and the
// budget of another key is untouched.
func TestReplicasShareOneBudget(t *testing.T) {
	_, db := pgtest.Migrated(t)
	store := ratelimit.NewPostgres(db)
	clock := testenv.NewClock()
	const budget = 600
	cs, _ := replicas(t, store, 3, limit(budget), ratelimit.Options{Now: clock.Now})
	got := hammer(cs, "key-a", 3*budget)
	t.Logf("3 replicas admitted %d of %d events, budget %d", got, 3*budget, budget)
	if got < budget*9/10 || got > budget*11/10 {
		t.Fatalf("3 replicas admitted %d of 1800 events, want %d within 10 %%", got, budget)
	}
	if got := hammer(cs, "key-b", 30); got != 30 {
		t.Fatalf("another key: %d of 30 admitted", got)
	}
}

// A Sync counter is exact: the failed-credential budget of 20 is 20 whatever the replicas.
func TestASyncBudgetIsExactAcrossReplicas(t *testing.T) {
	_, db := pgtest.Migrated(t)
	clock := testenv.NewClock()
	cs, _ := replicas(t, ratelimit.NewPostgres(db), 3, limit(20), ratelimit.Options{Sync: true, Now: clock.Now})
	if got := hammer(cs, "203.0.113.7", 90); got != 20 {
		t.Fatalf("3 replicas admitted %d of 90, want exactly 20", got)
	}
	d := cs[0].Take(context.Background(), "203.0.113.7")
	if d.Allowed || d.Remaining(20) != 0 || d.Reset != time.Minute {
		t.Fatalf("over the budget: %+v, want refused with the window's minute to go", d)
	}
}

// A replica that stops hands its counts on: a new one (a restart) starts from them.
func TestARestartKeepsTheBudget(t *testing.T) {
	_, db := pgtest.Migrated(t)
	store := ratelimit.NewPostgres(db)
	clock := testenv.NewClock()
	old, stop := replicas(t, store, 1, limit(100), ratelimit.Options{Now: clock.Now})
	if got := hammer(old, "k", 100); got != 100 {
		t.Fatalf("admitted %d of 100", got)
	}
	stop() // the last flush
	restarted, _ := replicas(t, store, 1, limit(100), ratelimit.Options{Now: clock.Now})
	if d := restarted[0].Take(context.Background(), "k"); d.Allowed || d.Count < 100 {
		t.Fatalf("after a restart: %+v, want refused", d)
	}
	clock.Advance(time.Minute)
	if d := restarted[0].Take(context.Background(), "k"); !d.Allowed || d.Count != 1 {
		t.Fatalf("in the next window: %+v, want the first event", d)
	}
}

func TestPruneDeletesOnlyEndedWindows(t *testing.T) {
	_, db := pgtest.Migrated(t)
	store := ratelimit.NewPostgres(db)
	ctx := context.Background()
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	counts := []ratelimit.Count{
		{Scope: "a", Key: "k", Start: start, Window: time.Minute, N: 3},
		{Scope: "a", Key: "k", Start: start.Add(time.Minute), Window: time.Minute, N: 2},
		{Scope: "b", Key: "k", Start: start, Window: time.Hour, N: 1},
	}
	if err := store.Add(ctx, counts); err != nil {
		t.Fatal(err)
	}
	if err := store.Add(ctx, counts[:1]); err != nil || counts[0].Total != 6 {
		t.Fatalf("second Add: total %d, %v; want 6", counts[0].Total, err)
	}
	n, err := store.Prune(ctx, start.Add(90*time.Second))
	if err != nil || n != 1 {
		t.Fatalf("Prune = %d, %v; want the one ended window", n, err)
	}
	var left int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM rate_limit_counters`).Scan(&left); err != nil || left != 2 {
		t.Fatalf("%d rows left (%v), want 2", left, err)
	}
}

// failing is a store that is down.
type failing struct{}

func (failing) Add(context.Context, []ratelimit.Count) error { return errors.New("connection refused") }
func (failing) Prune(context.Context, time.Time) (int64, error) {
	return 0, errors.New("connection refused")
}

// With the store down a replica still holds each key to the budget, on its own.
func TestAStoreOutageCountsInMemory(t *testing.T) {
	clock := testenv.NewClock()
	for _, sync := range []bool{false, true} {
		t.Run(fmt.Sprintf("sync=%v", sync), func(t *testing.T) {
			c := ratelimit.NewCounter(failing{}, "test", limit(50), ratelimit.Options{Sync: sync, Now: clock.Now})
			if err := ratelimit.Flush(context.Background(), failing{}, c); err != nil {
				t.Fatalf("Flush with nothing to send: %v", err)
			}
			if got := hammer([]*ratelimit.Counter{c}, "k", 80); got != 50 {
				t.Fatalf("admitted %d of 80, want 50", got)
			}
			if err := ratelimit.Flush(context.Background(), failing{}, c); err == nil && !sync {
				t.Fatal("Flush to a failing store succeeded")
			}
			if d := c.Take(context.Background(), "k"); d.Allowed {
				t.Fatalf("after a failed flush: %+v, want still refused", d)
			}
		})
	}
}

// In memory (handler tests, no Postgres) the counts are exact without any flush.
func TestTheMemoryStoreIsExact(t *testing.T) {
	clock := testenv.NewClock()
	clock.Advance(30 * time.Second)
	c := ratelimit.NewCounter(ratelimit.NewMemory(), "test", limit(100), ratelimit.Options{Now: clock.Now})
	if got := hammer([]*ratelimit.Counter{c}, "k", 150); got != 100 {
		t.Fatalf("admitted %d of 150, want 100", got)
	}
	d := c.Take(context.Background(), "k")
	if d.Allowed || d.Reset != 30*time.Second {
		t.Fatalf("over the budget: %+v, want refused, 30 s to the window's end", d)
	}
}
