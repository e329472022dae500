package httpapi

import (
	"errors"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/partnerstream/partnerstream/internal/metrics"
	"github.com/partnerstream/partnerstream/internal/ratelimit"
)

// failedAuthWindow is the window of the failed-credential throttle.
const failedAuthWindow = time.Minute

var (
	credentialFailures  = metrics.NewCounterVec("credential_failures_total", "Requests refused for an invalid, unknown or revoked credential, by kind (api_key, session, postback_token, publishable_key).", "kind")
	credentialThrottled = metrics.NewCounter("credential_throttled_total", "Wrong credentials answered 429 because their address sent too many of them.")
)

// failedAuth slows down guessing: once a client address has sent limit wrong credentials
// (API keys, session tokens, postback tokens, publishable keys) within a minute, its further
// wrong credentials get 429 instead of 401 until the minute is over. A valid credential is always served,
// whoever else shares the address (an office NAT, a carrier NAT, a proxy). The count is
// shared by the api replicas, and made at the store on each failure (ratelimit.Options.Sync):
// failures are rare for honest clients, and a budget of 20 leaves no room for estimates.
type failedAuth struct {
	counter *ratelimit.Counter // nil: off
}

func newFailedAuth(store ratelimit.Store, limit int, now func() time.Time) *failedAuth {
	if limit <= 0 {
		return &failedAuth{}
	}
	return &failedAuth{counter: ratelimit.NewCounter(store, scopeFailedAuth, ratelimit.Limit{Budget: limit, Window: failedAuthWindow},
		ratelimit.Options{Sync: true, Now: now})}
}

func (f *failedAuth) counterOrNil() *ratelimit.Counter { return f.counter }

// credentialCodes are the refusals of a credential that was sent but is wrong; a missing
// credential, an expired or signed-out session and the like are ordinary and count nothing.
var credentialCodes = map[string]string{"invalid_api_key": "api_key", "invalid_session": "session", "invalid_postback_token": "postback_token",
	"invalid_publishable_key": "publishable_key"}

// refuse counts err against the client address ip when it refuses a wrong credential, and
// turns it into a 429 once the address is over the limit.
func (f *failedAuth) refuse(c *fiber.Ctx, ip string, err error) error {
	var p *Problem
	if !errors.As(err, &p) {
		return err
	}
	kind, ok := credentialCodes[p.Code]
	if !ok {
		return err
	}
	credentialFailures.WithLabelValues(kind).Inc()
	if f.counter == nil {
		return err
	}
	d := f.counter.Take(c.UserContext(), ip)
	if d.Allowed {
		return err
	}
	credentialThrottled.Inc()
	secs := strconv.Itoa(retrySeconds(d.Reset))
	c.Set(fiber.HeaderRetryAfter, secs)
	return NewProblem(fiber.StatusTooManyRequests, "too_many_failed_credentials",
		"too many invalid credentials from this address; retry after "+secs+" s")
}
