package ingest

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/kafka"
	"github.com/partnerstream/partnerstream/internal/run"
)

// How the click watcher looks for the clicks of awaiting conversions.
const (
	clickWatchInterval = time.Second
	// awaitClickFor is how long a conversion awaits its click. A click that is not stored
	// within it was lost (the redirect dropped it), and the conversion stays under no sub1.
	awaitClickFor = 30 * 24 * time.Hour
	// republishAfter is how long the watcher trusts an arrival it published to be on its way
	// through the events consumer, which marks the conversion done, before it publishes again.
	republishAfter = time.Minute
	// idlePoll is how often the watcher looks when nothing awaited at its last look and this
	// replica wrote no awaiting conversion since: it finds those another replica wrote and did
	// not see through (it stopped), without a query every second on an idle pipeline.
	idlePoll = 30 * time.Second
)

// listAwaiting writes rows of conversions_awaiting_click: the conversions written without
// their click (done 0), and the arrivals handled (done 1, in the partition of the row they end).
func (w *Writer) listAwaiting(ctx context.Context, awaiting, arrived []Conversion) error {
	if len(awaiting)+len(arrived) == 0 {
		return nil
	}
	batch, err := w.conn.PrepareBatch(ctx, "INSERT INTO "+w.db+".conversions_awaiting_click (conversion_id, click_id, since, done)")
	if err != nil {
		return fmt.Errorf("ingest: prepare the insert of conversions awaiting their clicks: %w", err)
	}
	defer func() { _ = batch.Close() }()
	now := w.now().UTC()
	for _, c := range awaiting {
		if err := batch.Append(c.ID, c.ClickID, now, uint8(0)); err != nil {
			return fmt.Errorf("ingest: append conversion %s awaiting its click: %w", c.ID, err)
		}
	}
	for _, a := range arrived {
		if err := batch.Append(a.ID, a.ClickID, a.AwaitingSince, uint8(1)); err != nil {
			return fmt.Errorf("ingest: append conversion %s done awaiting its click: %w", a.ID, err)
		}
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("ingest: insert %d conversions awaiting their clicks: %w", len(awaiting)+len(arrived), err)
	}
	if len(awaiting) > 0 {
		select {
		case w.awaited <- struct{}{}:
		default:
		}
	}
	return nil
}

// clickWatcher publishes events.ClickArrived for every conversion in
// conversions_awaiting_click whose click is stored now. It does not change the conversion
// itself: the arrival goes to partnerstream.events keyed by the conversion id, so the one
// writer of the conversion's partition orders it among the conversion's own events
// (Writer.planConversions). Every replica watches; an arrival published twice, by two
// replicas or again after republishAfter, finds the conversion moved and changes nothing.
type clickWatcher struct {
	w        *Writer
	producer *kafka.Producer
	interval time.Duration
	now      func() time.Time
	log      *slog.Logger
	// published is when each awaiting conversion's arrival was last published.
	published map[string]time.Time
	// idle is whether the last poll, at polled, found no conversion awaiting.
	idle   bool
	polled time.Time

	mu      sync.Mutex
	failure error
}

func newClickWatcher(w *Writer, o Options) *clickWatcher {
	return &clickWatcher{w: w, producer: kafka.NewProducer(o.Kafka, kafka.TopicEvents, kafka.ProducerOptions{}),
		interval: clickWatchInterval, now: o.Now, log: o.Log.With("component", "click-watcher"), published: map[string]time.Time{}}
}

func (cw *clickWatcher) run(ctx context.Context) error {
	defer cw.producer.Close()
	run.Every(ctx, cw.interval, cw.log, "click watcher", func(ctx context.Context) error {
		if !cw.due() {
			return nil
		}
		actx, cancel := context.WithTimeout(ctx, writeTimeout)
		err := cw.poll(actx)
		cancel()
		cw.mu.Lock()
		cw.failure = err
		cw.mu.Unlock()
		return err
	})
	return nil
}

// due says whether to poll now: while conversions await, once this replica's writer listed
// one, and every idlePoll otherwise.
func (cw *clickWatcher) due() bool {
	select {
	case <-cw.w.awaited:
		return true
	default:
		return !cw.idle || cw.now().Sub(cw.polled) >= idlePoll
	}
}

