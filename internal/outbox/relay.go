package outbox

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/partnerstream/partnerstream/internal/kafka"
	"github.com/partnerstream/partnerstream/internal/metrics"
	"github.com/partnerstream/partnerstream/internal/run"
)

// Producer produces records synchronously: a nil answer means the brokers have them all,
// otherwise it holds each record's error. kafka.NewProducer(cfg, kafka.TopicEvents, ...) is
// one; it places an aggregate's events by key, so they stay in order on one partition.
type Producer interface {
	Produce(ctx context.Context, recs []kafka.Record) []error
}

// RelayOptions tune a relay; zero values take the defaults.
type RelayOptions struct {
	// BatchSize is the most events published in one Kafka write and one transaction
	// (default 100). A full batch is followed by the next one at once.
	BatchSize int
	// PollInterval is the pause after a batch that was not full (default 100 ms): the
	// most an event waits in an idle relay before it is published.
	PollInterval time.Duration
	// BatchTimeout bounds one batch: reading, producing, marking (default 30 s), so a hung
	// broker does not hold the rows' locks forever.
	BatchTimeout time.Duration
	Log          *slog.Logger
	// Now is the clock of published_at, latency and Prune; time.Now if nil.
	Now func() time.Time
}

// maxRetryInterval caps the backoff after failed batches (Kafka or Postgres down).
const maxRetryInterval = 5 * time.Second

// backlogInterval paces the backlog count while full batches drain a backlog: counting a
// large backlog after every batch would cost as much as the draining. Otherwise every loop
// counts (an index-only count of few rows).
const backlogInterval = time.Second

// relayLock is the transaction-scoped advisory lock one relay holds while it publishes a
// batch. Several replicas run relays for availability, but one publishes at a time, so each
// aggregate's events reach Kafka in the order they were written. (Rows are also locked FOR
// UPDATE SKIP LOCKED, which keeps any other reader of the outbox from publishing them twice.)
const relayLock int64 = 0x7073_6f75_7462_6f78 // "psoutbox"

var (
	backlog        = metrics.NewGauge("outbox_backlog", "Outbox events not yet published to Kafka.")
	published      = metrics.NewCounter("outbox_published_total", "Outbox events published to Kafka (a re-publication after a crash counts again).")
	publishErrors  = metrics.NewCounter("outbox_publish_errors_total", "Outbox batches that failed to publish and will be retried.")
	publishLatency = metrics.NewHistogram("outbox_publish_latency_seconds", "Time from an event's creation in the outbox to its publication to Kafka.", []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300})
)

// Relay publishes the outbox to Kafka: at least once, in id order, keyed by aggregate id.
type Relay struct {
	db        *pgxpool.Pool
	p         Producer
	o         RelayOptions
	lastCount time.Time
}

