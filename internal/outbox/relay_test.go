package outbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/kafka"
	"github.com/partnerstream/partnerstream/internal/metrics/metricstest"
	"github.com/partnerstream/partnerstream/internal/outbox"
	"github.com/partnerstream/partnerstream/internal/testenv"
	"github.com/partnerstream/partnerstream/internal/testenv/pgtest"
)

const partitions = 3

type env struct {
	db      *pgxpool.Pool
	brokers []string
	w       *kafka.Producer
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	_, db := pgtest.Migrated(t)
	cfg := kafka.Config{Brokers: testenv.Kafka(t), Partitions: partitions, ReplicationFactor: 1, Retention: time.Hour}
	tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := kafka.EnsureTopics(tctx, cfg, kafka.TopicEvents); err != nil {
		t.Fatal(err)
	}
	w := kafka.NewProducer(cfg, kafka.TopicEvents, kafka.ProducerOptions{})
	t.Cleanup(w.Close)
	return &env{db: db, brokers: cfg.Brokers, w: w}
}

// write commits n events, one transaction each, spread over a few aggregates; it returns
// their ids in write order.
func (e *env) write(t *testing.T, n int, prefix string) []string {
	t.Helper()
	out := make([]string, n)
	for i := range n {
		err := pgx.BeginFunc(context.Background(), e.db, func(tx pgx.Tx) error {
			env, err := outbox.Write(context.Background(), tx, fmt.Sprintf("%s-agg-%d", prefix, i%5), events.Envelope{
				Type: events.PartnershipCreated, Data: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))})
			out[i] = env.ID
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func (e *env) unpublished(t *testing.T) int {
	t.Helper()
	var n int
	if err := e.db.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE published_at IS NULL`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// run starts a relay and returns a function that stops it and waits for Run to return.
func run(t *testing.T, r *outbox.Relay) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run returned %v, want nil when its context ends", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not return 10 s after its context ended")
		}
	}
	t.Cleanup(stop)
	return stop
}

func (e *env) waitDrained(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for e.unpublished(t) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d events still unpublished after 20 s", e.unpublished(t))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// readAll returns every message of the events topic, partition by partition, in offset order.
func (e *env) readAll(t *testing.T) []kafka.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	all, err := kafka.ReadAll(ctx, kafka.Config{Brokers: e.brokers}, kafka.TopicEvents)
	if err != nil {
		t.Fatal(err)
	}
	return all
}

// published counts the messages per event id and checks each against its envelope.
func published(t *testing.T, msgs []kafka.Message) map[string]int {
	t.Helper()
	seen := map[string]int{}
	for _, m := range msgs {
		var env events.Envelope
		if err := json.Unmarshal(m.Value, &env); err != nil {
			t.Fatalf("message %s is not an envelope: %v", m.Value, err)
		}
		if env.Type != events.PartnershipCreated || len(m.Key) == 0 {
			t.Fatalf("message key %q envelope %s", m.Key, m.Value)
		}
		seen[env.ID]++
	}
	return seen
}

func exactlyOnce(t *testing.T, seen map[string]int, want []string) {
	t.Helper()
	for _, id := range want {
		if seen[id] != 1 {
			t.Errorf("event %s published %d times, want once", id, seen[id])
		}
	}
	if len(seen) != len(want) {
		t.Errorf("%d distinct events published, want %d", len(seen), len(want))
	}
}

func TestRelayPublishesEveryEventOnceInOrderPerAggregate(t *testing.T) {
	e := newEnv(t)
	want := e.write(t, 250, "once") // more than two full batches
	before := metricstest.Value(t, "partnerstream_outbox_published_total", "", "")
	latencies := metricstest.Value(t, "partnerstream_outbox_publish_latency_seconds", "", "")
	stop := run(t, outbox.NewRelay(e.db, e.w, outbox.RelayOptions{BatchSize: 100}))
	e.waitDrained(t)
	// The relay counts the backlog after its last batch; give it that loop.
	for deadline := time.Now().Add(3 * time.Second); metricstest.Value(t, "partnerstream_outbox_backlog", "", "") != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("backlog gauge %v 3 s after draining, want 0", metricstest.Value(t, "partnerstream_outbox_backlog", "", ""))
		}
	}
	stop()
	msgs := e.readAll(t)
	exactlyOnce(t, published(t, msgs), want)

	// Within a partition (and so within an aggregate) messages are in write order.
	order := map[string]int{}
	for i, id := range want {
		order[id] = i
	}
	last := map[string]int{}
	for _, m := range msgs {
		var env events.Envelope
		_ = json.Unmarshal(m.Value, &env)
		if prev, ok := last[string(m.Key)]; ok && order[env.ID] < prev {
			t.Fatalf("aggregate %s: event %d after event %d", m.Key, order[env.ID], prev)
		}
		last[string(m.Key)] = order[env.ID]
	}
	if got := metricstest.Value(t, "partnerstream_outbox_published_total", "", "") - before; got != 250 {
		t.Errorf("published_total grew by %v, want 250", got)
	}
	if got := metricstest.Value(t, "partnerstream_outbox_publish_latency_seconds", "", "") - latencies; got != 250 {
		t.Errorf("latency histogram grew by %v samples, want 250", got)
	}
}

func TestRelayPublishesNewEventsWithoutRestart(t *testing.T) {
	e := newEnv(t)
	run(t, outbox.NewRelay(e.db, e.w, outbox.RelayOptions{}))
	want := e.write(t, 3, "late")
	e.waitDrained(t)
	exactlyOnce(t, published(t, e.readAll(t)), want)
}

// crashAfterWrite produces for real, then "kills" the relay before it can mark the events.
type crashAfterWrite struct {
	w      outbox.Producer
	cancel context.CancelFunc
}

func (c crashAfterWrite) Produce(ctx context.Context, recs []kafka.Record) []error {
	errs := c.w.Produce(ctx, recs)
	c.cancel()
	return errs
}

func TestEventsProducedBeforeACrashArePublishedAgainNotLost(t *testing.T) {
	e := newEnv(t)
	want := e.write(t, 30, "crash")

	ctx, cancel := context.WithCancel(context.Background())
	relay := outbox.NewRelay(e.db, crashAfterWrite{w: e.w, cancel: cancel}, outbox.RelayOptions{BatchSize: 10})
	if err := relay.Run(ctx); err != nil {
		t.Fatalf("Run after the crash: %v", err)
	}
	if n := e.unpublished(t); n != 30 {
		t.Fatalf("%d events unpublished after the crash, want all 30 (the batch was not marked)", n)
	}
	crashed := published(t, e.readAll(t))
	if len(crashed) != 10 {
		t.Fatalf("the crashed relay produced %d events, want its one batch of 10", len(crashed))
	}

	stop := run(t, outbox.NewRelay(e.db, e.w, outbox.RelayOptions{BatchSize: 10}))
	e.waitDrained(t)
	stop()
	seen := published(t, e.readAll(t))
	for _, id := range want {
		wantN := 1
		if crashed[id] > 0 {
			wantN = 2 // produced before the crash and again after: same event id
		}
		if seen[id] != wantN {
			t.Errorf("event %s published %d times, want %d", id, seen[id], wantN)
		}
	}
	if len(seen) != len(want) {
		t.Errorf("%d distinct events, want %d", len(seen), len(want))
	}
}

// flaky fails its first calls without producing anything.
type flaky struct {
	w     outbox.Producer
	fails atomic.Int32
}

func (f *flaky) Produce(ctx context.Context, recs []kafka.Record) []error {
	if f.fails.Add(-1) >= 0 {
		errs := make([]error, len(recs))
		errs[0] = errors.New("broker unavailable")
		return errs
	}
	return f.w.Produce(ctx, recs)
}

func TestRelayRetriesAfterKafkaFailures(t *testing.T) {
	e := newEnv(t)
	want := e.write(t, 5, "flaky")
	w := &flaky{w: e.w}
	w.fails.Store(3)
	errs := metricstest.Value(t, "partnerstream_outbox_publish_errors_total", "", "")
	run(t, outbox.NewRelay(e.db, w, outbox.RelayOptions{PollInterval: 10 * time.Millisecond}))
	e.waitDrained(t)
	exactlyOnce(t, published(t, e.readAll(t)), want)
	if got := metricstest.Value(t, "partnerstream_outbox_publish_errors_total", "", "") - errs; got != 3 {
		t.Errorf("publish_errors_total grew by %v, want 3", got)
	}
}

func TestTwoRelaysPublishEveryEventOnce(t *testing.T) {
	e := newEnv(t)
	var want []string
	want = append(want, e.write(t, 100, "before")...)
	opts := outbox.RelayOptions{BatchSize: 7, PollInterval: 5 * time.Millisecond}
	run(t, outbox.NewRelay(e.db, e.w, opts))
	run(t, outbox.NewRelay(e.db, e.w, opts))
	// Writers keep committing while both relays run.
	var wg sync.WaitGroup
	var mu sync.Mutex
	for w := range 4 {
		wg.Go(func() {
			ids := e.write(t, 25, fmt.Sprintf("during-%d", w))
			mu.Lock()
			want = append(want, ids...)
			mu.Unlock()
		})
	}
	wg.Wait()
	e.waitDrained(t)
	exactlyOnce(t, published(t, e.readAll(t)), want)
}

func TestPruneDeletesOnlyOldPublishedEvents(t *testing.T) {
	e := newEnv(t)
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	e.write(t, 6, "prune")
	ctx := context.Background()
	// Two published 8 days ago, two 1 day ago, two not published.
	if _, err := e.db.Exec(ctx, `UPDATE outbox SET published_at = CASE WHEN id <= (SELECT min(id) + 1 FROM outbox) THEN $1::timestamptz ELSE $2::timestamptz END
		WHERE id <= (SELECT min(id) + 3 FROM outbox)`, now.Add(-8*24*time.Hour), now.Add(-24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	relay := outbox.NewRelay(e.db, e.w, outbox.RelayOptions{Now: func() time.Time { return now }})
	n, err := relay.Prune(ctx, 7*24*time.Hour)
	if err != nil || n != 2 {
		t.Fatalf("Prune = %d, %v; want the 2 events published 8 days ago", n, err)
	}
	var left, unpublished int
	if err := e.db.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE published_at IS NULL) FROM outbox`).Scan(&left, &unpublished); err != nil {
		t.Fatal(err)
	}
	if left != 4 || unpublished != 2 {
		t.Fatalf("%d events left (%d unpublished), want 4 (2)", left, unpublished)
	}
}
