package ingest

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/partnerstream/partnerstream/internal/kafka"
	"github.com/partnerstream/partnerstream/internal/run"
	"github.com/partnerstream/partnerstream/internal/store/chstore"
)

// finalWriteTimeout is how long, once a generation has ended, the batches in hand get to be
// stored and committed: well inside the group's session timeout, after which the group goes
// on without this replica while it would still write (the next owner redoes them).
const finalWriteTimeout = 5 * time.Second

// A planner decides a batch's write (Writer.planClicks, Writer.planConversions).
type planner[T any] func(ctx context.Context, recs []T, prev plan) (plan, error)

// consumer moves one topic into ClickHouse as a member of its consumer group. Everything of a
// generation (the partitions' fetches, decoded on their own goroutines, one batcher, one
// writer that stores and commits) ends before the generation's partitions move on
// (kafka.Claim), so a partition changes hands only after its last batch is stored and
// committed.
type consumer[T any] struct {
	svc      *Service
	topic    string
	table    string
	size     int
	interval time.Duration
	kafka    *kafka.Consumer
	decoder  func(partition int) decoder[T]
	plan     planner[T]
	log      *slog.Logger
	lag      *lagTracker
	chunks   reuse[[]item[T]] // slices for fetched messages
	records  reuse[[]T]       // slices for batches' records

	mu       sync.Mutex
	failure  error // of the last join, fetch or write; nil once one succeeds
	failedAt time.Time
	// received counts the messages added to batches (tests wait on it).
	received atomic.Int64
}

func newConsumer[T any](s *Service, o Options, topic, group, table string,
	newDecoder func(partition int) decoder[T], plan planner[T]) (*consumer[T], error) {
	// The topic's series exist from the start at zero, so a panel or an alert over them reads
	// 0 rather than no data until the first batch or failure.
	flushErrors.WithLabelValues(topic)
	rowsTotal.WithLabelValues(table)
	lagMessages.WithLabelValues(topic)
	lagSeconds.WithLabelValues(topic)
	log := o.Log.With("topic", topic, "group", group)
	c := &consumer[T]{svc: s, topic: topic, table: table, size: o.BatchSize, interval: o.BatchInterval,
		decoder: newDecoder, plan: plan, log: log, lag: newLagTracker(topic, o.Now),
		chunks: newReuse[[]item[T]](2*o.Kafka.Partitions + 2), records: newReuse[[]T](2)}
	var err error
	c.kafka, err = kafka.NewConsumer(o.Kafka, kafka.ConsumerOptions{Group: group, Topic: topic,
		MinBytes: o.FetchMinBytes, MaxBytes: fetchMaxBytes, MaxWait: o.FetchMaxWait, Failed: c.setFailure, Log: log})
	if err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	return c, nil
}

// run takes part in the group until ctx ends, then lets the generation in hand store and
// commit its batch, and leaves the group.
func (c *consumer[T]) run(ctx context.Context) error { return c.kafka.Run(ctx, c.assigned) }

// generation is one generation's pipeline: fetches go through items to the batcher, which
// hands batches to the writer.
type generation[T any] struct {
	c        *consumer[T]
	decoders map[int]decoder[T] // per partition: a decoder keeps buffers between messages
	items    chan fetched[T]
	done     chan struct{}
}

func (c *consumer[T]) assigned(s *kafka.Session) kafka.Claim {
	c.catchUp(s.Context())
	g := &generation[T]{c: c, decoders: make(map[int]decoder[T], len(s.Partitions)),
		// A few fetches per partition wait for the batcher, to overlap fetching with writing.
		items: make(chan fetched[T], 2*len(s.Partitions)+1), done: make(chan struct{})}
	for _, p := range s.Partitions {
		g.decoders[p] = c.decoder(p)
	}
	go func() {
		defer close(g.done)
		c.batchLoop(s, g.items)
	}()
	return g
}

