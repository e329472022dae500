// Package ratelimit counts events per key in fixed windows that every api replica shares,
// so a budget is the same on one replica or many.
//
// The counts live in a Store (Postgres in production, the table rate_limit_counters). A
// round trip per request would cost more than the rest of an API call, so a Counter decides
// from what it knows: the key's total in the store as last read, plus what this replica
// counted since. Flush (every FlushInterval, from Run) adds each replica's new counts to the
// store in one batched statement and reads the totals back. The first event of a key in a
// window on a replica is counted at the store before it is decided, so a replica that just
// started knows what the others counted: one round trip per key, replica and window.
//
// Between two flushes a replica does not see what the others admit. To bound what they can
// admit together beyond the budget, each replica lets through at most a 25th of what was
// left of the budget at its last read (its quota) without asking; past its quota, until the
// next flush, it counts each event at the store before deciding (a synchronous round trip).
// With n replicas the overshoot is then at most (n-1)/25 of the budget, 8 % with three, and
// in practice far less: the round trip of a replica past its quota also sends what it
// admitted without asking, so the others' next decisions see it. A key
// whose budget is spent is refused without asking anyone: counts only grow within a window.
// A Counter made with Sync has no quota and counts every event at the store (small budgets,
// such as failed credentials, whose events are rare for honest clients).
//
// Windows are aligned on the clock (time.Truncate), so every replica puts an event in the
// same window. When the store fails, a Counter keeps counting in memory and lets requests
// through within its own count, so a database outage degrades a budget to one per replica
// instead of refusing everyone.
package ratelimit

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/partnerstream/partnerstream/internal/metrics"
)

// FlushInterval is how often Run adds the replicas' counts to the store.
const FlushInterval = 200 * time.Millisecond

// syncTimeout bounds a request's round trip to the store; past it the request is decided
// from this replica's count.
const syncTimeout = time.Second

// storeTimeout bounds a flush or a prune.
const storeTimeout = 5 * time.Second

// pruneInterval is how often Run deletes the counters of ended windows.
const pruneInterval = time.Minute

// Count is one key's count of events in one window, as sent to a store; Add sets Total.
type Count struct {
	Scope, Key string
	Start      time.Time
	Window     time.Duration
	N          int64
	// Total is the key's count in the window after the addition, every replica's included.
	Total int64
}

// Store keeps the counts that the replicas share.
type Store interface {
	// Add adds each count's N to its key's counter and sets its Total. The counts are in
	// (Scope, Key, Start) order and name a key once.
	Add(ctx context.Context, counts []Count) error
	// Prune deletes the counters of windows that ended before now.
	Prune(ctx context.Context, now time.Time) (int64, error)
}

// Limit is a budget of events per window.
type Limit struct {
	Budget int
	Window time.Duration
}

// Decision is a Counter's answer about one event.
type Decision struct {
	Allowed bool
	// Count is the key's events in the window as far as this replica knows, this one
	// included when it was allowed.
	Count int64
	// Reset is the time until the window ends.
	Reset time.Duration
}

// Remaining is what is left of budget after the decision's count.
func (d Decision) Remaining(budget int) int64 { return max(0, int64(budget)-d.Count) }

var (
	storeRoundTrips = metrics.NewCounterVec("ratelimit_store_round_trips_total", "Round trips to the shared rate-limit store, by kind: flush (batched, in the background) or sync (on a request near its budget or of a Sync limit).", "kind")
	storeErrors     = metrics.NewCounter("ratelimit_store_errors_total", "Failed round trips to the shared rate-limit store; meanwhile the api counts in memory only.")
)

func init() {
	// Both series exist from the start: a graph shows 0, not "No data".
	for _, kind := range []string{"flush", "sync"} {
		storeRoundTrips.WithLabelValues(kind)
	}
}

// Counter counts the events of one limit (scope) per key. The zero Budget lets everything
// through.
type Counter struct {
	scope string
	limit Limit
	store Store
	now   func() time.Time
	// share is the part of the budget left at the last read that this replica may admit
	// between two flushes without asking the store (see the package comment); 0: none.
	share int64
	mu    sync.Mutex
	keys  map[string]*entry
}

