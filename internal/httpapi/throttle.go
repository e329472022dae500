package httpapi

import (
	"errors"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/partnerstream/partnerstream/internal/metrics"
)

// failedAuthWindow is the window of the failed-credential throttle.
const failedAuthWindow = time.Minute

var (
	credentialFailures  = metrics.NewCounterVec("credential_failures_total", "Requests refused for an invalid, unknown or revoked credential, by kind (api_key, session).", "kind")
	credentialThrottled = metrics.NewCounter("credential_throttled_total", "Requests answered 429 because their address sent too many failed credentials.")
)

// failedAuth throttles client addresses that keep sending bad credentials: after limit
// failures within a minute, every credentialed request from the address gets a 429 until the
// minute is over, without its credential being looked at, so guessing API keys or session
// tokens gets nowhere. Successful requests count nothing. Counted per api replica, like the
// rate limit: with n replicas behind a balancer an address gets up to n times the limit.
type failedAuth struct {
	limit int // 0 disables
	w     *windows
}

func newFailedAuth(limit int, now func() time.Time) *failedAuth {
	return &failedAuth{limit: limit, w: newWindows(failedAuthWindow, now)}
}

// check refuses a client address (clientIP) that reached the limit.
func (f *failedAuth) check(c *fiber.Ctx, ip string) error {
	if f.limit <= 0 {
		return nil
	}
	count, reset := f.w.add(ip, 0)
	if count < f.limit {
		return nil
	}
	credentialThrottled.Inc()
	secs := strconv.Itoa(retrySeconds(reset))
	c.Set(fiber.HeaderRetryAfter, secs)
	return NewProblem(fiber.StatusTooManyRequests, "too_many_failed_credentials",
		"too many invalid credentials from this address; retry after "+secs+" s")
}

// credentialCodes are the refusals of a credential that was sent but is wrong; a missing
// credential, an expired or signed-out session and the like are ordinary and count nothing.
var credentialCodes = map[string]string{"invalid_api_key": "api_key", "invalid_session": "session"}

// record counts err against the client address when it refuses a wrong credential.
func (f *failedAuth) record(ip string, err error) {
	var p *Problem
	if !errors.As(err, &p) {
		return
	}
	kind, ok := credentialCodes[p.Code]
	if !ok {
		return
	}
	credentialFailures.WithLabelValues(kind).Inc()
	if f.limit > 0 {
		f.w.add(ip, 1)
	}
}
