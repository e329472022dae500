package main

import (
	"math"
	"slices"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/partnerstream/partnerstream/internal/kafka"
	"github.com/partnerstream/partnerstream/internal/metrics"
	"github.com/partnerstream/partnerstream/internal/tracking"
)

// counters are the recorder's counters of one mode.
type counters struct{ recorded, spooled, dropped float64 }

func (c counters) minus(o counters) counters {
	return counters{c.recorded - o.recorded, c.spooled - o.spooled, c.dropped - o.dropped}
}

func clickCounters(mode tracking.Mode) counters {
	if mode == "" {
		return counters{}
	}
	mfs, err := metrics.Gatherer.Gather()
	if err != nil {
		return counters{}
	}
	var c counters
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch mf.GetName() {
			case "partnerstream_clicks_recorded_total":
				if label(m, "mode") == string(mode) {
					c.recorded = m.GetCounter().GetValue()
				}
			case "partnerstream_clicks_spooled_total":
				c.spooled = m.GetCounter().GetValue()
			case "partnerstream_clicks_dropped_total":
				c.dropped += m.GetCounter().GetValue()
			}
		}
	}
	return c
}

// histogram is the cumulative counts of a Prometheus histogram by upper bound.
type histogram struct {
	bounds []float64
	counts []uint64
}

// produceLatency reads partnerstream_kafka_produce_duration_seconds of the clicks topic.
func produceLatency() histogram {
	var h histogram
	mfs, err := metrics.Gatherer.Gather()
	if err != nil {
		return h
	}
	for _, mf := range mfs {
		if mf.GetName() != "partnerstream_kafka_produce_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label(m, "topic") != kafka.TopicClicks {
				continue
			}
			for _, b := range m.GetHistogram().GetBucket() {
				h.bounds = append(h.bounds, b.GetUpperBound())
				h.counts = append(h.counts, b.GetCumulativeCount())
			}
		}
	}
	return h
}

func (h histogram) minus(o histogram) histogram {
	d := histogram{bounds: h.bounds, counts: slices.Clone(h.counts)}
	for i := range d.counts {
		if i < len(o.counts) {
			d.counts[i] -= o.counts[i]
		}
	}
	return d
}

// quantile is the upper bound of the bucket that holds quantile q, "-" without data.
func (h histogram) quantile(q float64) string {
	if len(h.counts) == 0 || h.counts[len(h.counts)-1] == 0 {
		return "-"
	}
	want := uint64(math.Ceil(q * float64(h.counts[len(h.counts)-1])))
	for i, c := range h.counts {
		if c >= want {
			return "≤ " + round(time.Duration(h.bounds[i]*float64(time.Second)))
		}
	}
	return "> " + round(time.Duration(h.bounds[len(h.bounds)-1]*float64(time.Second)))
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}
