package tracking_test

import (
	"io"
	"log/slog"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/partnerstream/partnerstream/internal/metrics"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// counter reads a counter of the platform registry (the recorder's counters are global, so
// tests compare before and after).
func counter(t testing.TB, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := metrics.Gatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if matches(m, labels) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func matches(m *dto.Metric, labels map[string]string) bool {
	for _, lp := range m.GetLabel() {
		if v, ok := labels[lp.GetName()]; ok && v != lp.GetValue() {
			return false
		}
	}
	return true
}
