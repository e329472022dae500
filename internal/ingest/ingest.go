// Package ingest moves the click and domain-event streams from Kafka into ClickHouse for
// statistics. Each topic has its own consumer group; messages are gathered into batches
// (bounded by size and by time), each batch is written with one INSERT per table, and only
// then are its offsets committed. Kafka therefore delivers at least once, and the Writer
// makes a delivery that was already stored change nothing (docs/stats.md).
//
// Replicas scale out by sharing the consumer groups: Kafka splits the partitions among them.
package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	kafkago "github.com/segmentio/kafka-go"

	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/health"
	"github.com/partnerstream/partnerstream/internal/kafka"
	"github.com/partnerstream/partnerstream/internal/run"
	"github.com/partnerstream/partnerstream/internal/store/chstore"
)

// Defaults of Options.
const (
	DefaultBatchSize     = 10000
	DefaultBatchInterval = time.Second
	DefaultGroupPrefix   = "partnerstream-ingest"
)

// Tables that the rows_total metric names.
const (
	tableClicks      = "clicks"
	tableConversions = "conversion_changes"
)

// Options configure the ingest component.
type Options struct {
	Kafka kafka.Config
	// ClickHouse is an open connection; Database holds the migrated schema.
	ClickHouse driver.Conn
	Database   string
	// BatchSize is the most messages in one batch; BatchInterval is the longest a message
	// waits in a batch before it is written, so it bounds how fresh statistics are.
	BatchSize     int
	BatchInterval time.Duration
	// GroupPrefix names the consumer groups <prefix>-clicks and <prefix>-events. A second
	// pipeline (into another ClickHouse) needs a prefix of its own.
	GroupPrefix string
	// FetchMinBytes and FetchMaxWait shape each fetch from a partition: the broker answers
	// once it has FetchMinBytes or once FetchMaxWait has passed. A fetch costs the same
	// whether it carries one message or hundreds, so at a steady rate a larger minimum
	// saves CPU in ingest and in Kafka, and the wait bounds what it adds to freshness.
	FetchMinBytes int
	FetchMaxWait  time.Duration
	Log           *slog.Logger
	// Health, when set, receives the clickhouse, kafka and ingest readiness checks.
	Health *health.Registry
	Now    func() time.Time
}

// Service is the ingest component (run.Component "ingest").
type Service struct {
	consumers []runner
	clicks    *consumer[clickRecord] // tests watch it
	// afterWrite, when set (tests), runs after a batch of that many messages is stored and
	// before its offsets are committed: the window a crash must survive.
	afterWrite func(topic string, messages int)
}

type runner interface {
	run(ctx context.Context) error
	check() error
}

