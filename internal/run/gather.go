package run

import (
	"context"
	"time"
)

// Gather is the one "batch by size or time" loop of the platform: it reads values from a
// channel into a batch that the caller holds, and hands the batch on once it holds Size
// messages, once its first message has waited Linger, and, last, when the channel closes or
// ctx ends. A value may carry several messages (a Kafka fetch); it is then split across
// batches so that none holds more than Size.
type Gather[T any] struct {
	Size   int
	Linger time.Duration
	// Add puts at most room of v's messages into the batch in hand and returns how many it
	// put, and what is left of v when that was not all of it.
	Add func(v T, room int) (added int, rest T, more bool)
	// Waited, when set, is how long a value had already waited elsewhere (a fetch held by the
	// broker): a batch it opens is handed on that much sooner.
	Waited func(v T) time.Duration
	// Flush hands the batch in hand on; the next Add starts a new one. It returns false to
	// stop gathering (a batch that was not stored must not be followed by later ones).
	Flush func() bool
}

// Run gathers until Flush returns false, in is closed or ctx ends; in the last two cases it
// flushes what it holds first. An empty batch is never flushed.
func (g Gather[T]) Run(ctx context.Context, in <-chan T) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	held := 0
	flush := func() bool {
		timer.Stop()
		if held == 0 {
			return true
		}
		held = 0
		return g.Flush()
	}
	for {
		select {
		case <-ctx.Done():
			flush()
			return
		case <-timer.C:
			if !flush() {
				return
			}
		case v, ok := <-in:
			if !ok {
				flush()
				return
			}
			linger := g.Linger
			if g.Waited != nil {
				linger -= g.Waited(v)
			}
			for more := true; more; {
				var n int
				opened := held == 0
				n, v, more = g.Add(v, g.Size-held)
				if opened && n > 0 {
					timer.Reset(max(linger, 0))
				}
				held += n
				if held >= g.Size && !flush() {
					return
				}
			}
		}
	}
}
