package kafka

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/partnerstream/partnerstream/internal/run"
)

// Fetch is what one fetch of one partition returned.
type Fetch struct {
	Partition int
	// HighWaterMark is the offset the partition's next message will get: how far behind the
	// fetch is.
	HighWaterMark int64
	// Waited is how long the broker held the fetch waiting for messages; a caller that batches
	// by time counts it in, so that the fetch wait does not add to how stale its output gets.
	Waited time.Duration

	batch *kafkago.Batch
	from  int64
	buf   *[]byte
}

// Records yields each record's offset and value, in order. A value is only valid until the
// next one is read.
func (f *Fetch) Records() iter.Seq2[int64, []byte] {
	return func(yield func(int64, []byte) bool) {
		buf := *f.buf
		for {
			n, err := f.batch.Read(buf[:cap(buf)])
			if err != nil {
				return
			}
			// A fetch answers with whole record batches, the first of which may begin before
			// the offset asked for; Batch.Read, unlike ReadMessage, does not skip those.
			at := f.batch.Offset() - 1
			if at < f.from {
				continue
			}
			if !yield(at, buf[:n]) {
				return
			}
		}
	}
}

// fetchLoop reads one partition from offset, handing each fetch to the claim, until the
// generation (ctx) ends. A failed fetch is retried with backoff.
func (c *Consumer) fetchLoop(ctx context.Context, partition int, offset int64, claim Claim) {
	f := &fetcher{c: c, partition: partition, buf: make([]byte, 64<<10)}
	defer f.close()
	failures := 0
	for ctx.Err() == nil {
		next, err := f.fetch(ctx, offset, claim)
		offset = next
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			c.o.Failed(fmt.Errorf("kafka: fetch %s/%d: %w", c.o.Topic, partition, err))
			c.o.Log.Warn("fetch failed; retrying", "partition", partition, "err", err)
			if !run.Sleep(ctx, run.Backoff(failures)) {
				return
			}
			continue
		}
		if failures > 0 {
			failures = 0
			c.o.Failed(nil)
		}
	}
}

// fetcher reads one partition through a connection to its leader.
type fetcher struct {
	c         *Consumer
	partition int
	buf       []byte
	conn      *kafkago.Conn
	unwatch   func() bool
}

func (f *fetcher) close() {
	if f.conn != nil {
		f.unwatch()
		_ = f.conn.Close()
		f.conn = nil
	}
}

// fetch hands the messages from offset on that one fetch returns to the claim, and returns
// where to go on from. It connects first when it has no connection; an error closes it.
func (f *fetcher) fetch(ctx context.Context, offset int64, claim Claim) (int64, error) {
	if f.conn == nil {
		var err error
		if offset, err = f.connect(ctx, offset); err != nil {
			return offset, err
		}
	}
	o := f.c.o
	asked := time.Now()
	_ = f.conn.SetDeadline(asked.Add(o.MaxWait + fetchTimeout))
	batch := f.conn.ReadBatchWith(kafkago.ReadBatchConfig{MinBytes: o.MinBytes, MaxBytes: o.MaxBytes, MaxWait: o.MaxWait})
	got := &Fetch{Partition: f.partition, HighWaterMark: batch.HighWaterMark(), Waited: time.Since(asked),
		batch: batch, from: offset, buf: &f.buf}
	claim.Fetched(ctx, got)
	next := batch.Offset()
	err := batch.Close()
	switch {
	case err == nil, errors.Is(err, kafkago.RequestTimedOut):
		// RequestTimedOut: nothing came within the wait.
		return next, nil
	case errors.Is(err, io.ErrShortBuffer):
		// A message larger than the buffer: the fetch stopped before it, read it again.
		f.buf = make([]byte, 2*cap(f.buf))
		return next, nil
	case errors.Is(err, kafkago.OffsetOutOfRange):
		next, err = f.resolve(next)
		if err == nil {
			return next, nil
		}
	}
	f.close()
	return next, fmt.Errorf("read at offset %d: %w", next, err)
}

// connect dials the partition's leader and positions the connection at offset, resolved.
func (f *fetcher) connect(ctx context.Context, offset int64) (int64, error) {
	var errs []error
	d := f.c.cfg.dialer()
	for _, broker := range f.c.cfg.Brokers {
		conn, err := d.DialLeader(ctx, "tcp", broker, f.c.o.Topic, f.partition)
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

// resolve turns offset into one the partition holds and seeks there: the first one when the
// group has committed nothing yet, and, as Kafka's consumers do with
// auto.offset.reset=earliest, for an offset the partition does not hold (retention deleted
// the messages before they were read, or the topic was recreated).
func (f *fetcher) resolve(offset int64) (int64, error) {
	_ = f.conn.SetDeadline(time.Now().Add(fetchTimeout))
	first, last, err := f.conn.ReadOffsets()
	if err != nil {
		return offset, fmt.Errorf("read the offsets of partition %d: %w", f.partition, err)
	}
	switch {
	case offset == kafkago.FirstOffset:
		offset = first
	case offset < first || offset > last:
		f.c.o.Log.Warn("the partition does not hold the offset to read; reading from its first",
			"partition", f.partition, "offset", offset, "first", first, "last", last)
		offset = first
	}
	if _, err := f.conn.Seek(offset, kafkago.SeekAbsolute|kafkago.SeekDontCheck); err != nil {
		return offset, fmt.Errorf("seek partition %d to %d: %w", f.partition, offset, err)
	}
	return offset, nil
}
