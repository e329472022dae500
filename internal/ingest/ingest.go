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
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/partnerstream/partnerstream/internal/enrich"
	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/health"
	"github.com/partnerstream/partnerstream/internal/kafka"
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
	// RawRetentionMonths is how many months of raw clicks and conversion changes ClickHouse
	// keeps besides the current one (0: all); the rollups are kept whatever it is.
	RawRetentionMonths int
	// Enrich derives where each click comes from (internal/enrich); nil enriches without
	// databases (device, referrer, UTM, truncated addresses).
	Enrich *enrich.Enricher
	// noEnrich leaves clicks unenriched (tests: what enrichment costs ingest).
	noEnrich bool
	Log      *slog.Logger
	// Health, when set, receives the clickhouse, kafka and ingest readiness checks.
	Health *health.Registry
	Now    func() time.Time
}

// Service is the ingest component (run.Component "ingest").
type Service struct {
	conn      driver.Conn // ClickHouse, which the consumers catch up on a new generation
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
	if o.Enrich == nil && !o.noEnrich {
		e, err := enrich.New(enrich.Options{})
		if err != nil {
			return nil, fmt.Errorf("ingest: %w", err)
		}
		o.Enrich = e
	}
	w := NewWriter(o.ClickHouse, o.Database)
	w.now = o.Now
	s := &Service{conn: o.ClickHouse}
	var err error
	clickLog := o.Log.With("topic", kafka.TopicClicks)
	clickDecoder := func(partition int) decoder[clickRecord] {
		var session *enrich.Session
		if o.Enrich != nil {
			session = o.Enrich.NewSession()
		}
		return newClickDecoder(newUniques(int32(partition), w.loadVisitors, clickLog), session)
	}
	if s.clicks, err = newConsumer(s, o, kafka.TopicClicks, o.GroupPrefix+"-clicks", tableClicks, clickDecoder, w.planClicks); err != nil {
		return nil, err
	}
	conversions, err := newConsumer(s, o, kafka.TopicEvents, o.GroupPrefix+"-events", tableConversions, newEventDecoder, w.planConversions)
	if err != nil {
		return nil, err
	}
	s.consumers = []runner{s.clicks, conversions, newClickWatcher(w, o), retention{w: w, months: o.RawRetentionMonths, log: o.Log}}
	if o.Health != nil {
		conn, kcfg := o.ClickHouse, o.Kafka
		o.Health.Add("clickhouse", func(ctx context.Context) error { return chstore.Ping(ctx, conn) })
		o.Health.Add("kafka", func(ctx context.Context) error { return kafka.Ping(ctx, kcfg) })
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
// newDecoder makes one per partition of a generation, so a decoder may keep buffers and
// state between messages; value is only valid during the call. It returns an error only when
// ctx ended before it could decode: the generation is over, and so is the fetch.
type decoder[T any] func(ctx context.Context, it *item[T], value []byte) error

// newClickDecoder decodes a partition's clicks, enriches them and decides which are
// duplicates. It runs on the partition's fetcher, so enrichment runs in parallel across
// partitions and each session's caches need no lock. A nil session leaves clicks unenriched.
func newClickDecoder(u *uniques, e *enrich.Session) decoder[clickRecord] {
	var p clickParser
	return func(ctx context.Context, it *item[clickRecord], value []byte) error {
		r := &it.rec
		it.ok = true
		if err := p.parse(value, r); err != nil {
			it.invalid = fmt.Errorf("%w: click: %w", ErrInvalid, err)
			return nil
		}
		r.partition, r.offset = int32(it.partition), it.offset
		if it.at, it.invalid = r.at, r.valid(); it.invalid != nil {
			return nil
		}
		if e != nil {
			r.enriched = e.Enrich(r.field(events.FieldIP), r.field(events.FieldUserAgent), r.field(events.FieldReferrer), r.field(events.FieldLandingURL))
		}
		p.forget(r, events.FieldLandingURL)
		return u.decide(ctx, r)
	}
}

// Domain events are few beside clicks, so they are decoded into their types by reflection.
func newEventDecoder(int) decoder[Conversion] { return decodeEvent }

func decodeEvent(_ context.Context, it *item[Conversion], value []byte) error {
	var e events.Envelope
	if err := json.Unmarshal(value, &e); err != nil {
		it.ok, it.invalid = true, fmt.Errorf("%w: event: %w", ErrInvalid, err)
		return nil
	}
	it.rec, it.ok, it.invalid = ParseConversion(e)
	it.rec.Partition, it.rec.Offset, it.at = int32(it.partition), it.offset, e.OccurredAt
	return nil
}
