package delivery

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/partnerstream/partnerstream/internal/egress"
	"github.com/partnerstream/partnerstream/internal/postbacks"
	"github.com/partnerstream/partnerstream/internal/webhooks/signing"
)

// retryBases are the delays before retries 1, 2 and 3: 1 attempt + 3 retries.
var retryBases = []time.Duration{time.Minute, 10 * time.Minute, 100 * time.Minute}

// maxJitter is the most a retry is delayed beyond its base, as a fraction of it.
const maxJitter = 0.2

// minThrottleDelay is the least wait after a timeout or a 429.
const minThrottleDelay = 60 * time.Second

// job is a claimed delivery: one attempt to make.
type job struct {
	id, companyID, kind, targetID, url, eventType string
	body                                          []byte
	attempts                                      int // before this one
	trigger                                       string
	leaseEnd                                      time.Time
}

// outcome is an attempt and the state of its delivery after it.
type outcome struct {
	job        job
	n          int
	startedAt  time.Time
	duration   time.Duration
	statusCode int // 0: no response
	err        string
	excerpt    string
	reason     string // failure reason; "" on success
	// held says the attempt was not made: the target's circuit breaker is open, and the
	// delivery waits until next without using an attempt.
	held bool
	// sent says the attempt went to the receiver (not refused before: no target, no key, an
	// open circuit breaker): only those tell the target's health.
	sent bool
	// status is the delivery's status after the attempt: succeeded, failed or pending
	// (a retry at next).
	status string
	next   time.Time
}

// failure describes a failed attempt for the schedule.
type failure struct {
	reason string
	// permanent failures end the delivery at once: 410, SSRF refusal, target gone.
	permanent bool
	// throttled failures (a timeout, a 429) wait at least minThrottleDelay.
	throttled  bool
	retryAfter time.Duration // 0 when the response had none
}

// schedule decides the state of a delivery after its nth attempt failed at now: failed,
// or pending with the time of the next attempt. jitter is in [0, 1).
func schedule(n int, trigger string, f failure, now time.Time, jitter float64) (string, time.Time) {
	if trigger == TriggerManual || f.permanent || n > len(retryBases) {
		return StatusFailed, time.Time{}
	}
	base := retryBases[n-1]
	d := base + time.Duration(jitter*maxJitter*float64(base))
	if f.throttled {
		d = max(d, minThrottleDelay)
	}
	if f.retryAfter > 0 {
		// Honoured, but never sooner than the schedule nor later than twice its base.
		d = max(d, min(f.retryAfter, 2*base))
	}
	return StatusPending, now.Add(d)
}

// errTargetGone ends a delivery whose subscription or postback URL no longer exists.
var errTargetGone = errors.New("target gone")

// resolve finds where the delivery goes now and the keys that sign it: an edited
// subscription sends to its new URL, a rotation signs with both secrets.
func (s *Service) resolve(ctx context.Context, j job, now time.Time) (string, []signing.HMACKey, error) {
	if j.kind == KindPostback {
		if s.o.Postbacks == nil {
			return j.url, nil, fmt.Errorf("%w: postbacks are not configured in this deliver component", errTargetGone)
		}
		url, keys, err := s.o.Postbacks.SigningKeys(ctx, j.companyID, now)
		if errors.Is(err, postbacks.ErrNotConfigured) {
			return j.url, nil, fmt.Errorf("%w: the company has no postback URL any more", errTargetGone)
		}
		return postbacks.ExpandURL(url, j.body), keys, err
	}
	if s.o.Subscriptions != nil {
		for _, t := range s.o.Subscriptions.Targets(j.companyID, j.eventType) {
			if t.ID == j.targetID {
				return t.URL, t.Secrets, nil
			}
		}
	}
	return j.url, nil, fmt.Errorf("%w: webhook %s was deleted, suspended or unsubscribed from %s", errTargetGone, j.targetID, j.eventType)
}

// attempt makes one attempt of j and decides what follows. It never returns an error: every
// failure is the attempt's outcome.
func (s *Service) attempt(ctx context.Context, j job) outcome {
	now := s.o.Now()
	o := outcome{job: j, n: j.attempts + 1, startedAt: now}
	start := time.Now()
	f, err := s.send(ctx, j, now, &o)
	if held := (*heldError)(nil); errors.As(err, &held) {
		o.held, o.next, o.err = true, held.until, held.Error()
		heldTotal.WithLabelValues(j.kind).Inc()
		return o
	}
	o.duration = time.Since(start)
	if o.sent {
		s.breakers.note(target{j.kind, j.targetID}, err == nil, s.o.Now())
	}
	attemptDuration.WithLabelValues(j.kind).Observe(o.duration.Seconds())
	if err == nil {
		o.status = StatusSucceeded
		deliveriesTotal.WithLabelValues(j.kind, outcomeSucceeded).Inc()
		return o
	}
	o.err, o.reason = truncate(err.Error()), f.reason
	o.status, o.next = schedule(o.n, j.trigger, f, s.o.Now(), s.o.Jitter())
	failuresTotal.WithLabelValues(j.kind, f.reason).Inc()
	if o.status == StatusPending {
		deliveriesTotal.WithLabelValues(j.kind, outcomeRetried).Inc()
	} else {
		deliveriesTotal.WithLabelValues(j.kind, outcomeFailed).Inc()
	}
	return o
}

