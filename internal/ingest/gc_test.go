package ingest

import (
	"runtime/debug"
	"testing"
)

func TestTuneGCLeavesAnOperatorsGOGC(t *testing.T) {
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })

	t.Setenv("GOGC", "150")
	TuneGC()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with GOGC set, the GC percent became %d, want it left at 100", got)
	}

	t.Setenv("GOGC", "")
	TuneGC()
	if got := debug.SetGCPercent(100); got != GCPercent {
		t.Errorf("without GOGC, the GC percent is %d, want %d", got, GCPercent)
	}
}