// catchUp waits, in a replicated ClickHouse, until the replica this process reads holds every
// write acknowledged before the generation began, before anything of the generation reads
// (the unique clicks read back, the dedupe lookups): the partitions' previous owner may have
// written through another replica (docs/stats.md, "A replicated ClickHouse"). It retries
// until it succeeds or the generation ends; then the fetchers end at once.
func (c *consumer[T]) catchUp(ctx context.Context) {
	for attempt := 1; ; attempt++ {
		err := chstore.CatchUp(ctx, c.svc.conn)
		if err == nil || ctx.Err() != nil {
			return
		}
		c.setFailure(fmt.Errorf("clickhouse: %s: %w", c.topic, err))
		c.log.Warn("the ClickHouse replica has not caught up yet; retrying", "attempt", attempt, "err", err)
		if !run.Sleep(ctx, run.Backoff(attempt)) {
			return
		}
	}
}

// Revoked waits for the batcher and the writer: the batches in hand are stored and
// committed, or given up.
func (g *generation[T]) Revoked() { <-g.done }

type batch[T any] struct {
	records  []T
	last     map[int]position // per partition: what to commit and how far behind it is
	messages int
	invalid  int
}

// maxPresized bounds the records a batch makes room for up front: growing the slice record
// by record copied every click about four times, but a huge configured batch size should not
// reserve its memory before any message arrives.
const maxPresized = 16384

func (c *consumer[T]) newBatch() *batch[T] {
	records := c.records.get()
	if records == nil {
		records = make([]T, 0, min(c.size, maxPresized))
	}
	return &batch[T]{records: records, last: map[int]position{}}
}

// recycle keeps a stored batch's records slice for a later batch.
func (c *consumer[T]) recycle(b *batch[T]) {
	clear(b.records) // its strings must not outlive the batch
	c.records.put(b.records[:0])
	b.records = nil
}

func (c *consumer[T]) add(b *batch[T], it *item[T]) {
	b.messages++
	c.received.Add(1)
	// Messages that are not for statistics, or invalid, still move the committed offset.
	p := it.position
	if p.at.IsZero() { // an invalid message: the lag keeps the time of the one before
		p.at = b.last[it.partition].at
	}
	b.last[it.partition] = p
	switch {
	case it.invalid != nil:
		b.invalid++
		c.log.Error("skipping a message ingest cannot store", "partition", it.partition, "offset", it.offset, "err", it.invalid)
	case it.ok:
		b.records = append(b.records, it.rec)
	}
}

// batchLoop closes a batch when it is full or when its first message has waited the
// interval (counting the time its fetch waited in the broker), and the batch in hand when the
// generation ends, and hands each to writeLoop.
func (c *consumer[T]) batchLoop(s *kafka.Session, in <-chan fetched[T]) {
	ctx := s.Context()
	batches := make(chan *batch[T], 1)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		c.writeLoop(ctx, s, batches)
	}()
	defer func() {
		close(batches)
		<-stopped
	}()
	b := c.newBatch()
	run.Gather[fetched[T]]{Size: c.size, Linger: c.interval,
		Waited: func(f fetched[T]) time.Duration { return f.waited },
		Add: func(f fetched[T], room int) (int, fetched[T], bool) {
			n := min(room, len(f.items)-f.next)
			for i := f.next; i < f.next+n; i++ {
				c.add(b, &f.items[i])
			}
			if f.next += n; f.next < len(f.items) {
				return n, f, true
			}
			c.release(f.items)
			return n, fetched[T]{}, false
		},
		Flush: func() bool {
			select {
			case batches <- b:
				b = c.newBatch()
				return true
			case <-stopped:
				return false // a batch was not stored: committing later ones would skip it
			}
		},
	}.Run(ctx, in)
}

// writeLoop stores the batches in order and commits each one's offsets once it is stored.
// It plans a batch (reads what is stored) while the batch before it is being inserted,
// which is a large share of a batch's time (docs/stats.md), given that batch's plan so that
// the clicks it inserts count as stored. A batch is inserted only once the one before is
// stored and committed; when one cannot be stored, the loop stops.
//
// Once the generation has ended, the batches in hand get finalWriteTimeout in all.
func (c *consumer[T]) writeLoop(ctx context.Context, s *kafka.Session, batches <-chan *batch[T]) {
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stop := context.AfterFunc(ctx, func() { time.AfterFunc(finalWriteTimeout, cancel) })
	defer stop()

	var prev plan
	var stored chan bool // the previous batch's outcome
	for b := range batches {
		p, err := c.retrying(ctx, wctx, func(ctx context.Context) (plan, error) { return c.plan(ctx, b.records, prev) })
		if stored != nil && !<-stored {
			return
		}
		if err != nil {
			c.log.Warn("a batch was not stored; Kafka redelivers it to the partitions' next owner",
				"messages", b.messages, "err", err)
			return
		}
		stored = make(chan bool, 1)
		go func(done chan<- bool) { done <- c.store(ctx, wctx, s, b, p) }(stored)
		prev = p
	}
	if stored != nil {
		<-stored
	}
}