// send posts the signed body and classifies a failure; it fills the response fields of o.
func (s *Service) send(ctx context.Context, j job, now time.Time, o *outcome) (failure, error) {
	url, keys, err := s.resolve(ctx, j, now)
	if errors.Is(err, errTargetGone) {
		return failure{reason: reasonNoTarget, permanent: true}, err
	}
	if err != nil {
		return failure{reason: reasonOther}, fmt.Errorf("find the signing keys: %w", err)
	}
	live := signing.Live(keys, now)
	if len(live) == 0 {
		return failure{reason: reasonOther}, errors.New("the target has no live signing key")
	}
	if err := s.gate(ctx, j, now); errors.Is(err, errDisabled) {
		return failure{reason: reasonDisabled, permanent: true}, err
	} else if err != nil {
		return failure{reason: reasonOther}, err
	}
	o.sent = true
	resp, err := s.sender.Send(ctx, url, Message{ID: j.id, Kind: j.kind, Body: j.body, At: now, Keys: live})
	if errors.Is(err, ErrInvalidURL) {
		return failure{reason: reasonOther, permanent: true}, err
	}
	if err != nil {
		return classifyTransport(err)
	}
	o.statusCode, o.excerpt = resp.StatusCode, resp.Excerpt
	code := resp.StatusCode
	switch {
	case resp.Succeeded():
		return failure{}, nil
	case code == http.StatusGone:
		return failure{reason: reasonGone, permanent: true}, fmt.Errorf("receiver answered %s: %s", resp.Status, s.suspend(j))
	case code >= 300 && code < 400:
		return failure{reason: reasonRedirect}, fmt.Errorf("receiver answered %s: redirects are not followed (Location: %q)", resp.Status, resp.Header.Get("Location"))
	}
	f := failure{reason: reason5xx, retryAfter: retryAfter(resp.Header.Get("Retry-After"), now)}
	if code < 500 {
		f.reason = reason4xx
	}
	f.throttled = code == http.StatusTooManyRequests
	return f, fmt.Errorf("receiver answered %s", resp.Status)
}

// classifyTransport names a failure without a response: refused by the guard, timed out,
// or the connection failed.
func classifyTransport(err error) (failure, error) {
	var refused *egress.RefusedError
	if errors.As(err, &refused) {
		return failure{reason: reasonSSRF, permanent: true}, refused
	}
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) {
		if inner := ue.Unwrap(); inner != nil {
			err = inner // drop the url.Error's "Post <url>:" prefix
		}
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		return failure{reason: reasonTimeout, throttled: true}, fmt.Errorf("timed out: %w", err)
	}
	return failure{reason: reasonConnect}, err
}

// suspend disables the webhook of a 410 answer (a postback only fails: its URL is the
// company's setting) and says what became of the target, for the attempt's error.
func (s *Service) suspend(j job) string {
	if j.kind != KindWebhook {
		s.o.Log.Warn("a postback receiver answered 410 Gone; the delivery failed", "company", j.companyID, "delivery", j.id)
		return "the delivery failed; the postback URL stays active"
	}
	if s.o.Suspender == nil {
		s.o.Log.Warn("a webhook receiver answered 410 Gone, but no Kubernetes client can suspend it", "webhook", j.targetID)
		return "the delivery failed; the subscription could not be disabled here"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.o.Suspender.SuspendWebhook(ctx, j.companyID, j.targetID, ReasonReceiverGone+": the receiver answered 410 Gone"); err != nil {
		s.o.Log.Error("suspending a webhook answered with 410 failed", "webhook", j.targetID, "err", err)
		return "the delivery failed; disabling the subscription failed"
	}
	s.o.Log.Info("suspended a webhook whose receiver answered 410 Gone", "webhook", j.targetID, "company", j.companyID)
	return "the subscription is disabled"
}

// retryAfter parses a Retry-After header (seconds or an HTTP date); 0 when absent or invalid.
func retryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		return time.Duration(min(secs, 7*24*3600)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
