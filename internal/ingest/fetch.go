package ingest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/partnerstream/partnerstream/internal/run"
)

// Defaults of Options.FetchMinBytes and Options.FetchMaxWait.
const (
	DefaultFetchMinBytes = 512 << 10
	DefaultFetchMaxWait  = 250 * time.Millisecond
)

const (
	// fetchMaxBytes bounds one fetch, and so the messages a fetcher decodes before it hands
	// them on: about 4,000 clicks.
	fetchMaxBytes = 1 << 20
	// fetchTimeout is how long a broker may take to answer, beyond the wait it was allowed.
	fetchTimeout = 10 * time.Second
)

// position is where a fetched message sat and when it occurred: what a commit and the lag
// gauges need.
type position struct {
	offset, highWaterMark int64
	at                    time.Time
}

// item is a fetched message, decoded.
type item[T any] struct {
	rec       T
	ok        bool
	invalid   error
	partition int
	position
}

// fetched is what one fetch returned, decoded, and how long the broker held the fetch
// waiting for messages: the batcher counts that wait in the batch interval, so that the
// fetch wait does not add to how stale statistics get.
type fetched[T any] struct {
	items  []item[T]
	waited time.Duration
}

// fetchLoop reads one partition from offset and decodes each message, so decoding runs in
// parallel across partitions and overlaps the batcher's writes. It hands on the messages of
// a fetch together.
func (c *consumer[T]) fetchLoop(ctx context.Context, partition int, offset int64, out chan<- fetched[T]) {
	f := &fetcher[T]{c: c, partition: partition, decode: c.decoder(), buf: make([]byte, 64<<10)}
	defer f.close()
	failures := 0
	for ctx.Err() == nil {
		got, next, err := f.fetch(ctx, offset)
		offset = next
		if len(got.items) > 0 {
			select {
			case out <- got:
			case <-ctx.Done():
				return
			}
		} else {
			c.release(got.items)
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			c.setFailure(fmt.Errorf("kafka: fetch %s/%d: %w", c.topic, partition, err))
			c.log.Warn("fetch failed; retrying", "partition", partition, "err", err)
			if !run.Sleep(ctx, run.Backoff(failures)) {
				return
			}
			continue
		}
		if failures > 0 {
			failures = 0
			c.setFailure(nil)
		}
	}
}

// fetcher reads one partition through a kafka-go Conn of its own. The partition Reader costs
// twice as much per message: it hands each one over a channel and sets a read deadline for
// it, and it allocates its key and value. Here a fetch's values are read into one reused
// buffer and decoded from there.
type fetcher[T any] struct {
	c         *consumer[T]
	partition int
	decode    decoder[T]
	buf       []byte
	conn      *kafkago.Conn
	unwatch   func() bool
}

func (f *fetcher[T]) close() {
	if f.conn != nil {
		f.unwatch()
		_ = f.conn.Close()
		f.conn = nil
	}
}

// fetch reads the messages from offset on that one fetch returns, and where to go on from.
// It connects first when it has no connection; an error closes it.
func (f *fetcher[T]) fetch(ctx context.Context, offset int64) (fetched[T], int64, error) {
	chunk := f.c.chunk()
	if f.conn == nil {
		var err error
		if offset, err = f.connect(ctx, offset); err != nil {
			return fetched[T]{items: chunk}, offset, err
		}
	}
	o := f.c.fetchOptions
	asked := time.Now()
	_ = f.conn.SetDeadline(asked.Add(o.maxWait + fetchTimeout))
	batch := f.conn.ReadBatchWith(kafkago.ReadBatchConfig{MinBytes: o.minBytes, MaxBytes: fetchMaxBytes, MaxWait: o.maxWait})
	waited := time.Since(asked)
	hwm := batch.HighWaterMark()
	for {
		n, err := batch.Read(f.buf[:cap(f.buf)])
		if err != nil {
			break
		}
		// A fetch answers with whole record batches, the first of which may begin before
		// offset; Batch.Read, unlike ReadMessage, does not skip those records.
		at := batch.Offset() - 1
		if at < offset {
			continue
		}
		chunk = append(chunk, item[T]{partition: f.partition, position: position{offset: at, highWaterMark: hwm}})
		f.decode(&chunk[len(chunk)-1], f.buf[:n])
	}
	got := fetched[T]{items: chunk, waited: waited}
	next := batch.Offset()
	err := batch.Close()
	switch {
	case err == nil, errors.Is(err, kafkago.RequestTimedOut):
		// RequestTimedOut: nothing came within the wait.
		return got, next, nil
	case errors.Is(err, io.ErrShortBuffer):
		// A message larger than the buffer: the fetch stopped before it, read it again.
		f.buf = make([]byte, 2*cap(f.buf))
		return got, next, nil
	case errors.Is(err, kafkago.OffsetOutOfRange):
		next, err = f.resolve(next)
		if err == nil {
			return got, next, nil
		}
	}
	f.close()
	return got, next, fmt.Errorf("read at offset %d: %w", next, err)
}

// connect dials the partition's leader and positions the connection at offset, resolved.
func (f *fetcher[T]) connect(ctx context.Context, offset int64) (int64, error) {
	var errs []error
	for _, broker := range f.c.kafka.Brokers {
		conn, err := f.c.dialer().DialLeader(ctx, "tcp", broker, f.c.topic, f.partition)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		f.conn = conn
		// Closing the connection ends a fetch that is waiting: the generation is over.
		f.unwatch = context.AfterFunc(ctx, func() { _ = conn.Close() })
		if offset, err = f.resolve(offset); err != nil {
			f.close()
			return offset, err
		}
		return offset, nil
	}
	return offset, fmt.Errorf("dial the leader of partition %d: %w", f.partition, errors.Join(errs...))
}

// resolve turns offset into one the partition holds and seeks there: the first one for
// kafkago.FirstOffset (the group has committed nothing yet), and, as Kafka's consumers do
// with auto.offset.reset=earliest, for an offset the partition does not hold (retention
// deleted the messages before it was read, or the topic was recreated).
func (f *fetcher[T]) resolve(offset int64) (int64, error) {
	_ = f.conn.SetDeadline(time.Now().Add(fetchTimeout))
	first, last, err := f.conn.ReadOffsets()
	if err != nil {
		return offset, fmt.Errorf("read the offsets of partition %d: %w", f.partition, err)
	}
	switch {
	case offset == kafkago.FirstOffset:
		offset = first
	case offset < first || offset > last:
		f.c.log.Warn("the partition does not hold the offset to read; reading from its first",
			"partition", f.partition, "offset", offset, "first", first, "last", last)
		offset = first
	}
	if _, err := f.conn.Seek(offset, kafkago.SeekAbsolute|kafkago.SeekDontCheck); err != nil {
		return offset, fmt.Errorf("seek partition %d to %d: %w", f.partition, offset, err)
	}
	return offset, nil
}

// chunk returns an empty slice for a fetch's messages; release gives it back once the
// batcher has copied them, so that fetches reuse a few slices rather than allocate.
func (c *consumer[T]) chunk() []item[T] { return c.chunks.get() }

func (c *consumer[T]) release(chunk []item[T]) {
	clear(chunk) // the records' strings must not outlive their batch
	c.chunks.put(chunk[:0])
}
