// Package metricstest reads the platform's metrics in tests.
package metricstest

import (
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/partnerstream/partnerstream/internal/metrics"
)

// Value reads a series of the platform's registry: a counter's or gauge's value, or a
// histogram's number of observations; 0 when the series does not exist. An empty label
// reads the series of a metric without labels.
func Value(t testing.TB, name, label, value string) float64 {
	t.Helper()
	families, err := metrics.Gatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if label == "" && len(m.GetLabel()) == 0 {
				return sample(m)
			}
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return sample(m)
				}
			}
		}
	}
	return 0
}

func sample(m *dto.Metric) float64 {
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetHistogram() != nil:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return 0
}
