package kafka

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	kafkago "github.com/segmentio/kafka-go"

	"github.com/partnerstream/partnerstream/internal/run"
)

// Record is one message to produce. Its key places it: every record with the same key goes
// to the same partition, so every copy of a record (a retried request, a spool replay, an
// outbox republish after a crash) lands where the first try did, and one consumer sees them
// all.
type Record struct {
	Key, Value []byte
	// Time is the record's timestamp; zero takes the time of the request.
	Time time.Time
}

// ProducerOptions tune a Producer; zero values take the defaults.
type ProducerOptions struct {
	// Attempts is how often a request is tried before its records fail (default 3).
	Attempts int
	// AttemptTimeout bounds one try (default 5 s).
	AttemptTimeout time.Duration
	// BackoffMin and BackoffMax bound the pause between tries (default 20 ms and 250 ms):
	// the click recorder waits for these, so they are short.
	BackoffMin, BackoffMax time.Duration
}

// Settings of the producer.
const (
	// maxRequestBytes bounds one request's records, well below the brokers' default limit on
	// a record batch (message.max.bytes, 1 MB): a large group is split.
	maxRequestBytes = 512 << 10
	// partitionsTTL is how long the topic's partition count is trusted before it is read
	// again, so partitions added to the topic are used.
	partitionsTTL = time.Minute
)

// Producer writes groups of records to one topic: each record to the partition its key
// hashes to (murmur2, the Java client's default partitioner, so any other producer to the
// topic agrees), each partition's records of a group as one produce request, the requests
// of a group concurrently. Every in-sync replica must acknowledge (acks=all).
//
// It builds its requests with kafka-go's Client instead of using its Writer, which would
// take every group apart again: a metadata lookup, a balancer call and a batch append per
// message, and a goroutine hand-off per batch.
type Producer struct {
	client      *kafkago.Client
	closeConns  func()
	topic       string
	compression kafkago.Compression
	o           ProducerOptions
	latency     prometheus.Observer

	mu         sync.Mutex
	partitions []int // the topic's partitions, 0..n-1; nil until read (again)
	read       time.Time
}

// NewProducer returns a producer to topic. Close it when done.
func NewProducer(cfg Config, topic string, o ProducerOptions) *Producer {
	if o.Attempts <= 0 {
		o.Attempts = 3
	}
	if o.AttemptTimeout <= 0 {
		o.AttemptTimeout = 5 * time.Second
	}
	if o.BackoffMin <= 0 {
		o.BackoffMin = 20 * time.Millisecond
	}
	if o.BackoffMax < o.BackoffMin {
		o.BackoffMax = max(250*time.Millisecond, o.BackoffMin)
	}
	t := cfg.transport()
	return &Producer{
		client: &kafkago.Client{Addr: kafkago.TCP(cfg.Brokers...), Transport: t}, closeConns: t.CloseIdleConnections,
		topic: topic, compression: cfg.compression(), o: o, latency: ProduceDuration.WithLabelValues(topic),
	}
}

// Close releases the producer's connections. Call it once every Produce has returned.
func (p *Producer) Close() { p.closeConns() }

// Produce writes recs and returns nil when every in-sync replica acknowledged all of them;
// otherwise one error per record, nil for those acknowledged. A partition's records are
// written in order, and after one of its requests fails the rest of that partition's
// records are not tried. The records' bytes are read while Produce runs, never after.
func (p *Producer) Produce(ctx context.Context, recs []Record) []error {
	if len(recs) == 0 {
		return nil
	}
	partitions, err := p.partitionList(ctx)
	if err != nil {
		return fill(make([]error, len(recs)), err)
	}
	order, starts := p.place(recs, partitions)
	var wg sync.WaitGroup
	results := make([]partitionResult, len(partitions))
	for part := range partitions {
		idx := order[starts[part]:starts[part+1]]
		if len(idx) == 0 {
			continue
		}
		if starts[part] == 0 && starts[part+1] == len(recs) {
			results[part] = p.producePartition(ctx, part, recs, idx) // one partition: no goroutine
			break
		}
		wg.Go(func() { results[part] = p.producePartition(ctx, part, recs, idx) })
	}
	wg.Wait()
	var errs []error
	for part, r := range results {
		if r.err == nil {
			continue
		}
		if errs == nil {
			errs = make([]error, len(recs))
		}
		for _, i := range order[starts[part]+r.written : starts[part+1]] {
			errs[i] = r.err
		}
	}
	return errs
}

// place orders the records' indexes by partition, keeping their order within one:
// order[starts[p]:starts[p+1]] are partition p's.
func (p *Producer) place(recs []Record, partitions []int) (order, starts []int) {
	order, starts = make([]int, len(recs)), make([]int, len(partitions)+1)
	if len(partitions) == 1 {
		for i := range order {
			order[i] = i
		}
		starts[1] = len(recs)
		return order, starts
	}
	part := make([]int, len(recs))
	balancer := kafkago.Murmur2Balancer{Consistent: true}
	for i, r := range recs {
		part[i] = balancer.Balance(kafkago.Message{Key: r.Key}, partitions...)
		starts[part[i]+1]++
	}
	for i := 1; i < len(starts); i++ {
		starts[i] += starts[i-1]
	}
	next := append([]int(nil), starts[:len(partitions)]...)
	for i, pt := range part {
		order[next[pt]] = i
		next[pt]++
	}
	return order, starts
}

