package tracking

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/partnerstream/partnerstream/internal/run"
)

// Settings of the replay loop and the async drain.
const (
	// replayWindow is how many spooled clicks go out in one replay round.
	replayWindow = 500
	// drainBatch is the most clicks an async worker takes from the queue at once.
	drainBatch  = 1000
	drainLinger = time.Millisecond
	// replayPoll is how often the replay loop looks at the spool without being told.
	replayPoll = time.Second
)

// Run replays the spool and drains the async queue until ctx ends. Then it stops taking
// clicks into the queue, flushes it (to Kafka, or else to the spool), makes one bounded
// attempt to empty the spool, and closes the producer and the spool. Stop the HTTP server
// before canceling ctx: a click recorded after Run returned is dropped.
func (r *Recorder) Run(ctx context.Context) error {
	replayCtx, stopReplay := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Go(func() { r.replayLoop(replayCtx) })
	if r.o.Mode == ModeAsync {
		for range r.o.Workers {
			wg.Go(r.drain)
		}
	}
	<-ctx.Done()

	r.setState(recorderStateClosing)
	stopReplay()
	if r.o.Mode == ModeAsync {
		close(r.queue) // no click enters it once closing: the workers empty it and return
	}
	wg.Wait()
	if r.spool.Size() > 0 {
		fctx, cancel := context.WithTimeout(context.Background(), r.o.ShutdownFlush)
		if err := r.replay(fctx); err != nil {
			r.o.Log.Warn("clicks: spool not emptied on shutdown; it is replayed at the next start", "bytes", r.spool.Size(), "err", err)
		}
		cancel()
	}
	r.setState(recorderStateClosed)
	// Close waits for every write under way, so every write learns its outcome.
	r.p.shutdown()
	serr := r.spool.Close()
	if n := r.spool.Size(); n > 0 {
		r.o.Log.Info("clicks: spool kept for the next start", "bytes", n)
	}
	return serr
}

// setState waits for the Record calls under way, which hold the read lock.
func (r *Recorder) setState(s int) {
	r.stateMu.Lock()
	r.state = s
	r.stateMu.Unlock()
}

// drain is an async worker: it sends what the queue holds in groups of up to drainBatch,
// each sent once full or once its first click has waited drainLinger. Run closes the queue
// once no click can enter it any more, and the worker returns when it is empty.
func (r *Recorder) drain() {
	batch := make([]item, 0, drainBatch)
	run.Gather[item]{Size: drainBatch, Linger: drainLinger,
		Add: func(it item, _ int) (int, item, bool) {
			batch = append(batch, it)
			return 1, item{}, false
		},
		Flush: func() bool {
			// A spool error is already counted and logged; there is nobody to tell.
			_ = r.deliver(batch, time.Now().Add(r.o.AsyncAckTimeout), nil)
			batch = batch[:0]
			return true
		},
	}.Run(context.Background(), r.queue)
}

// replayLoop replays the spool whenever it has records, with a growing pause after a failed
// round.
func (r *Recorder) replayLoop(ctx context.Context) {
	tick := time.NewTicker(replayPoll)
	defer tick.Stop()
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.kick:
		case <-tick.C:
		}
		if r.spool.Size() == 0 {
			r.recover()
			continue
		}
		err := r.replay(ctx)
		if err == nil {
			failures = 0
			continue
		}
		if ctx.Err() != nil {
			return
		}
		failures++
		r.o.Log.Warn("clicks: spool replay failed; retrying", "in", run.Backoff(failures), "spool_bytes", r.spool.Size(), "err", err)
		if !run.Sleep(ctx, run.Backoff(failures)) {
			return
		}
	}
}

// replay sends the sealed segments to Kafka, oldest first, and deletes each once all its
// clicks are in Kafka. It returns nil when the spool is empty.
func (r *Recorder) replay(ctx context.Context) error {
	for {
		seg, ok, err := r.spool.Oldest()
		if err != nil || !ok {
			return err
		}
		payloads, skipped, err := readSegment(seg.path)
		if err != nil {
			return err
		}
		if skipped > 0 {
			clicksDropped.WithLabelValues(dropSpoolCorrupt).Inc()
			r.o.Log.Warn("clicks: spool segment ends in a torn or corrupt record; skipping it", "segment", seg.path, "bytes", skipped)
		}
		if r.replaySeq != seg.seq || r.confirmed == nil {
			r.replaySeq, r.confirmed = seg.seq, map[string]struct{}{}
		}
		for start := 0; start < len(payloads); start += replayWindow {
			if err := r.replayWindow(ctx, payloads[start:min(start+replayWindow, len(payloads))]); err != nil {
				return err
			}
			r.recover()
		}
		if err := r.spool.Remove(seg); err != nil {
			return err
		}
	}
}

// replayWindow gets a window of spooled clicks into Kafka, retrying the ones that fail, and
// returns only once all are in (or ctx ends).
func (r *Recorder) replayWindow(ctx context.Context, payloads [][]byte) error {
	var send []item
	for _, p := range payloads {
		var head struct {
			ClickID string `json:"click_id"`
		}
		if err := json.Unmarshal(p, &head); err != nil || head.ClickID == "" {
			clicksDropped.WithLabelValues(dropSpoolCorrupt).Inc()
			r.o.Log.Error("clicks: spooled record is not a click; skipping it", "err", err)
			continue
		}
		if _, ok := r.confirmed[head.ClickID]; ok {
			continue
		}
		if d := r.takeInFlight(head.ClickID); d != nil {
			d.wait() // bounded by the producer's attempts; see writeAll
			if d.err == nil {
				clicksReplayed.Inc() // the first write made it after all
				r.confirmed[head.ClickID] = struct{}{}
				continue
			}
		}
		send = append(send, item{id: head.ClickID, payload: p})
	}
	for attempt := 1; len(send) > 0; attempt++ {
		failed, err := r.writeAll(send)
		if len(failed) == 0 {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		send = failed
		level := slog.LevelDebug
		if attempt == 1 {
			level = slog.LevelWarn
		}
		r.o.Log.Log(ctx, level, "clicks: Kafka refused spooled clicks; retrying", "clicks", len(send), "attempt", attempt, "err", err)
		if !run.Sleep(ctx, run.Backoff(attempt)) {
			return ctx.Err()
		}
	}
	return nil
}

// writeAll sends the items and waits for every outcome; it returns the ones that failed and
// why.
//
// It waits even when the replay is being stopped: a replay that stopped listening could not
// tell which clicks made it, and would send them again. The wait is bounded by the producer
// (writeAttempts tries of at most writeTimeout each).
func (r *Recorder) writeAll(items []item) ([]item, error) {
	ds := r.submit(items)
	var failed []item
	var cause error
	for i, d := range ds {
		d.wait()
		if d.err != nil {
			failed, cause = append(failed, items[i]), d.err
			continue
		}
		r.confirmed[items[i].id] = struct{}{}
		clicksReplayed.Inc()
	}
	return failed, cause
}
