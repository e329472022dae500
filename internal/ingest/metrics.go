package ingest

import (
	"sync"
	"time"

	"github.com/partnerstream/partnerstream/internal/metrics"
)

// The collectors are package variables so that several Services in one process (tests,
// `partnerstream dev`) report into the same series.
var (
	lagMessages     = metrics.NewGaugeVec("ingest_lag_messages", "Messages in the partitions this replica consumes that are not in ClickHouse yet, as of the last batch, by topic.", "topic")
	lagSeconds      = metrics.NewGaugeVec("ingest_lag_seconds", "Age of the newest message made queryable, in partitions that still have a backlog (0 when caught up), by topic.", "topic")
	rowsTotal       = metrics.NewCounterVec("ingest_rows_total", "Rows ingest made count in ClickHouse: clicks inserted, conversion states applied, by table.", "table")
	skippedTotal    = metrics.NewCounterVec("ingest_skipped_total", "Messages that changed no figure, by topic and reason (duplicate, invalid).", "topic", "reason")
	batchSize       = metrics.NewHistogramVec("ingest_batch_size_messages", "Messages per batch written to ClickHouse, by topic.", []float64{1, 10, 100, 500, 1000, 2500, 5000, 10000, 25000, 50000}, "topic")
	flushDuration   = metrics.NewHistogramVec("ingest_flush_duration_seconds", "Time to write one batch to ClickHouse and commit its offsets, by topic.", []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}, "topic")
	flushErrors     = metrics.NewCounterVec("ingest_flush_errors_total", "Failed attempts to write a batch to ClickHouse (the batch is retried), by topic.", "topic")
	awaitingClick   = metrics.NewGauge("ingest_conversions_awaiting_click", "Conversions written without the sub1 of their signed click, which is not in ClickHouse yet, as of the last look (every replica reports the same count).")
	withoutClick    = metrics.NewCounter("ingest_conversions_without_click_total", "New conversions written without the link and sub1 of their click, which was not in ClickHouse then.")
	clicksDuplicate = metrics.NewCounter("clicks_duplicate_total", "Clicks stored as a repeat of the same visitor on the same link in the same UTC hour (ingest decides).")
	movedToClick    = metrics.NewCounter("ingest_conversions_moved_to_click_total", "Conversions moved to the link and sub1 of a click that reached ClickHouse after them.")
)

// partitionLagTTL drops a partition from the lag gauges when no batch has touched it for this
// long: after a rebalance it belongs to another replica, which reports it.
const partitionLagTTL = time.Minute

// lagTracker turns the positions of each flushed batch into the lag gauges of one topic.
type lagTracker struct {
	topic string
	now   func() time.Time
	mu    sync.Mutex
	parts map[int]partitionLag
}

type partitionLag struct {
	messages int64
	seconds  float64
	seen     time.Time
}

func newLagTracker(topic string, now func() time.Time) *lagTracker {
	return &lagTracker{topic: topic, now: now, parts: map[int]partitionLag{}}
}

// observe records a partition's last message made queryable: offset and message time, and
// the partition's high-water mark when it was fetched.
func (l *lagTracker) observe(partition int, offset, highWaterMark int64, produced time.Time) {
	now := l.now()
	p := partitionLag{messages: max(highWaterMark-offset-1, 0), seen: now}
	if p.messages > 0 && !produced.IsZero() {
		p.seconds = max(now.Sub(produced).Seconds(), 0)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.parts[partition] = p
}

// publish sets the topic's gauges: the backlog summed over partitions and the worst delay.
func (l *lagTracker) publish() (messages int64, seconds float64) {
	now := l.now()
	l.mu.Lock()
	for id, p := range l.parts {
		if now.Sub(p.seen) > partitionLagTTL {
			delete(l.parts, id)
			continue
		}
		messages += p.messages
		seconds = max(seconds, p.seconds)
	}
	l.mu.Unlock()
	lagMessages.WithLabelValues(l.topic).Set(float64(messages))
	lagSeconds.WithLabelValues(l.topic).Set(seconds)
	return messages, seconds
}