// quotaShare is the default share: a 25th.
const quotaShare = 25

// entry is what a Counter knows of one key in its current window.
type entry struct {
	start time.Time
	// stored is the key's total in the store as last read; pending were counted here and not
	// sent yet; sending are in a flush under way.
	stored, pending, sending int64
	// quick are the events admitted without asking the store since the last flush.
	quick int64
	// read tells that stored was read in this window: until then every event asks the
	// store, so a replica that just started (or restarted) learns what the others counted.
	read bool
	// used tells that the key had an event since the last flush, which then reads its total
	// even with nothing to send: the RateLimit headers of its next events stay current.
	used bool
}

// Options of a Counter.
type Options struct {
	// Sync counts every event at the store before deciding, until the budget is spent.
	Sync bool
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// NewCounter counts the events of scope (a name of its own per limit) in store.
func NewCounter(store Store, scope string, l Limit, o Options) *Counter {
	if o.Now == nil {
		o.Now = time.Now
	}
	c := &Counter{scope: scope, limit: l, store: store, now: o.Now, keys: map[string]*entry{}, share: quotaShare}
	if o.Sync {
		c.share = 0
	}
	return c
}

// maxKeys bounds the keys a Counter remembers between flushes; past it, the keys of ended
// windows are dropped at once.
const maxKeys = 100_000

// Take counts an event of key and decides whether it is within the budget. A refused event
// counts nothing.
func (c *Counter) Take(ctx context.Context, key string) Decision {
	if c == nil || c.limit.Budget <= 0 {
		return Decision{Allowed: true}
	}
	now := c.now()
	start := now.Truncate(c.limit.Window)
	reset := start.Add(c.limit.Window).Sub(now)
	budget := int64(c.limit.Budget)
	c.mu.Lock()
	e := c.entry(key, start)
	known := e.stored + e.pending + e.sending
	if known >= budget {
		// Counts only grow within a window: refused without asking anyone.
		c.mu.Unlock()
		return Decision{Count: known, Reset: reset}
	}
	e.used = true
	if c.share > 0 && e.read && e.quick < (budget-e.stored)/c.share {
		e.quick++
		e.pending++
		c.mu.Unlock()
		return Decision{Allowed: true, Count: known + 1, Reset: reset}
	}
	// Past this replica's quota: count at the store first, with what this replica has not
	// sent yet, so that the others' decisions see it too.
	unsent := e.pending
	e.pending, e.sending = 0, e.sending+unsent
	c.mu.Unlock()
	counts := []Count{{Scope: c.scope, Key: key, Start: start, Window: c.limit.Window, N: unsent + 1}}
	storeRoundTrips.WithLabelValues("sync").Inc()
	sctx, cancel := context.WithTimeout(ctx, syncTimeout)
	err := c.store.Add(sctx, counts)
	cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.keys[key]
	if !ok || !e.start.Equal(start) {
		// The window ended meanwhile (or a sweep dropped the key): nothing here to update.
		e = &entry{start: start, sending: unsent}
	}
	e.sending -= unsent
	if err != nil {
		storeErrors.Inc()
		e.pending += unsent
		if known = e.stored + e.pending + e.sending; known >= budget {
			return Decision{Count: known, Reset: reset}
		}
		e.pending++
		return Decision{Allowed: true, Count: known + 1, Reset: reset}
	}
	e.stored, e.read = max(e.stored, counts[0].Total), true
	// What this replica has not sent yet is not in the total; what it is sending may be, and
	// counting it twice errs on the side of the budget.
	count := counts[0].Total + e.pending + e.sending
	return Decision{Allowed: count <= budget, Count: count, Reset: reset}
}

// entry returns key's entry in the window that starts at start, made or reset as needed.
// Called with mu held.
func (c *Counter) entry(key string, start time.Time) *entry {
	e, ok := c.keys[key]
	if ok && e.start.Equal(start) {
		return e
	}
	if !ok {
		if len(c.keys) >= maxKeys {
			c.sweep(start)
		}
		// The key may point into a reused request buffer.
		key = strings.Clone(key)
		e = &entry{}
		c.keys[key] = e
	}
	*e = entry{start: start}
	return e
}

// sweep drops the keys of windows before start. Called with mu held.
func (c *Counter) sweep(start time.Time) {
	for k, e := range c.keys {
		if e.start.Before(start) && e.sending == 0 {
			delete(c.keys, k)
		}
	}
}

// collect moves the pending counts of the current window into a flush.
func (c *Counter) collect(now time.Time, out []Count) []Count {
	if c == nil || c.limit.Budget <= 0 {
		return out
	}
	start := now.Truncate(c.limit.Window)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sweep(start)
	for k, e := range c.keys {
		if !e.used || !e.start.Equal(start) {
			continue
		}
		out = append(out, Count{Scope: c.scope, Key: k, Start: start, Window: c.limit.Window, N: e.pending})
		e.sending += e.pending
		e.pending, e.quick, e.used = 0, 0, false
	}
	return out
}

// settle applies a flush's answer (err: it failed, and its counts are pending again).
func (c *Counter) settle(counts []Count, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range counts {
		e, ok := c.keys[n.Key]
		if !ok || !e.start.Equal(n.Start) {
			continue
		}
		e.sending -= n.N
		if err != nil {
			e.pending += n.N
			continue
		}
		e.stored, e.read = max(e.stored, n.Total), true
	}
}

// Flush sends the counters' pending counts to store in one batch and reads their totals.
func Flush(ctx context.Context, store Store, counters ...*Counter) error {
	var counts []Count
	now := clock(counters)
	for _, c := range counters {
		counts = c.collect(now, counts)
	}
	if len(counts) == 0 {
		return nil
	}
	// One order for every replica: two batches that lock the same rows in different orders
	// could deadlock.
	slices.SortFunc(counts, func(a, b Count) int {
		return cmp.Or(strings.Compare(a.Scope, b.Scope), strings.Compare(a.Key, b.Key), a.Start.Compare(b.Start))
	})
	storeRoundTrips.WithLabelValues("flush").Inc()
	err := store.Add(ctx, counts)
	if err != nil {
		storeErrors.Inc()
		err = fmt.Errorf("ratelimit: flush %d counts: %w", len(counts), err)
	}
	byScope := map[string][]Count{}
	for _, n := range counts {
		byScope[n.Scope] = append(byScope[n.Scope], n)
	}
	for _, c := range counters {
		if c != nil {
			c.settle(byScope[c.scope], err)
		}
	}
	return err
}

// Run flushes the counters every FlushInterval and prunes the store's ended windows every
// minute until ctx ends, then flushes once more, so a replica that shuts down hands its last
// counts to the others. A flush under way when ctx ends is finished, not cancelled; each is
// bounded by storeTimeout. onErr, if set, hears of failures.
func Run(ctx context.Context, store Store, onErr func(error), counters ...*Counter) {
	flush := time.NewTicker(FlushInterval)
	defer flush.Stop()
	prune := time.NewTicker(pruneInterval)
	defer prune.Stop()
	bounded := func(fn func(context.Context) error) {
		c, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
		defer cancel()
		if err := fn(c); err != nil && onErr != nil {
			onErr(err)
		}
	}
	flushAll := func(c context.Context) error { return Flush(c, store, counters...) }
	for {
		select {
		case <-ctx.Done():
			bounded(flushAll)
			return
		case <-flush.C:
			bounded(flushAll)
		case <-prune.C:
			bounded(func(c context.Context) error {
				if _, err := store.Prune(c, clock(counters)); err != nil {
					return fmt.Errorf("ratelimit: prune ended windows: %w", err)
				}
				return nil
			})
		}
	}
}

// clock is the time of the counters' clock (they share one).
func clock(counters []*Counter) time.Time {
	for _, c := range counters {
		if c != nil {
			return c.now()
		}
	}
	return time.Now()
}
