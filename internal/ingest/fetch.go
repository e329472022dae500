package ingest

import (
	"context"
	"time"

	"github.com/partnerstream/partnerstream/internal/kafka"
)

// Defaults of Options.FetchMinBytes and Options.FetchMaxWait.
const (
	DefaultFetchMinBytes = 512 << 10
	DefaultFetchMaxWait  = 250 * time.Millisecond
)

// fetchMaxBytes bounds one fetch, and so the messages a partition decodes before it hands
// them on: about 4,000 clicks.
const fetchMaxBytes = 1 << 20

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
// fetch wait does not add to how stale statistics get. next is where the batcher is in it.
type fetched[T any] struct {
	items  []item[T]
	waited time.Duration
	next   int
}

// Fetched decodes a fetch's messages on the partition's own goroutine, so decoding runs in
// parallel across partitions and overlaps the batcher's writes, and hands them on together.
func (g *generation[T]) Fetched(ctx context.Context, f *kafka.Fetch) {
	chunk := g.c.chunk()
	decode := g.decoders[f.Partition]
	for offset, value := range f.Records() {
		chunk = append(chunk, item[T]{partition: f.Partition, position: position{offset: offset, highWaterMark: f.HighWaterMark}})
		if decode(ctx, &chunk[len(chunk)-1], value) != nil {
			break // the generation is over; the next owner fetches these again
		}
	}
	if len(chunk) == 0 || ctx.Err() != nil {
		g.c.release(chunk)
		return
	}
	select {
	case g.items <- fetched[T]{items: chunk, waited: f.Waited}:
	case <-ctx.Done():
	}
}

// chunk returns an empty slice for a fetch's messages; release gives it back once the
// batcher has copied them, so that fetches reuse a few slices rather than allocate.
func (c *consumer[T]) chunk() []item[T] { return c.chunks.get() }

func (c *consumer[T]) release(chunk []item[T]) {
	clear(chunk) // the records' strings must not outlive their batch
	c.chunks.put(chunk[:0])
}