func (cw *clickWatcher) check() error {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	if cw.failure != nil {
		return fmt.Errorf("click watcher: %w", cw.failure)
	}
	return nil
}

// awaitingConversion is a conversion listed in conversions_awaiting_click, not done.
type awaitingConversion struct {
	id, clickID string
	since       time.Time
}

// poll publishes the arrivals of the clicks stored since the last poll, and those published
// more than republishAfter ago that are still awaited.
func (cw *clickWatcher) poll(ctx context.Context) error {
	now := cw.now()
	awaiting, err := cw.awaiting(ctx, now.Add(-awaitClickFor))
	if err != nil {
		return err
	}
	awaitingClick.Set(float64(len(awaiting)))
	cw.idle, cw.polled = len(awaiting) == 0, now
	for id := range cw.published {
		if _, ok := awaiting[id]; !ok {
			delete(cw.published, id)
		}
	}
	var due []awaitingConversion // not published within republishAfter
	var clickIDs []string
	for id, a := range awaiting {
		if now.Sub(cw.published[id]) >= republishAfter {
			due = append(due, a)
			clickIDs = append(clickIDs, a.clickID)
		}
	}
	clicks, err := cw.w.clicksOf(ctx, clickIDs)
	if err != nil {
		return fmt.Errorf("ingest: look up the clicks of awaiting conversions: %w", err)
	}
	var recs []kafka.Record
	var published []string
	for _, a := range due {
		d, ok := clicks[a.clickID]
		if !ok {
			continue
		}
		d.ConversionID, d.Since = a.id, a.since
		rec, err := arrivalRecord(d, now)
		if err != nil {
			return err
		}
		recs = append(recs, rec)
		published = append(published, a.id)
	}
	if len(recs) == 0 {
		return nil
	}
	if err := kafka.FirstError(cw.producer.Produce(ctx, recs)); err != nil {
		return fmt.Errorf("ingest: publish %d click arrivals: %w", len(recs), err)
	}
	for _, id := range published {
		cw.published[id] = now
	}
	return nil
}

// awaiting reads the conversions awaiting their clicks since after. Both rows of a
// conversion done are read until the engine merges them, hence max(done).
func (cw *clickWatcher) awaiting(ctx context.Context, after time.Time) (map[string]awaitingConversion, error) {
	rows, err := cw.w.conn.Query(ctx, "SELECT conversion_id, any(click_id), min(since) FROM "+cw.w.db+
		".conversions_awaiting_click WHERE since >= toDateTime("+strconv.FormatInt(after.Unix(), 10)+
		") GROUP BY conversion_id HAVING max(done) = 0")
	if err != nil {
		return nil, fmt.Errorf("ingest: read the conversions awaiting their clicks: %w", err)
	}
	defer rows.Close()
	awaiting := map[string]awaitingConversion{}
	for rows.Next() {
		var a awaitingConversion
		if err := rows.Scan(&a.id, &a.clickID, &a.since); err != nil {
			return nil, fmt.Errorf("ingest: read the conversions awaiting their clicks: %w", err)
		}
		awaiting[a.id] = a
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ingest: read the conversions awaiting their clicks: %w", err)
	}
	return awaiting, nil
}

// arrivalRecord is the events.ClickArrived of d, keyed by the conversion id like the
// conversion's own events. It names no company, so the deliver component sends it nowhere.
func arrivalRecord(d events.ClickArrivedData, now time.Time) (kafka.Record, error) {
	data, err := json.Marshal(d)
	if err != nil {
		return kafka.Record{}, fmt.Errorf("ingest: encode the arrival of click %s: %w", d.ClickID, err)
	}
	value, err := json.Marshal(events.Envelope{ID: ids.New(ids.Event), Type: events.ClickArrived, OccurredAt: now.UTC(), Data: data})
	if err != nil {
		return kafka.Record{}, fmt.Errorf("ingest: encode the arrival of click %s: %w", d.ClickID, err)
	}
	return kafka.Record{Key: []byte(d.ConversionID), Value: value}, nil
}
