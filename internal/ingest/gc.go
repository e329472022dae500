package ingest

import (
	"os"
	"runtime/debug"
)

// GCPercent is the garbage collector's target (GOGC) that TuneGC sets. Ingest allocates
// batch-sized buffers for every insert (the ClickHouse driver's columns) while its live heap
// stays small, so at Go's default of 100 the collector runs every few batches. 200 buys a
// measurable share of ingest's CPU for a little more memory; 400 saved little more and came
// too close to the chart's 512Mi limit (figures in docs/stats.md).
const GCPercent = 200

// TuneGC sets the garbage collector of a process that runs ingest alone to GCPercent, unless
// the operator set GOGC.
func TuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(GCPercent)
	}
}
