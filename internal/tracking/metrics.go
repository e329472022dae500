package tracking

import (
	"github.com/partnerstream/partnerstream/internal/metrics"
)

// Reasons a click is dropped (the label of partnerstream_clicks_dropped_total). spool_full
// is the only one that can happen to a click whose redirect was answered while the process
// runs as configured; see docs/tracking.md.
const (
	dropSpoolFull    = "spool_full"    // Kafka did not acknowledge and the spool is at its size limit
	dropSpoolError   = "spool_error"   // Kafka did not acknowledge and the spool could not be written (disk error)
	dropSpoolCorrupt = "spool_corrupt" // a spooled record failed its checksum on replay (torn by a crash, or disk corruption)
	dropClosed       = "closed"        // a click arrived after the recorder shut down (a wiring mistake)
)

var (
	clicksRecorded = metrics.NewCounterVec("clicks_recorded_total", "Clicks acknowledged by Kafka on the first try, by recording mode (ack or async).", "mode")
	clicksSpooled  = metrics.NewCounter("clicks_spooled_total", "Clicks written to the local spool because Kafka did not acknowledge them in time (or the async queue was full).")
	clicksReplayed = metrics.NewCounter("clicks_replayed_total", "Spooled clicks confirmed in Kafka afterwards.")
	clicksDropped  = metrics.NewCounterVec("clicks_dropped_total", "Clicks lost, by reason (spool_full, spool_error, spool_corrupt, closed).", "reason")
	spoolBytes     = metrics.NewGauge("clicks_spool_bytes", "Bytes in the click spool waiting for Kafka.")
	clicksBot      = metrics.NewCounter("clicks_bot_total", "Clicks flagged as coming from a bot (still redirected).")
)

func init() {
	for _, r := range []string{dropSpoolFull, dropSpoolError, dropSpoolCorrupt, dropClosed} {
		clicksDropped.WithLabelValues(r)
	}
}
