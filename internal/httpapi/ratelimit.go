package httpapi

import (
	"context"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/partnerstream/partnerstream/internal/ratelimit"
)

// RateLimit is a request budget: Requests per Window, shared by every api replica that
// counts in the same store (a fixed window aligned on the clock: the RateLimit-* headers
// describe it exactly).
type RateLimit struct {
	Requests int
	Window   time.Duration
}

// Scopes of the server's limits in the shared store.
const (
	scopeCredential = "credential"
	scopeFailedAuth = "failed_auth"
	scopePostback   = "postback"
)

// retrySeconds rounds a wait up to whole seconds, for Retry-After.
func retrySeconds(d time.Duration) int { return int((d + time.Second - 1) / time.Second) }

// limiter is a budget per key (a credential, a postback token) with the RateLimit headers.
type limiter struct {
	cfg     RateLimit
	counter *ratelimit.Counter
	// of names the key in the 429's detail: "this credential".
	of string
}

func newLimiter(store ratelimit.Store, scope, of string, cfg RateLimit, now func() time.Time) *limiter {
	if cfg.Requests <= 0 || cfg.Window <= 0 {
		return nil
	}
	return &limiter{cfg: cfg, of: of,
		counter: ratelimit.NewCounter(store, scope, ratelimit.Limit{Budget: cfg.Requests, Window: cfg.Window}, ratelimit.Options{Now: now})}
}

// allow counts the request against the key's window and sets the RateLimit headers (IETF
// draft: RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset, RateLimit-Policy); over the
// budget it answers 429 with Retry-After.
func (l *limiter) allow(c *fiber.Ctx, key string) error {
	if l == nil || key == "" {
		return nil
	}
	d := l.counter.Take(c.UserContext(), key)
	secs := retrySeconds(d.Reset)
	c.Set("RateLimit-Limit", strconv.Itoa(l.cfg.Requests))
	c.Set("RateLimit-Remaining", strconv.FormatInt(d.Remaining(l.cfg.Requests), 10))
	c.Set("RateLimit-Reset", strconv.Itoa(secs))
	c.Set("RateLimit-Policy", strconv.Itoa(l.cfg.Requests)+";w="+strconv.Itoa(int(l.cfg.Window/time.Second)))
	if !d.Allowed {
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(secs))
		return NewProblem(fiber.StatusTooManyRequests, "rate_limited", "too many requests for "+l.of+"; retry after "+strconv.Itoa(secs)+" s")
	}
	return nil
}

// counter is the limiter's counter; nil when the limit is off.
func (l *limiter) counterOrNil() *ratelimit.Counter {
	if l == nil {
		return nil
	}
	return l.counter
}

// RunLimits sends this replica's rate-limit counts to the shared store every
// ratelimit.FlushInterval and prunes its ended windows, until ctx ends; then it flushes once
// more. The api runs it beside the server; without it each replica still counts, but sees
// the others' counts only for keys near their budget.
func (s *Server) RunLimits(ctx context.Context) {
	var lastLogged atomic.Int64
	ratelimit.Run(ctx, s.limitStore, func(err error) {
		// A database outage fails every flush: say so once a minute, not five times a second.
		if now := time.Now().Unix(); now-lastLogged.Load() >= 60 {
			lastLogged.Store(now)
			s.log.Warn("rate limits are counted per replica until the shared store answers", "err", err)
		}
	}, s.limiter.counterOrNil(), s.failedAuth.counterOrNil(), s.postbackLimiter.counterOrNil())
}