// New validates the options and builds the service.
func New(o Options) (*Service, error) {
	if o.ClickHouse == nil {
		return nil, errors.New("ingest: a ClickHouse connection is required")
	}
	if o.Database == "" {
		return nil, errors.New("ingest: a ClickHouse database is required")
	}
	if err := o.Kafka.Validate(); err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	if o.BatchSize == 0 {
		o.BatchSize = DefaultBatchSize
	}
	if o.BatchInterval == 0 {
		o.BatchInterval = DefaultBatchInterval
	}
	if o.BatchSize < 1 || o.BatchInterval < 0 {
		return nil, fmt.Errorf("ingest: batch size %d and interval %s must be positive", o.BatchSize, o.BatchInterval)
	}
	if o.FetchMinBytes == 0 {
		o.FetchMinBytes = DefaultFetchMinBytes
	}
	if o.FetchMaxWait == 0 {
		o.FetchMaxWait = DefaultFetchMaxWait
	}
	if o.FetchMinBytes < 1 || o.FetchMinBytes > fetchMaxBytes || o.FetchMaxWait < time.Millisecond {
		return nil, fmt.Errorf("ingest: fetch min bytes %d must be in 1..%d and max wait %s at least 1ms",
			o.FetchMinBytes, fetchMaxBytes, o.FetchMaxWait)
	}
	if o.GroupPrefix == "" {
		o.GroupPrefix = DefaultGroupPrefix
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	w := NewWriter(o.ClickHouse, o.Database)
	w.now = o.Now
	s := &Service{}
	s.clicks = newConsumer(s, o, kafka.TopicClicks, o.GroupPrefix+"-clicks", tableClicks, newClickDecoder, w.planClicks)
	s.consumers = []runner{s.clicks,
		newConsumer(s, o, kafka.TopicEvents, o.GroupPrefix+"-events", tableConversions, newEventDecoder, w.planConversions),
		newClickWatcher(w, o)}
	if o.Health != nil {
		conn, brokers := o.ClickHouse, o.Kafka.Brokers
		o.Health.Add("clickhouse", func(ctx context.Context) error { return chstore.Ping(ctx, conn) })
		o.Health.Add("kafka", func(ctx context.Context) error { return kafka.Ping(ctx, brokers) })
		o.Health.Add("ingest", s.check)
	}
	return s, nil
}

// Name implements run.Component.
func (s *Service) Name() string { return "ingest" }

// Run consumes both topics until ctx ends, then writes and commits the batches in hand and
// leaves the consumer groups. Failures to write are retried, never fatal: Kafka keeps the
// messages, and /readyz reports the failure meanwhile.
func (s *Service) Run(ctx context.Context) error {
	errs := make([]error, len(s.consumers))
	var wg sync.WaitGroup
	for i, c := range s.consumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.run(ctx)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// check is the readiness of the pipeline itself: both consumers can fetch and write.
func (s *Service) check(context.Context) error {
	var errs []error
	for _, c := range s.consumers {
		errs = append(errs, c.check())
	}
	return errors.Join(errs...)
}

// A decoder decodes a message's value into the item that holds its position: the record,
// whether statistics take it, why it is invalid, and when it occurred (for the lag gauges).
// newDecoder makes one per fetcher, so a decoder may keep buffers between messages; value
// is only valid during the call.
type decoder[T any] func(it *item[T], value []byte)

func newClickDecoder() decoder[clickRecord] {
	var p clickParser
	return func(it *item[clickRecord], value []byte) {
		r := &it.rec
		it.ok = true
		if err := p.parse(value, r); err != nil {
			it.invalid = fmt.Errorf("%w: click: %w", ErrInvalid, err)
			return
		}
		r.partition, r.offset = int32(it.partition), it.offset
		it.at, it.invalid = r.at, r.valid()
	}
}

// Domain events are few beside clicks, so they are decoded into their types by reflection.
func newEventDecoder() decoder[Conversion] { return decodeEvent }

func decodeEvent(it *item[Conversion], value []byte) {
	var e events.Envelope
	if err := json.Unmarshal(value, &e); err != nil {
		it.ok, it.invalid = true, fmt.Errorf("%w: event: %w", ErrInvalid, err)
		return
	}
	it.rec, it.ok, it.invalid = ParseConversion(e)
	it.rec.Partition, it.rec.Offset, it.at = int32(it.partition), it.offset, e.OccurredAt
}

// Consumer group timings. A crashed replica's partitions move to the others after
// sessionTimeout. When a generation ends, heartbeats stop until the replica rejoins, so it
// must store and commit the batches in hand and rejoin within sessionTimeout, or the group
// would go on without it while it still writes; it gives up on them finalWriteTimeout after
// the generation ended (the next owner redoes them) to stay well inside.
const (
	heartbeatInterval = time.Second
	sessionTimeout    = 10 * time.Second
	rebalanceTimeout  = 30 * time.Second
	finalWriteTimeout = 5 * time.Second
)

// A planner decides a batch's write (Writer.planClicks, Writer.planConversions).
type planner[T any] func(ctx context.Context, recs []T, prev plan) (plan, error)

// consumer moves one topic into ClickHouse as a member of its consumer group.
//
// It uses kafka-go's ConsumerGroup rather than the group Reader because the Reader cannot
// tell its caller that a partition moved to another replica: a batch in hand would then be
// written while the new owner re-reads the same messages from the last commit, and both
// lookups could miss the other's rows. Here everything of a generation (one fetcher per
// assigned partition, one batcher, one writer that stores and commits) runs inside it, and kafka-go
// rejoins the group only once they have returned, so a partition changes hands only after
// its last batch is stored and committed.
type consumer[T any] struct {
	svc      *Service
	topic    string
	group    string
	table    string
	kafka    kafka.Config
	size     int
	interval time.Duration
	fetchOptions
	decoder func() decoder[T]
	plan    planner[T]
	log     *slog.Logger
	lag     *lagTracker
	chunks  reuse[[]item[T]] // slices for fetched messages
	records reuse[[]T]       // slices for batches' records

	mu       sync.Mutex
	failure  error // of the last join, fetch or write; nil once one succeeds
	failedAt time.Time
	// received counts the messages added to batches (tests wait on it).
	received atomic.Int64
}

func newConsumer[T any](s *Service, o Options, topic, group, table string,
	newDecoder func() decoder[T], plan planner[T]) *consumer[T] {
	// The topic's series exist from the start at zero, so a panel or an alert over them reads
	// 0 rather than no data until the first batch or failure.
	flushErrors.WithLabelValues(topic)
	rowsTotal.WithLabelValues(table)
	lagMessages.WithLabelValues(topic)
	lagSeconds.WithLabelValues(topic)
	return &consumer[T]{svc: s, topic: topic, group: group, table: table, kafka: o.Kafka, size: o.BatchSize,
		interval: o.BatchInterval, fetchOptions: fetchOptions{minBytes: o.FetchMinBytes, maxWait: o.FetchMaxWait},
		decoder: newDecoder, plan: plan, log: o.Log.With("topic", topic, "group", group), lag: newLagTracker(topic, o.Now),
		chunks: newReuse[[]item[T]](2*o.Kafka.Partitions + 2), records: newReuse[[]T](2)}
}

type fetchOptions struct {
	minBytes int
	maxWait  time.Duration
}

func (c *consumer[T]) dialer() *kafkago.Dialer {
	id := c.kafka.ClientID
	if id == "" {
		id = kafka.DefaultClientID
	}
	return &kafkago.Dialer{ClientID: id, Timeout: 10 * time.Second, DualStack: true}
}

// run takes part in the group until ctx ends, then lets the generation in hand store and
// commit its batch, and leaves the group.
func (c *consumer[T]) run(ctx context.Context) error {
	group, err := kafkago.NewConsumerGroup(kafkago.ConsumerGroupConfig{
		ID: c.group, Brokers: c.kafka.Brokers, Dialer: c.dialer(), Topics: []string{c.topic},
		HeartbeatInterval: heartbeatInterval, SessionTimeout: sessionTimeout, RebalanceTimeout: rebalanceTimeout,
		JoinGroupBackoff: time.Second, WatchPartitionChanges: true, StartOffset: kafkago.FirstOffset,
		// Committed offsets must outlive the messages (kafka-go asks for 24 h), or a topic idle
		// for a day would be read again from its start.
		RetentionTime: max(c.kafka.Retention, 24*time.Hour),
	})
	if err != nil {
		return fmt.Errorf("ingest: %s consumer group: %w", c.topic, err)
	}
	// Close ends the generation in hand and waits for its goroutines, i.e. for the last
	// batch to be stored and committed, then leaves the group.
	stop := context.AfterFunc(ctx, func() { _ = group.Close() })
	defer stop()
	for {
		gen, err := group.Next(context.WithoutCancel(ctx))
		switch {
		case errors.Is(err, kafkago.ErrGroupClosed):
			return group.Close()
		case err != nil:
			c.setFailure(fmt.Errorf("kafka: join group %s: %w", c.group, err))
			c.log.Warn("joining the consumer group failed; retrying", "err", err)
			continue
		}
		c.setFailure(nil)
		c.startGeneration(gen)
	}
}

func (c *consumer[T]) startGeneration(gen *kafkago.Generation) {
	assigned := gen.Assignments[c.topic]
	c.log.Info("consuming", "generation", gen.ID, "partitions", len(assigned))
	// A few fetches per partition wait for the batcher, to overlap fetching with writing.
	items := make(chan fetched[T], 2*len(assigned)+1)
	gen.Start(func(ctx context.Context) { c.batchLoop(ctx, gen, items) })
	for _, a := range assigned {
		gen.Start(func(ctx context.Context) { c.fetchLoop(ctx, a.ID, a.Offset, items) })
	}
}

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
func (c *consumer[T]) batchLoop(ctx context.Context, gen *kafkago.Generation, in <-chan fetched[T]) {
	batches := make(chan *batch[T], 1)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		c.writeLoop(ctx, gen, batches)
	}()
	defer func() {
		close(batches)
		<-stopped
	}()
	b := c.newBatch()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	hand := func() bool {
		timer.Stop()
		if b.messages == 0 {
			return true
		}
		select {
		case batches <- b:
			b = c.newBatch()
			return true
		case <-stopped:
			return false // a batch was not stored: committing later ones would skip it
		}
	}
	for {
		select {
		case <-ctx.Done():
			hand()
			return
		case <-timer.C:
			if !hand() {
				return
			}
		case got := <-in:
			for i := range got.items {
				c.add(b, &got.items[i])
				if b.messages == 1 {
					timer.Reset(max(c.interval-got.waited, 0))
				}
				if b.messages >= c.size && !hand() {
					return
				}
			}
			c.release(got.items)
		}
	}
}

// writeLoop stores the batches in order and commits each one's offsets once it is stored.
// It plans a batch (reads what is stored) while the batch before it is being inserted,
// which is a large share of a batch's time (docs/stats.md), given that batch's plan so that
// the clicks it inserts count as stored. A batch is inserted only once the one before is
// stored and committed; when one cannot be stored, the loop stops.
//
// Once the generation has ended, the batches in hand get finalWriteTimeout in all.
func (c *consumer[T]) writeLoop(ctx context.Context, gen *kafkago.Generation, batches <-chan *batch[T]) {
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
		go func(done chan<- bool) { done <- c.store(ctx, wctx, gen, b, p) }(stored)
		prev = p
	}
	if stored != nil {
		<-stored
	}
}

// store applies a batch's plan and commits its offsets. A failed insert is planned and
// applied again: it may have stored some rows, which the new plan then finds.
func (c *consumer[T]) store(ctx, wctx context.Context, gen *kafkago.Generation, b *batch[T], p plan) bool {
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
	if err := gen.CommitOffsets(map[string]map[int]int64{c.topic: offsets}); err != nil {
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
