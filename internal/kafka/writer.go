package kafka

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	kafkago "github.com/segmentio/kafka-go"

	"github.com/partnerstream/partnerstream/internal/metrics"
)

// WriterOption adjusts a writer made by NewWriter. It receives the kafka-go writer itself,
// so a caller with needs of its own (an async Completion callback, fewer retries) can pass a
// function literal instead of this package growing an option per field.
type WriterOption func(*kafkago.Writer)

// WithBatchTimeout sets how long a partial batch waits for company before it is sent. A
// synchronous caller waits this long on every write it makes alone, so the click redirect
// uses about 1 ms; concurrent writers still share a request.
func WithBatchTimeout(d time.Duration) WriterOption {
	return func(w *kafkago.Writer) { w.BatchTimeout = d }
}

// WithBatchSize sets the most messages per partition request. kafka-go allocates a
// BatchSize-long slice for every batch, so large values cost CPU on every write.
func WithBatchSize(n int) WriterOption {
	return func(w *kafkago.Writer) { w.BatchSize = n }
}

// ProduceDuration is the latency of produce requests, from the producer handing a message
// over to the broker acknowledging it (or the write failing), by topic. Every producer of
// the platform observes it so one dashboard covers clicks and domain events.
var ProduceDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
	Namespace: metrics.Namespace, Name: "kafka_produce_duration_seconds",
	Help:    "Latency of Kafka produce calls until the brokers acknowledge (or the write fails), by topic.",
	Buckets: []float64{.0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
}, []string{"topic"})

func init() { metrics.MustRegister(ProduceDuration) }
