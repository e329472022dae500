package ingest

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/partnerstream/partnerstream/internal/metrics"
)

// The collectors are package variables so that several Services in one process (tests,
// `partnerstream dev`) report into the same series.
var (
	lagMessages = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: metrics.Namespace, Name: "ingest_lag_messages",
		Help: "Messages in the partitions this replica consumes that are not in ClickHouse yet, as of the last batch, by topic.",
	}, []string{"topic"})
	lagSeconds = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: metrics.Namespace, Name: "ingest_lag_seconds",
		Help: "Age of the newest message made queryable, in partitions that still have a backlog (0 when caught up), by topic.",
	}, []string{"topic"})
	rowsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metrics.Namespace, Name: "ingest_rows_total",
		Help: "Rows ingest made count in ClickHouse: clicks inserted, conversion states applied, by table.",
	}, []string{"table"})
	skippedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metrics.Namespace, Name: "ingest_skipped_total",
		Help: "Messages that changed no figure, by topic and reason (duplicate, invalid).",
	}, []string{"topic", "reason"})
	batchSize = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: metrics.Namespace, Name: "ingest_batch_size_messages",
		Help:    "Messages per batch written to ClickHouse, by topic.",
		Buckets: []float64{1, 10, 100, 500, 1000, 2500, 5000, 10000, 25000, 50000},
	}, []string{"topic"})
	flushDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: metrics.Namespace, Name: "ingest_flush_duration_seconds",
		Help:    "Time to write one batch to ClickHouse and commit its offsets, by topic.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"topic"})
	flushErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metrics.Namespace, Name: "ingest_flush_errors_total",
		Help: "Failed attempts to write a batch to ClickHouse (the batch is retried), by topic.",
	}, []string{"topic"})
	awaitingClick = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: metrics.Namespace, Name: "ingest_conversions_awaiting_click",
		Help: "New conversions whose batch is held because their (signed) click is not in ClickHouse yet, as of the last attempt.",
	})
	withoutClick = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: metrics.Namespace, Name: "ingest_conversions_without_click_total",
		Help: "New conversions written without the link and sub1 of their click, which was not in ClickHouse (within --ingest-click-wait for a signed click id).",
	})
)

func init() {
	metrics.MustRegister(lagMessages, lagSeconds, rowsTotal, skippedTotal, batchSize, flushDuration, flushErrors,
		awaitingClick, withoutClick)
}

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
