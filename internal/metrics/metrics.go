// Package metrics is the platform's Prometheus registry. It is controller-runtime's registry,
// so the controller's own metrics and ours come out of one /metrics endpoint, also when every
// component runs in one process (`partnerstream dev`).
package metrics

import (
	"errors"
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
	// controller-runtime registers the Go and process collectors on its registry when its
	// controller package initialises; importing it here guarantees they exist (and that we
	// never register them a second time).
	_ "sigs.k8s.io/controller-runtime/pkg/controller"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/partnerstream/partnerstream/internal/version"
)

// Namespace prefixes every metric of the platform.
const Namespace = "partnerstream"

// Registry is where components register their collectors.
var Registry = ctrlmetrics.Registry

// Gatherer is what /metrics serves.
var Gatherer prometheus.Gatherer = ctrlmetrics.Registry

func init() {
	buildInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace,
		Name:      "build_info",
		Help:      "Build information of the running binary; the value is always 1.",
	}, []string{"version", "revision", "goversion"})
	buildInfo.WithLabelValues(version.Version, version.Revision, runtime.Version()).Set(1)
	MustRegister(buildInfo)
}

// MustRegister registers collectors, tolerating one that is already registered (components
// built twice in one test process share the same collectors).
func MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := Registry.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				continue
			}
			panic(err)
		}
	}
}

// register registers c and returns it: the New* helpers below declare a metric in one line.
func register[C prometheus.Collector](c C) C {
	MustRegister(c)
	return c
}

// NewCounter registers and returns the counter partnerstream_<name>.
func NewCounter(name, help string) prometheus.Counter {
	return register(prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help}))
}

// NewCounterVec registers and returns the counter partnerstream_<name> with labels.
func NewCounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return register(prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: name, Help: help}, labels))
}

// NewGauge registers and returns the gauge partnerstream_<name>.
func NewGauge(name, help string) prometheus.Gauge {
	return register(prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: name, Help: help}))
}

// NewGaugeVec registers and returns the gauge partnerstream_<name> with labels.
func NewGaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return register(prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: name, Help: help}, labels))
}

// NewHistogram registers and returns the histogram partnerstream_<name>.
func NewHistogram(name, help string, buckets []float64) prometheus.Histogram {
	return register(prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: name, Help: help, Buckets: buckets}))
}

// NewHistogramVec registers and returns the histogram partnerstream_<name> with labels.
func NewHistogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return register(prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: name, Help: help, Buckets: buckets}, labels))
}
