package delivery

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/partnerstream/partnerstream/internal/egress"
	"github.com/partnerstream/partnerstream/internal/postbacks"
	"github.com/partnerstream/partnerstream/internal/version"
	"github.com/partnerstream/partnerstream/internal/webhooks"
	"github.com/partnerstream/partnerstream/internal/webhooks/signing"
)

// Limits of one attempt (docs/architecture.md, "Delivery: retries, limits and the SSRF guard").
const (
	attemptTimeout = 15 * time.Second
	connectTimeout = 5 * time.Second
	// maxExcerpt caps the response excerpt and the error kept per attempt, in characters.
	maxExcerpt = 1024
	// drainLimit is how much of a longer response is read to keep its connection reusable.
	drainLimit = 64 << 10
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

// sender makes attempts over HTTP with the SSRF guard on every connection.
type sender struct {
	client    *http.Client
	userAgent string
}

func newSender(allow []netip.Prefix, roots *x509.CertPool) *sender {
	return &sender{client: NewHTTPClient(allow, roots), userAgent: "PartnerStream-Webhooks/" + version.Version}
}

// NewHTTPClient returns the client the workers send with: the SSRF guard checks every
// resolved address at connect time (allow lists the ranges permitted anyway), connecting
// takes at most 5 s, no proxy is used and redirects are not followed (a 3xx is the answer).
// Callers bound each request with a context (an attempt has 15 s). The test endpoint of the
// API sends with it too. roots verifies the receivers' certificates (nil: the system's CAs).
func NewHTTPClient(allow []netip.Prefix, roots *x509.CertPool) *http.Client {
	dialer := egress.Dialer(allow, connectTimeout)
	transport := &http.Transport{
		// No proxy: the guard must see the receiver's address, not a proxy's.
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   connectTimeout,
		TLSClientConfig:       &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{
		Transport:     transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// errTargetGone ends a delivery whose subscription or postback URL no longer exists.
var errTargetGone = errors.New("target gone")

// resolve finds where the delivery goes now and the keys that sign it: an edited
// subscription sends to its new URL, a rotation signs with both secrets.
func (s *Service) resolve(ctx context.Context, j job, now time.Time) (string, []webhooks.SigningKey, error) {
	if j.kind == KindPostback {
		if s.o.Postbacks == nil {
			return j.url, nil, fmt.Errorf("%w: postbacks are not configured in this deliver component", errTargetGone)
		}
		url, keys, err := s.o.Postbacks.SigningKeys(ctx, j.companyID, now)
		if errors.Is(err, postbacks.ErrNotConfigured) {
			return j.url, nil, fmt.Errorf("%w: the company has no postback URL any more", errTargetGone)
		}
		return url, keys, err
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

// liveKeys are the keys that still sign at now.
func liveKeys(keys []webhooks.SigningKey, now time.Time) [][]byte {
	out := make([][]byte, 0, len(keys))
	for _, k := range keys {
		if k.ExpiresAt.IsZero() || now.Before(k.ExpiresAt) {
			out = append(out, k.Key)
		}
	}
	return out
}

// attempt makes one attempt of j and decides what follows. It never returns an error: every
// failure is the attempt's outcome.
func (s *Service) attempt(ctx context.Context, j job) outcome {
	now := s.o.Now()
	o := outcome{job: j, n: j.attempts + 1, startedAt: now}
	start := time.Now()
	f, err := s.send(ctx, j, now, &o)
	o.duration = time.Since(start)
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
	live := liveKeys(keys, now)
	if len(live) == 0 {
		return failure{reason: reasonOther}, errors.New("the target has no live signing key")
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(j.body))
	if err != nil {
		return failure{reason: reasonOther, permanent: true}, fmt.Errorf("invalid target URL: %w", err)
	}
	sig := signing.Sign(j.id, now, j.body, live...)
	h := req.Header
	h.Set("webhook-id", j.id)
	h.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	h.Set("webhook-signature", sig)
	if j.kind == KindPostback {
		h.Set("x-svc-signature", sig)
	} else {
		h.Set("X-Webhook-Signature", sig)
	}
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", s.sender.userAgent)

	resp, err := s.sender.client.Do(req)
	if err != nil {
		return classifyTransport(err)
	}
	o.statusCode = resp.StatusCode
	o.excerpt = readExcerpt(resp.Body)
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainLimit))
	_ = resp.Body.Close()
	code := resp.StatusCode
	switch {
	case code >= 200 && code < 300:
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
	if err := s.o.Suspender.SuspendWebhook(ctx, j.companyID, j.targetID); err != nil {
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

// readExcerpt reads the start of a response body as text.
func readExcerpt(r io.Reader) string {
	b, _ := io.ReadAll(io.LimitReader(r, 4*maxExcerpt))
	return truncate(string(b))
}

// truncate makes s valid UTF-8 of at most maxExcerpt characters (the columns' limit).
func truncate(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if utf8.RuneCountInString(s) <= maxExcerpt {
		return s
	}
	r := []rune(s)
	return string(r[:maxExcerpt])
}
