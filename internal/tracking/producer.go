package tracking

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/partnerstream/partnerstream/internal/kafka"
)

// producer sends groups of clicks to the clicks topic, each group as one produce request to
// one partition, the partitions taken in turn.
//
// The recorder already hands over whole groups (the ack mode's concurrent clicks, the async
// queue's backlog, replay windows), which kafka-go's Writer would take apart again: it looks
// up the topic's metadata, picks a partition and appends to a batch for every message, and
// hands each batch to a goroutine of its own. Building the request with kafka-go's Client
// costs a click none of that. Clicks keep their id as key, but no consumer needs a click on
// a particular partition (each key occurs once), so placing them by key hash would only
// split every group into one small request per partition.
type producer struct {
	client *kafkago.Client
	close  func()
	topic  string

	mu         sync.Mutex
	next       int // partition of the next request
	partitions int // the topic's partition count; 0 until read (again)
	read       time.Time

	writes sync.WaitGroup
}

// Settings of the producer.
const (
	// produceMaxBytes bounds one request's records, well below the brokers' default limit on
	// a record batch (message.max.bytes, 1 MB): a group of large clicks is split.
	produceMaxBytes = 512 << 10
	// partitionsTTL is how long the topic's partition count is trusted before it is read
	// again, so partitions added to the topic are used.
	partitionsTTL = time.Minute
)

func newProducer(cfg kafka.Config, topic string) *producer {
	client, closeClient := kafka.NewClient(cfg)
	return &producer{client: client, close: closeClient, topic: topic}
}

// start writes items in the background and calls done with how many of them, from the
// first, every in-sync replica acknowledged, and the error that stopped the others.
func (p *producer) start(items []item, done func(written int, err error)) {
	p.writes.Go(func() { done(p.produce(items)) })
}

// shutdown waits for the writes under way and closes the connections.
func (p *producer) shutdown() {
	p.writes.Wait()
	p.close()
}

// produce writes items in requests of at most produceMaxBytes, each tried writeAttempts
// times, and stops at the first request that fails.
func (p *producer) produce(items []item) (written int, err error) {
	for written < len(items) {
		n := chunkLen(items[written:])
		if err := p.produceChunk(items[written : written+n]); err != nil {
			return written, err
		}
		written += n
	}
	return written, nil
}

// chunkLen is how many items from the first fit in one request (at least one).
func chunkLen(items []item) int {
	size := 0
	for i, it := range items {
		size += len(it.payload) + len(it.id)
		if size > produceMaxBytes && i > 0 {
			return i
		}
	}
	return len(items)
}

func (p *producer) produceChunk(items []item) error {
	backoff := writeBackoffMin
	for attempt := 1; ; attempt++ {
		start := time.Now()
		err := p.produceOnce(items, start)
		produceClicks.Observe(time.Since(start).Seconds())
		if err == nil || attempt == writeAttempts {
			return err
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, writeBackoffMax)
	}
}

func (p *producer) produceOnce(items []item, now time.Time) error {
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	partition, err := p.partition(ctx, now)
	if err != nil {
		return err
	}
	res, err := p.client.Produce(ctx, &kafkago.ProduceRequest{Topic: p.topic, Partition: partition,
		RequiredAcks: kafkago.RequireAll, Records: &records{items: items, at: now}})
	if err == nil {
		err = res.Error
	}
	if err != nil {
		// The topic may have changed (recreated, partitions added or gone): read it again.
		p.forgetPartitions()
		return fmt.Errorf("kafka: produce %d clicks to %s/%d: %w", len(items), p.topic, partition, err)
	}
	return nil
}

// partition returns the partition of the next request.
func (p *producer) partition(ctx context.Context, now time.Time) (int, error) {
	n, err := p.partitionCount(ctx, now)
	if err != nil {
		return 0, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next = (p.next + 1) % n
	return p.next, nil
}

// partitionCount returns the topic's partition count, read again when it is not known or
// old.
func (p *producer) partitionCount(ctx context.Context, now time.Time) (int, error) {
	p.mu.Lock()
	n, read := p.partitions, p.read
	p.mu.Unlock()
	if n > 0 && now.Sub(read) < partitionsTTL {
		return n, nil
	}
	md, err := p.client.Metadata(ctx, &kafkago.MetadataRequest{Topics: []string{p.topic}})
	if err != nil {
		return 0, fmt.Errorf("kafka: read the partitions of %s: %w", p.topic, err)
	}
	n = 0
	for _, t := range md.Topics {
		if t.Name == p.topic {
			if t.Error != nil {
				return 0, fmt.Errorf("kafka: read the partitions of %s: %w", p.topic, t.Error)
			}
			n = len(t.Partitions)
		}
	}
	if n == 0 {
		return 0, fmt.Errorf("kafka: read the partitions of %s: %w", p.topic, kafkago.UnknownTopicOrPartition)
	}
	p.mu.Lock()
	p.partitions, p.read = n, now
	p.mu.Unlock()
	return n, nil
}

func (p *producer) forgetPartitions() {
	p.mu.Lock()
	p.partitions = 0
	p.mu.Unlock()
}

// records reads items as Kafka records without a copy or an allocation per click. It
// reuses one record and its key and value readers: kafka-go encodes each record before it
// reads the next.
type records struct {
	items      []item
	at         time.Time
	rec        kafkago.Record
	key, value bytesReader
}

func (r *records) ReadRecord() (*kafkago.Record, error) {
	if len(r.items) == 0 {
		return nil, io.EOF
	}
	it := r.items[0]
	r.items = r.items[1:]
	r.key.Reset(it.key())
	r.value.Reset(it.payload)
	r.rec = kafkago.Record{Time: r.at, Key: &r.key, Value: &r.value}
	return &r.rec, nil
}

// bytesReader is a kafkago.Bytes over a slice; kafka-go copies it out through WriteTo.
type bytesReader struct{ bytes.Reader }

func (*bytesReader) Close() error { return nil }