// store applies a batch's plan and commits its offsets. A failed insert is planned and
// applied again: it may have stored some rows, which the new plan then finds.
func (c *consumer[T]) store(ctx, wctx context.Context, s *kafka.Session, b *batch[T], p plan) bool {
	start := time.Now()
	p, err := c.retrying(ctx, wctx, func(ctx context.Context) (plan, error) {
		if p == nil {
			var err error
			if p, err = c.plan(ctx, b.records, nil); err != nil {
				return nil, err
			}
		}
		if err := p.apply(ctx); err != nil {
			p = nil
			return nil, err
		}
		return p, nil
	})
	if err != nil {
		c.log.Warn("a batch was not stored; Kafka redelivers it to the partitions' next owner",
			"messages", b.messages, "err", err)
		return false
	}
	res := p.result()
	// The rows are queryable from here on, so the metrics say so before the commit.
	for part, p := range b.last {
		c.lag.observe(part, p.offset, p.highWaterMark, p.at)
	}
	c.lag.publish()
	rowsTotal.WithLabelValues(c.table).Add(float64(res.Written))
	skippedTotal.WithLabelValues(c.topic, "duplicate").Add(float64(res.Duplicates))
	skippedTotal.WithLabelValues(c.topic, "invalid").Add(float64(b.invalid))
	withoutClick.Add(float64(res.WithoutClick))
	movedToClick.Add(float64(res.Moved))
	batchSize.WithLabelValues(c.topic).Observe(float64(b.messages))
	if hook := c.svc.afterWrite; hook != nil {
		hook(c.topic, b.messages)
	}
	offsets := make(map[int]int64, len(b.last))
	for part, p := range b.last {
		offsets[part] = p.offset + 1
	}
	if err := s.Commit(offsets); err != nil {
		// The rows are stored, so a redelivery of this batch is a no-op: nothing is lost.
		c.log.Warn("commit failed; the batch may be redelivered and skipped as duplicates", "err", err)
	}
	flushDuration.WithLabelValues(c.topic).Observe(time.Since(start).Seconds())
	c.log.Debug("batch stored", "messages", b.messages, "written", res.Written, "duplicates", res.Duplicates,
		"invalid", b.invalid, "duration", time.Since(start))
	c.recycle(b)
	return true
}

// writeTimeout bounds one attempt; a slow insert is retried, and the retry finds what the
// slow one stored.
const writeTimeout = 30 * time.Second

// retrying runs f until it succeeds, with backoff, while the generation (ctx) lasts; each
// attempt runs under wctx, which outlives the generation by finalWriteTimeout, so the last
// attempt after the generation ended is bounded.
func (c *consumer[T]) retrying(ctx, wctx context.Context, f func(context.Context) (plan, error)) (plan, error) {
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(wctx, writeTimeout)
		p, err := f(actx)
		cancel()
		if err == nil {
			c.setFailure(nil)
			return p, nil
		}
		flushErrors.WithLabelValues(c.topic).Inc()
		c.setFailure(fmt.Errorf("clickhouse: write %s: %w", c.topic, err))
		c.log.Error("writing a batch failed", "attempt", attempt, "err", err)
		if !run.Sleep(ctx, run.Backoff(attempt)) {
			return nil, err
		}
	}
}

func (c *consumer[T]) setFailure(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil && c.failure == nil {
		c.failedAt = time.Now()
	}
	c.failure = err
}

func (c *consumer[T]) check() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failure == nil {
		return nil
	}
	return fmt.Errorf("%s: failing since %s: %w", c.topic, c.failedAt.UTC().Format(time.RFC3339), c.failure)
}
