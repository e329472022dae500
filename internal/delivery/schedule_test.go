package delivery

import (
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/egress"
)

func TestSchedule(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	fail5xx := failure{reason: reason5xx}
	tests := []struct {
		name    string
		n       int
		trigger string
		f       failure
		jitter  float64
		status  string
		delay   time.Duration
	}{
		{"the first retry comes a minute after the first attempt", 1, TriggerScheduled, fail5xx, 0, StatusPending, time.Minute},
		{"the second retry comes ten minutes after the second attempt", 2, TriggerScheduled, fail5xx, 0, StatusPending, 10 * time.Minute},
		{"the third retry comes a hundred minutes after the third attempt", 3, TriggerScheduled, fail5xx, 0, StatusPending, 100 * time.Minute},
		{"the fourth failed attempt fails the delivery", 4, TriggerScheduled, fail5xx, 0, StatusFailed, 0},
		{"jitter only adds, up to 20%", 1, TriggerScheduled, fail5xx, 0.5, StatusPending, 66 * time.Second},
		{"the largest jitter stays under 20%", 3, TriggerScheduled, fail5xx, 0.999, StatusPending, 100*time.Minute + time.Duration(0.999*0.2*float64(100*time.Minute))},
		{"a timeout waits at least 60 s", 1, TriggerScheduled, failure{reason: reasonTimeout, throttled: true}, 0, StatusPending, time.Minute},
		{"Retry-After later than the base is honoured", 2, TriggerScheduled, failure{reason: reason4xx, throttled: true, retryAfter: 15 * time.Minute}, 0, StatusPending, 15 * time.Minute},
		{"Retry-After is capped at twice the base", 1, TriggerScheduled, failure{reason: reason4xx, throttled: true, retryAfter: time.Hour}, 0, StatusPending, 2 * time.Minute},
		{"Retry-After sooner than the base waits the base", 2, TriggerScheduled, failure{reason: reason5xx, retryAfter: time.Second}, 0.1, StatusPending, 10*time.Minute + time.Duration(0.1*0.2*float64(10*time.Minute))},
		{"a 410 fails at once", 1, TriggerScheduled, failure{reason: reasonGone, permanent: true}, 0, StatusFailed, 0},
		{"an SSRF refusal fails at once", 1, TriggerScheduled, failure{reason: reasonSSRF, permanent: true}, 0, StatusFailed, 0},
		{"a manual attempt that fails is not retried", 1, TriggerManual, fail5xx, 0, StatusFailed, 0},
		{"a manual attempt after exhausted retries is not retried either", 5, TriggerManual, fail5xx, 0, StatusFailed, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, next := schedule(tt.n, tt.trigger, tt.f, now, tt.jitter)
			if status != tt.status {
				t.Fatalf("status %s, want %s", status, tt.status)
			}
			if status == StatusPending && next.Sub(now) != tt.delay {
				t.Errorf("next attempt after %s, want %s", next.Sub(now), tt.delay)
			}
			if status == StatusFailed && !next.IsZero() {
				t.Errorf("a failed delivery has a next attempt at %s", next)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name, header string
		want         time.Duration
	}{
		{"seconds", "120", 2 * time.Minute},
		{"an HTTP date", now.Add(5 * time.Minute).Format(http.TimeFormat), 5 * time.Minute},
		{"a past date is none", now.Add(-time.Minute).Format(http.TimeFormat), 0},
		{"garbage is none", "soon", 0},
		{"absent is none", "", 0},
		{"zero is none", "0", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := retryAfter(tt.header, now); got != tt.want {
				t.Errorf("retryAfter(%q) = %s, want %s", tt.header, got, tt.want)
			}
		})
	}
}

func TestTheGuardedClientChecksTheResolvedAddress(t *testing.T) {
	rc := newReceiver(t, nil)
	port := rc.URL[strings.LastIndex(rc.URL, ":")+1:]
	for _, tt := range []struct {
		name, url string
		allow     []netip.Prefix
		refused   bool
	}{
		{"a loopback address is refused", rc.URL, nil, true},
		{"a name that resolves to loopback is refused", "http://localhost:" + port, nil, true},
		{"an allow-listed loopback address is reached", rc.URL, loopback, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := NewHTTPClient(tt.allow, nil).Post(tt.url, "application/json", strings.NewReader("{}"))
			if resp != nil {
				resp.Body.Close()
			}
			var refused *egress.RefusedError
			if got := errors.As(err, &refused); got != tt.refused {
				t.Fatalf("refused: %v (%v), want %v", got, err, tt.refused)
			}
			if tt.refused && !strings.Contains(err.Error(), "is a loopback address") {
				t.Errorf("error %q does not say why", err)
			}
		})
	}
	if n := len(rc.requests()); n != 1 {
		t.Errorf("the receiver got %d requests, want only the allow-listed one", n)
	}
}

func TestTheGuardedClientTrustsTheExtraCAsItIsGiven(t *testing.T) {
	rc := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(rc.Close)
	private := x509.NewCertPool()
	private.AddCert(rc.Certificate())
	for _, tt := range []struct {
		name    string
		roots   *x509.CertPool
		trusted bool
	}{
		{"a receiver on a private CA is refused with the system's CAs only", nil, false},
		{"a receiver on a private CA is reached when its CA is given", private, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := NewHTTPClient(loopback, tt.roots).Post(rc.URL, "application/json", strings.NewReader("{}"))
			if resp != nil {
				resp.Body.Close()
			}
			var unknown x509.UnknownAuthorityError
			if got := err == nil; got != tt.trusted {
				t.Fatalf("reached: %v (%v), want %v", got, err, tt.trusted)
			}
			if !tt.trusted && !errors.As(err, &unknown) {
				t.Errorf("refused with %v, want an unknown authority", err)
			}
		})
	}
}
