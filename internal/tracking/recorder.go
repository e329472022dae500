package tracking

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/kafka"
)

// Mode is how the redirect waits for its click to be safe.
type Mode string

const (
	// ModeAck answers the redirect once Kafka (every in-sync replica) acknowledged the
	// click, or, when Kafka is slow or down, once the click is fsync'd in the spool.
	ModeAck Mode = "ack"
	// ModeAsync answers at once and hands the click to a bounded in-memory queue; a full
	// queue spools the click before answering. A crash of the process loses what is queued.
	ModeAsync Mode = "async"
)

// ParseMode reads a --click-mode value.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeAck, ModeAsync:
		return m, nil
	}
	return "", fmt.Errorf("click mode %q is not ack or async", s)
}

// RecorderOptions configure a Recorder. Zero values take the defaults.
type RecorderOptions struct {
	Kafka kafka.Config
	Mode  Mode // default ModeAck
	// AckTimeout is how long Kafka has to acknowledge a click before it is spooled
	// in ack mode (default 50 ms): it bounds the redirect's added latency when Kafka is
	// slow.
	AckTimeout time.Duration
	// AsyncAckTimeout is the same for the async mode's queue workers (default 1 s): nobody
	// waits for them, so a slow Kafka should fill the queue rather than the spool.
	AsyncAckTimeout time.Duration
	// QueueSize bounds the async mode's queue (default 16384 clicks).
	QueueSize int
	// Workers drain the async queue (default 2).
	Workers int
	// SpoolDir holds the spool; one process at a time may use it.
	SpoolDir string
	// SpoolMaxBytes bounds the spool (default 1 GiB); beyond it clicks are dropped.
	SpoolMaxBytes int64
	// SpoolSegmentBytes is the size at which a spool segment is sealed (default 4 MiB).
	SpoolSegmentBytes int64
	// ShutdownFlush bounds the last attempt to empty the spool into Kafka on shutdown
	// (default 5 s); what is left is replayed at the next start.
	ShutdownFlush time.Duration
	Log           *slog.Logger
}

