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

func TestTheGuardRefusesAddressesThatAreNotPublic(t *testing.T) {
	tests := []struct {
		ip, want string // want is "" when allowed
	}{
		{"127.0.0.1", "refused: 127.0.0.1 is a loopback address"},
		{"127.255.0.9", "refused: 127.255.0.9 is a loopback address"},
		{"::1", "refused: ::1 is a loopback address"},
		{"::ffff:127.0.0.1", "refused: 127.0.0.1 is a loopback address"},
		{"10.1.2.3", "refused: 10.1.2.3 is a private address"},
		{"172.16.0.1", "refused: 172.16.0.1 is a private address"},
		{"172.31.255.255", "refused: 172.31.255.255 is a private address"},
		{"192.168.1.1", "refused: 192.168.1.1 is a private address"},
		{"169.254.169.254", "refused: 169.254.169.254 is the cloud metadata address"},
		{"169.254.10.1", "refused: 169.254.10.1 is a link-local address"},
		{"fe80::1", "refused: fe80::1 is a link-local address"},
		{"100.64.0.1", "refused: 100.64.0.1 is a carrier-grade NAT address"},
		{"100.127.255.254", "refused: 100.127.255.254 is a carrier-grade NAT address"},
		{"fc00::1", "refused: fc00::1 is a unique local address"},
		{"fd12:3456::1", "refused: fd12:3456::1 is a unique local address"},
		{"0.0.0.0", "refused: 0.0.0.0 is an unspecified address"},
		{"::", "refused: :: is an unspecified address"},
		{"224.0.0.1", "refused: 224.0.0.1 is a multicast address"},
		{"ff02::1", "refused: ff02::1 is a multicast address"},
		{"8.8.8.8", ""},
		{"172.32.0.1", ""},
		{"100.128.0.1", ""},
		{"2606:4700::1111", ""},
	}
	for _, tt := range tests {
		t.Run(tt.ip, func(t *testing.T) {
			err := checkAddr(netip.MustParseAddr(tt.ip), nil)
			got := ""
			if err != nil {
				got = err.Error()
				var refused *RefusedError
				if !errors.As(err, &refused) {
					t.Errorf("the error is a %T, want a *RefusedError", err)
				}
			}
			if got != tt.want {
				t.Errorf("checkAddr(%s) = %q, want %q", tt.ip, got, tt.want)
			}
		})
	}
}

func TestTheAllowListAdmitsItsRanges(t *testing.T) {
	allow, err := ParseAllowList([]string{"127.0.0.0/8", " 10.1.0.0/16 ", "fd00::5", ""})
	if err != nil {
		t.Fatal(err)
	}
	for ip, allowed := range map[string]bool{
		"127.0.0.1": true, "::ffff:127.0.0.2": true, "10.1.200.3": true, "10.2.0.1": false, "fd00::5": true, "fd00::6": false,
		"169.254.169.254": false, "::1": false,
	} {
		if got := checkAddr(netip.MustParseAddr(ip), allow) == nil; got != allowed {
			t.Errorf("%s allowed = %v, want %v", ip, got, allowed)
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "localhost", "1.2.3"} {
		if _, err := ParseAllowList([]string{bad}); err == nil {
			t.Errorf("ParseAllowList(%q) accepted it", bad)
		}
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
			var refused *RefusedError
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
