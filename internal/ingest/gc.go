package ingest

import (
	"os"
	"runtime/debug"
)

// GCPercent is the garbage collector's target (GOGC) that TuneGC sets. Ingest allocates
// batch-sized buffers for every insert (the ClickHouse driver's columns) while its live heap
// stays small, so at Go's default of 100 the collector runs every few batches. Draining a
// backlog on two cores, 200 saves 0.2-0.6 µs of CPU per click (a seventh to a tenth of
// ingest's) for a peak RSS of 165-190 MiB instead of 130-170; 400 saved little more for
// 375-420 MiB, too close to the chart's 512Mi limit (docs/stats.md).
const GCPercent = 200

// TuneGC sets the garbage collector of a process that runs ingest alone to GCPercent, unless
// the operator set GOGC.
func TuneGC() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(GCPercent)
	}
}
