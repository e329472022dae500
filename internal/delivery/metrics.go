package delivery

import (
	"github.com/partnerstream/partnerstream/internal/metrics"
)

// Outcomes of an attempt (label outcome of delivery_attempts_total).
const (
	outcomeSucceeded = "succeeded"
	outcomeFailed    = "failed"  // the delivery ends failed
	outcomeRetried   = "retried" // the attempt failed and a retry is scheduled
)

// Failure reasons (label reason of delivery_failures_total): a fixed set, never a URL or id.
const (
	reasonTimeout  = "timeout"
	reasonConnect  = "connect"
	reasonSSRF     = "ssrf"
	reasonRedirect = "redirect"
	reason4xx      = "status_4xx"
	reason5xx      = "status_5xx"
	reasonGone     = "gone"      // 410: a webhook is disabled, a postback only fails
	reasonNoTarget = "no_target" // the webhook or postback URL no longer exists
	reasonOther    = "other"
	reasonDisabled = "disabled" // a postback URL disabled for failing for days
)

// The collectors are package variables so that several Services in one process (tests,
// `partnerstream dev`) report into the same series.
var (
	deliveriesTotal  = metrics.NewCounterVec("delivery_attempts_total", "Delivery attempts by kind (webhook, postback) and outcome: succeeded, failed (the delivery ends failed), retried (a retry is scheduled).", "kind", "outcome")
	failuresTotal    = metrics.NewCounterVec("delivery_failures_total", "Failed delivery attempts by kind and reason (timeout, connect, ssrf, redirect, status_4xx, status_5xx, gone, no_target, other, disabled).", "kind", "reason")
	attemptDuration  = metrics.NewHistogramVec("delivery_attempt_duration_seconds", "Time of one delivery attempt (connect, send, response), by kind.", []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 15}, "kind")
	recordedTotal    = metrics.NewCounterVec("delivery_recorded_total", "Deliveries recorded from consumed events, by kind (an event consumed again records nothing).", "kind")
	eventsConsumed   = metrics.NewCounter("delivery_events_consumed_total", "Domain events the deliver component consumed from Kafka (invalid ones included).")
	pendingGauge     = metrics.NewGauge("delivery_pending", "Deliveries waiting for an attempt (due now or scheduled), in the whole database.")
	retriesGauge     = metrics.NewGauge("delivery_retries_scheduled", "Pending deliveries that already had an attempt: retries waiting for their time.")
	prunedTotal      = metrics.NewCounter("delivery_history_pruned_total", "Deliveries (with their attempts) deleted because they are older than the delivery retention.")
	heldTotal        = metrics.NewCounterVec("delivery_held_total", "Delivery attempts not made because the target's circuit breaker was open, by kind: the delivery waits, its attempts unused.", "kind")
	disabledTotal    = metrics.NewCounterVec("delivery_targets_disabled_total", "Delivery targets disabled after failing without a success for --deliver-disable-after-days, by kind.", "kind")
	openBreakers     = metrics.NewGauge("delivery_breakers_open", "Delivery targets whose circuit breaker is open: their attempts fail at once, but for one probe at a time.")
	oldestPendingAge = metrics.NewGauge("delivery_oldest_pending_age_seconds", "How long the most overdue delivery has been due (0 when none is overdue): the delivery backlog.")
)

// presetMetrics makes every labelled series of the deliver component exist at zero, so the
// dashboard and the alerts read 0 rather than no data before the first attempt. The api
// imports this package too (delivery history), which is why this is not an init.
func presetMetrics() {
	for _, kind := range []string{KindWebhook, KindPostback} {
		for _, o := range []string{outcomeSucceeded, outcomeFailed, outcomeRetried} {
			deliveriesTotal.WithLabelValues(kind, o)
		}
		for _, r := range []string{reasonTimeout, reasonConnect, reasonSSRF, reasonRedirect, reason4xx, reason5xx, reasonGone, reasonNoTarget, reasonOther, reasonDisabled} {
			failuresTotal.WithLabelValues(kind, r)
		}
		attemptDuration.WithLabelValues(kind)
		heldTotal.WithLabelValues(kind)
		disabledTotal.WithLabelValues(kind)
		recordedTotal.WithLabelValues(kind)
	}
}