// NewRelay returns a relay from db to p.
func NewRelay(db *pgxpool.Pool, p Producer, o RelayOptions) *Relay {
	if o.BatchSize <= 0 {
		o.BatchSize = 100
	}
	if o.PollInterval <= 0 {
		o.PollInterval = 100 * time.Millisecond
	}
	if o.BatchTimeout <= 0 {
		o.BatchTimeout = 30 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Relay{db: db, p: p, o: o}
}

// Name implements run.Component.
func (r *Relay) Name() string { return "outbox-relay" }

// Run publishes until ctx ends, then returns nil. Failures are logged and retried with a
// backoff; a batch cut short by ctx stays unpublished and goes out again later.
func (r *Relay) Run(ctx context.Context) error {
	failures := 0
	for {
		n, err := r.publishBatch(ctx)
		if ctx.Err() != nil {
			return nil
		}
		wait, draining := r.o.PollInterval, false
		switch {
		case err != nil:
			failures++
			publishErrors.Inc()
			wait = run.BackoffBetween(failures, r.o.PollInterval, maxRetryInterval)
			r.o.Log.Warn("outbox: publishing failed; will retry", "err", err, "retry_in", wait)
		case n == r.o.BatchSize:
			wait, failures, draining = 0, 0, true
		default:
			failures = 0
		}
		r.countBacklog(ctx, draining)
		if wait > 0 && !run.Sleep(ctx, wait) {
			return nil
		}
	}
}

type pending struct {
	id        int64
	key       string
	envelope  []byte
	createdAt time.Time
}

// publishBatch publishes the oldest unpublished events and marks them, in one transaction:
// a crash after producing and before the commit leaves them unpublished, so they are
// produced again (same event ids) rather than lost.
func (r *Relay) publishBatch(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, r.o.BatchTimeout)
	defer cancel()
	tx, err := r.db.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("outbox: begin: %w", err)
	}
	// After a commit this is a no-op; after a canceled ctx it still has to reach the server.
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

	var mine bool
	if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, relayLock).Scan(&mine); err != nil {
		return 0, fmt.Errorf("outbox: relay lock: %w", err)
	}
	if !mine {
		return 0, nil // another relay is publishing
	}
	rows, _ := tx.Query(ctx, `SELECT id, aggregate_id, envelope, created_at FROM outbox
		WHERE published_at IS NULL ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED`, r.o.BatchSize)
	batch, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (pending, error) {
		var p pending
		err := row.Scan(&p.id, &p.key, &p.envelope, &p.createdAt)
		return p, err
	})
	if err != nil {
		return 0, fmt.Errorf("outbox: read events: %w", err)
	}
	if len(batch) == 0 {
		return 0, nil
	}
	recs := make([]kafka.Record, len(batch))
	ids := make([]int64, len(batch))
	for i, p := range batch {
		recs[i] = kafka.Record{Key: []byte(p.key), Value: p.envelope, Time: p.createdAt}
		ids[i] = p.id
	}
	if err := kafka.FirstError(r.p.Produce(ctx, recs)); err != nil {
		return 0, fmt.Errorf("outbox: produce %d events: %w", len(batch), err)
	}
	now := r.o.Now()
	if _, err := tx.Exec(ctx, `UPDATE outbox SET published_at = $2 WHERE id = ANY($1)`, ids, now); err != nil {
		return 0, fmt.Errorf("outbox: mark %d events published: %w", len(batch), err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("outbox: commit %d published events: %w", len(batch), err)
	}
	published.Add(float64(len(batch)))
	for _, p := range batch {
		publishLatency.Observe(max(now.Sub(p.createdAt), 0).Seconds())
	}
	return len(batch), nil
}

// countBacklog updates the backlog gauge; while draining, at most once per backlogInterval.
func (r *Relay) countBacklog(ctx context.Context, draining bool) {
	now := r.o.Now()
	if draining && now.Sub(r.lastCount) < backlogInterval {
		return
	}
	var n int64
	if err := r.db.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE published_at IS NULL`).Scan(&n); err != nil {
		if ctx.Err() == nil {
			r.o.Log.Warn("outbox: count backlog", "err", err)
		}
		return
	}
	r.lastCount = now
	backlog.Set(float64(n))
}

// pruneBatch bounds one DELETE, so pruning a large table never holds long locks.
const pruneBatch = 10000

// Prune deletes events published more than olderThan ago and returns how many. Run it
// periodically; keeping published events a while helps to investigate deliveries.
func (r *Relay) Prune(ctx context.Context, olderThan time.Duration) (int64, error) {
	cutoff := r.o.Now().Add(-olderThan)
	var total int64
	for {
		tag, err := r.db.Exec(ctx, `DELETE FROM outbox WHERE id IN (SELECT id FROM outbox WHERE published_at < $1 LIMIT $2)`, cutoff, pruneBatch)
		if err != nil {
			return total, fmt.Errorf("outbox: prune: %w", err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < pruneBatch {
			return total, nil
		}
	}
}
