package kafka

import "github.com/partnerstream/partnerstream/internal/metrics"

// ProduceDuration is the latency of produce requests, from the producer handing a message
// over to the broker acknowledging it (or the write failing), by topic. Every producer of
// the platform observes it so one dashboard covers clicks and domain events.
var ProduceDuration = metrics.NewHistogramVec("kafka_produce_duration_seconds",
	"Latency of Kafka produce calls until the brokers acknowledge (or the write fails), by topic.", []float64{.0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}, "topic")