// partitionResult is how many of a partition's records were written, from the first, and
// the error that stopped the rest.
type partitionResult struct {
	written int
	err     error
}

// producePartition writes one partition's records in requests of at most maxRequestBytes.
func (p *Producer) producePartition(ctx context.Context, partition int, recs []Record, idx []int) partitionResult {
	var r partitionResult
	for r.written < len(idx) {
		n := chunkLen(recs, idx[r.written:])
		if r.err = p.request(ctx, partition, recs, idx[r.written:r.written+n]); r.err != nil {
			return r
		}
		r.written += n
	}
	return r
}

// chunkLen is how many of the records fit in one request (at least one).
func chunkLen(recs []Record, idx []int) int {
	size := 0
	for n, i := range idx {
		size += len(recs[i].Key) + len(recs[i].Value)
		if size > maxRequestBytes && n > 0 {
			return n
		}
	}
	return len(idx)
}

// request sends one produce request, tried Attempts times.
func (p *Producer) request(ctx context.Context, partition int, recs []Record, idx []int) error {
	var err error
	for attempt := 1; attempt <= p.o.Attempts; attempt++ {
		if attempt > 1 && !run.Sleep(ctx, run.BackoffBetween(attempt-1, p.o.BackoffMin, p.o.BackoffMax)) {
			break
		}
		start := time.Now()
		err = p.requestOnce(ctx, partition, &recordReader{recs: recs, idx: idx, at: start})
		p.latency.Observe(time.Since(start).Seconds())
		if err == nil {
			return nil
		}
		// The topic may have changed (recreated, partitions added or gone): read it again.
		p.forgetPartitions()
	}
	return fmt.Errorf("kafka: produce %d records to %s/%d: %w", len(idx), p.topic, partition, err)
}

func (p *Producer) requestOnce(ctx context.Context, partition int, records *recordReader) error {
	ctx, cancel := context.WithTimeout(ctx, p.o.AttemptTimeout)
	defer cancel()
	res, err := p.client.Produce(ctx, &kafkago.ProduceRequest{Topic: p.topic, Partition: partition,
		RequiredAcks: kafkago.RequireAll, Compression: p.compression, Records: records})
	if err == nil {
		err = res.Error
	}
	return err
}

// partitionList returns the topic's partitions, read again when not known or old.
func (p *Producer) partitionList(ctx context.Context) ([]int, error) {
	now := time.Now()
	p.mu.Lock()
	list, read := p.partitions, p.read
	p.mu.Unlock()
	if list != nil && now.Sub(read) < partitionsTTL {
		return list, nil
	}
	ctx, cancel := context.WithTimeout(ctx, p.o.AttemptTimeout)
	defer cancel()
	md, err := p.client.Metadata(ctx, &kafkago.MetadataRequest{Topics: []string{p.topic}})
	if err != nil {
		return nil, fmt.Errorf("kafka: read the partitions of %s: %w", p.topic, err)
	}
	n := 0
	for _, t := range md.Topics {
		if t.Name == p.topic {
			if t.Error != nil {
				return nil, fmt.Errorf("kafka: read the partitions of %s: %w", p.topic, t.Error)
			}
			n = len(t.Partitions)
		}
	}
	if n == 0 {
		return nil, fmt.Errorf("kafka: read the partitions of %s: %w", p.topic, kafkago.UnknownTopicOrPartition)
	}
	list = make([]int, n)
	for i := range list {
		list[i] = i
	}
	p.mu.Lock()
	p.partitions, p.read = list, now
	p.mu.Unlock()
	return list, nil
}

func (p *Producer) forgetPartitions() {
	p.mu.Lock()
	p.partitions = nil
	p.mu.Unlock()
}

// FirstError is the first error of a Produce answer, nil when it has none: a caller that
// writes a group all or nothing (the outbox relay) needs one cause, not one per record.
func FirstError(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

func fill(errs []error, err error) []error {
	for i := range errs {
		errs[i] = err
	}
	return errs
}

// recordReader reads the records recs[idx[0]], recs[idx[1]], ... without a copy or an
// allocation per record. It reuses one record and its key and value readers: kafka-go
// encodes each record before it reads the next. A retry gets a new reader.
type recordReader struct {
	recs       []Record
	idx        []int
	at         time.Time
	rec        kafkago.Record
	key, value bytesReader
}

func (r *recordReader) ReadRecord() (*kafkago.Record, error) {
	if len(r.idx) == 0 {
		return nil, io.EOF
	}
	rec := &r.recs[r.idx[0]]
	r.idx = r.idx[1:]
	r.key.Reset(rec.Key)
	r.value.Reset(rec.Value)
	at := rec.Time
	if at.IsZero() {
		at = r.at
	}
	r.rec = kafkago.Record{Time: at, Key: &r.key, Value: &r.value}
	return &r.rec, nil
}

// bytesReader is a kafkago.Bytes over a slice; kafka-go copies it out through WriteTo.
type bytesReader struct{ bytes.Reader }

func (*bytesReader) Close() error { return nil }