func (o *RecorderOptions) defaults() {
	if o.Mode == "" {
		o.Mode = ModeAck
	}
	if o.AckTimeout <= 0 {
		o.AckTimeout = 50 * time.Millisecond
	}
	if o.AsyncAckTimeout <= 0 {
		o.AsyncAckTimeout = time.Second
	}
	if o.QueueSize <= 0 {
		o.QueueSize = 16384
	}
	if o.Workers <= 0 {
		o.Workers = 2
	}
	if o.SpoolMaxBytes <= 0 {
		o.SpoolMaxBytes = 1 << 30
	}
	if o.SpoolSegmentBytes <= 0 {
		o.SpoolSegmentBytes = 4 << 20
	}
	if o.ShutdownFlush <= 0 {
		o.ShutdownFlush = 5 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
}

// Producer settings of the click writer. Few, quick retries: a click that is not
// acknowledged within AckTimeout is spooled anyway, and its write must resolve (succeed or
// fail) soon so the replay knows whether to send it again.
const (
	writeAttempts        = 3
	writeBackoffMin      = 20 * time.Millisecond
	writeBackoffMax      = 250 * time.Millisecond
	writeTimeout         = 5 * time.Second
	recorderStateOpen    = 0
	recorderStateClosing = 1
	recorderStateClosed  = 2
)

// errNoAck is why clicks are spooled when Kafka did not answer before the deadline.
var errNoAck = errors.New("no acknowledgement before the deadline")

// ErrClosed is returned by Record after the recorder has shut down.
var ErrClosed = errors.New("tracking: click recorder is closed")

// Recorder gets clicks into Kafka topic partnerstream.clicks without losing one: a click is
// acknowledged by Kafka or fsync'd in the local spool before Record returns (ack mode), and
// a background loop replays the spool, in order, once Kafka answers again, including what a
// previous process left behind.
//
// Once the spool is in use, new clicks go straight to it until a replay round succeeds:
// that keeps a Kafka outage from costing every redirect the full AckTimeout.
//
// A click whose write was still under way when AckTimeout expired is spooled too, and the
// outcome of that write is remembered: the replay skips the click if the write succeeded
// after all. That is what keeps a broker that comes back from receiving the click twice.
// Only a crash between the two can still duplicate a click (at-least-once): consumers
// dedupe by click_id.
type Recorder struct {
	o        RecorderOptions
	p        *producer
	spool    *spool
	recorded prometheus.Counter

	degraded atomic.Bool
	queue    chan item
	kick     chan struct{} // wakes the replay loop

	stateMu sync.RWMutex
	state   int

	// ackMu guards the ack mode's grouping: ackNext gathers clicks while ackBusy (a group
	// is being delivered).
	ackMu   sync.Mutex
	ackNext *ackGroup
	ackBusy bool

	// inFlight are spooled clicks whose first write had not finished, by click id.
	inFlightMu sync.Mutex
	inFlight   map[string]*kafkaWrite

	// confirmed are the clicks of segment replaySeq known to be in Kafka, so a round that
	// stopped half way (Kafka failing again, shutdown) does not send them a second time.
	replaySeq uint64
	confirmed map[string]struct{}
}

type item struct {
	id      string
	payload []byte
	// buf is payload's pooled buffer for a click of Record (nil for a replayed one): release
	// returns it once neither the producer nor the spool needs the bytes.
	buf *[]byte
}

// payloads recycles the buffers clicks are encoded into, so the hot path does not allocate
// one per click.
var payloads = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// maxPooledPayload keeps the rare click with a huge user agent and referrer from pinning a
// large buffer in the pool.
const maxPooledPayload = 8 << 10

func (it item) release() {
	if it.buf == nil || cap(it.payload) > maxPooledPayload {
		return
	}
	*it.buf = it.payload[:0]
	payloads.Put(it.buf)
}

// key is the click's message key: its visitor, so that one ingest replica sees all of a
// visitor's clicks and decides which are unique, and every copy of a click goes where the
// first did; a click without a visitor (spooled by a redirect of before) is keyed by its id.
// The payload starts with the id and the visitor (encodeClick writes them first, and neither
// needs escaping), so the key is a slice of it rather than a copy.
func (it item) key() []byte {
	const idStart = len(`{"click_id":"`)
	idEnd := idStart + len(it.id)
	if idEnd >= len(it.payload) || string(it.payload[idStart:idEnd]) != it.id {
		return []byte(it.id)
	}
	const visitor = `","visitor":"`
	rest := it.payload[idEnd:]
	if len(rest) < len(visitor)+visitorIDLen+1 || string(rest[:len(visitor)]) != visitor {
		return it.payload[idStart:idEnd:idEnd]
	}
	start := idEnd + len(visitor)
	end := start + visitorIDLen
	if it.payload[end] != '"' {
		return it.payload[idStart:idEnd:idEnd]
	}
	return it.payload[start:end:end]
}

// releaseAll releases the items once the spool has copied them.
func releaseAll(items []item) {
	for _, it := range items {
		it.release()
	}
}

// kafkaWrite is one click message's write to Kafka, whose outcome the producer reports
// (Recorder.submit): err is set before done closes. The writes handed to the producer
// together learn their outcomes at the same moment, so they share done: a channel per click
// cost the async workers an allocation and a wait each.
type kafkaWrite struct {
	id   string
	done <-chan struct{}
	err  error
}

// wait blocks until the write's outcome is known.
func (d *kafkaWrite) wait() { <-d.done }

// finished reports whether the write's outcome is known.
func (d *kafkaWrite) finished() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// NewRecorder opens the spool and the producer. Call Run to replay the spool and, in async
// mode, to drain the queue; Record works as soon as this returns.
func NewRecorder(o RecorderOptions) (*Recorder, error) {
	o.defaults()
	if _, err := ParseMode(string(o.Mode)); err != nil {
		return nil, err
	}
	if o.SpoolDir == "" {
		return nil, errors.New("tracking: a spool directory is required")
	}
	if err := o.Kafka.Validate(); err != nil {
		return nil, err
	}
	sp, err := openSpool(o.SpoolDir, o.SpoolMaxBytes, o.SpoolSegmentBytes, func(n int64) { spoolBytes.Set(float64(n)) })
	if err != nil {
		return nil, err
	}
	r := &Recorder{o: o, spool: sp, recorded: clicksRecorded.WithLabelValues(string(o.Mode)),
		queue: make(chan item, o.QueueSize), kick: make(chan struct{}, 1), inFlight: map[string]*kafkaWrite{}}
	r.p = newProducer(o.Kafka, kafka.TopicClicks)
	if sp.Size() > 0 {
		// Left by a previous process: replay it first thing, and spool new clicks behind it
		// until Kafka has taken some.
		r.degraded.Store(true)
		r.wake()
	}
	return r, nil
}

// Name implements run.Component.
func (r *Recorder) Name() string { return "click-recorder" }

// Mode returns the recording mode.
func (r *Recorder) Mode() Mode { return r.o.Mode }

// SpoolBytes returns the bytes waiting in the spool.
func (r *Recorder) SpoolBytes() int64 { return r.spool.Size() }

// Record makes the click safe according to the mode. An error means the click was dropped
// (and counted); the redirect should still be answered. ctx is not used to give up: a
// visitor who goes away must not cancel its click.
func (r *Recorder) Record(_ context.Context, c events.Click) error {
	buf := payloads.Get().(*[]byte)
	it := item{id: c.ClickID, payload: encodeClick((*buf)[:0], &c), buf: buf}
	r.stateMu.RLock()
	defer r.stateMu.RUnlock()
	switch {
	case r.state == recorderStateClosed:
		clicksDropped.WithLabelValues(dropClosed).Inc()
		return ErrClosed
	case r.o.Mode == ModeAsync && r.state == recorderStateOpen:
		select {
		case r.queue <- it:
			return nil
		default:
			defer it.release()
			return r.toSpool([]item{it})
		}
	}
	if r.o.Mode == ModeAck {
		return r.recordAck(it)
	}
	// Async mode shutting down: nothing may wait in memory any more.
	return r.deliver([]item{it}, time.Now().Add(r.o.AckTimeout), nil)
}

// ackGroup is the ack-mode clicks that arrived while the previous group was being delivered:
// they are handed to the producer in one call and wait together. One call per group instead
// of one per click saves each click the producer's per-call work (partition lookup,
// batching, a timer), and the broker gets fuller batches.
type ackGroup struct {
	// start is when the first click arrived: AckTimeout counts from there, so waiting for
	// the previous group's delivery does not extend the bound.
	start time.Time
	items []item
	errs  []error // per item, set before done closes
	done  chan struct{}
}

// recordAck joins the group being gathered and waits for its delivery. When no delivery is
// under way the click's own group is delivered at once; otherwise the delivery under way
// starts the next group when it ends. There is one delivery at a time, so a group holds
// what arrived during one Kafka round trip: larger under load, a single click when idle.
func (r *Recorder) recordAck(it item) error {
	r.ackMu.Lock()
	g := r.ackNext
	if g == nil {
		g = &ackGroup{start: time.Now(), done: make(chan struct{})}
		r.ackNext = g
	}
	i := len(g.items)
	g.items = append(g.items, it)
	lead := !r.ackBusy
	if lead {
		r.ackBusy, r.ackNext = true, nil
	}
	r.ackMu.Unlock()
	if lead {
		r.deliverAck(g)
	}
	<-g.done
	return g.errs[i]
}

// deliverAck delivers g, then the group gathered meanwhile (on a new goroutine, so the
// caller's redirect is answered now), until no click is waiting.
func (r *Recorder) deliverAck(g *ackGroup) {
	g.errs = make([]error, len(g.items))
	_ = r.deliver(g.items, g.start.Add(r.o.AckTimeout), g.errs)
	close(g.done)
	r.ackMu.Lock()
	next := r.ackNext
	r.ackNext = nil
	if next == nil {
		r.ackBusy = false
	}
	r.ackMu.Unlock()
	if next != nil {
		go r.deliverAck(next)
	}
}

// deliver writes the items to Kafka and waits until deadline; whatever is not acknowledged by
// then goes to the spool. It releases the items' buffers except those of writes still under
// way, which the producer holds until it reports their outcome. The error is that of the
// items the spool refused (dropped); errs, when not nil, gets it for each of them.
func (r *Recorder) deliver(items []item, deadline time.Time, errs []error) error {
	if len(items) == 0 {
		return nil
	}
	if r.degraded.Load() {
		defer releaseAll(items)
		return fill(errs, r.toSpool(items))
	}
	ds := r.submit(items)
	wait := time.NewTimer(time.Until(deadline))
	select {
	case <-ds[0].done:
	case <-wait.C:
	}
	wait.Stop()
	var left []item
	var leftAt []int
	var pending []*kafkaWrite
	var cause error
	for i, d := range ds {
		it := items[i] // a copy: the producer may still be reading items
		switch {
		case !d.finished():
			pending = append(pending, d)
			// The producer still holds the bytes: leave the buffer to the garbage collector.
			it.buf = nil
		case d.err == nil:
			r.recorded.Inc()
			it.release()
			continue
		default:
			cause = d.err
		}
		left, leftAt = append(left, it), append(leftAt, i)
	}
	if len(left) == 0 {
		return nil
	}
	defer releaseAll(left)
	if cause == nil {
		cause = errNoAck
	}
	r.degrade(cause)
	// Remember the unfinished writes before their records can reach the replay.
	r.track(pending)
	if err := r.toSpool(left); err != nil {
		r.untrack(pending)
		if errs != nil {
			for _, i := range leftAt {
				errs[i] = err
			}
		}
		return err
	}
	return nil
}

// fill sets every element of errs (when not nil) to err, and returns err.
func fill(errs []error, err error) error {
	for i := range errs {
		errs[i] = err
	}
	return err
}

// submit hands the items to the producer as one group and returns their writes,
// whose outcomes the producer reports when it knows them.
func (r *Recorder) submit(items []item) []*kafkaWrite {
	done := make(chan struct{})
	writes := make([]kafkaWrite, len(items))
	ds := make([]*kafkaWrite, len(items))
	for i, it := range items {
		writes[i] = kafkaWrite{id: it.id, done: done}
		ds[i] = &writes[i]
	}
	r.p.start(items, func(errs []error) {
		if errs != nil {
			for i, d := range ds {
				d.err = errs[i]
			}
		}
		close(done)
	})
	return ds
}

func (r *Recorder) degrade(cause error) {
	if r.degraded.CompareAndSwap(false, true) {
		r.o.Log.Warn("clicks: Kafka did not acknowledge in time; spooling clicks until it does", "err", cause)
	}
}

func (r *Recorder) recover() {
	if r.degraded.CompareAndSwap(true, false) {
		r.o.Log.Info("clicks: Kafka acknowledges again; recording directly")
	}
}

func (r *Recorder) track(ds []*kafkaWrite) {
	if len(ds) == 0 {
		return
	}
	r.inFlightMu.Lock()
	for _, d := range ds {
		r.inFlight[d.id] = d
	}
	r.inFlightMu.Unlock()
}

func (r *Recorder) untrack(ds []*kafkaWrite) {
	r.inFlightMu.Lock()
	for _, d := range ds {
		delete(r.inFlight, d.id)
	}
	r.inFlightMu.Unlock()
}

// takeInFlight returns and forgets the unfinished first write of a spooled click, if any.
func (r *Recorder) takeInFlight(id string) *kafkaWrite {
	r.inFlightMu.Lock()
	defer r.inFlightMu.Unlock()
	d := r.inFlight[id]
	delete(r.inFlight, id)
	return d
}

// toSpool appends the items to the spool (one fsync for all) and wakes the replay loop.
func (r *Recorder) toSpool(items []item) error {
	payloads := make([][]byte, len(items))
	for i, it := range items {
		payloads[i] = it.payload
	}
	err := r.spool.Append(payloads...)
	if err == nil {
		clicksSpooled.Add(float64(len(items)))
		r.wake()
		return nil
	}
	reason := dropSpoolError
	switch {
	case errors.Is(err, ErrSpoolFull):
		reason = dropSpoolFull
	case errors.Is(err, errSpoolClosed):
		reason = dropClosed
	}
	clicksDropped.WithLabelValues(reason).Add(float64(len(items)))
	r.o.Log.Error("clicks: dropped: Kafka did not acknowledge and the spool refused them", "clicks", len(items), "reason", reason, "err", err)
	return fmt.Errorf("tracking: click dropped (%s): %w", reason, err)
}

func (r *Recorder) wake() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}
