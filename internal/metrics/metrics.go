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
