package httpapi

import (
	"context"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/partnerstream/partnerstream/internal/metrics"
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
	// The tracking script's clicks: per publishable key, and per client address and key.
	scopeScriptKey     = "script_key"
	scopeScriptAddress = "script_address"
)

var rateLimited = metrics.NewCounterVec("rate_limited_total", "Requests answered 429 rate_limited because a budget was spent, by limit (credential, postback, script_key, script_address).", "limit")

// retrySeconds rounds a wait up to whole seconds, for Retry-After.
func retrySeconds(d time.Duration) int { return int((d + time.Second - 1) / time.Second) }

// limiter is a budget per key (a credential, a postback token, a publishable key) with the
// RateLimit headers.
type limiter struct {
	cfg     RateLimit
	scope   string
	counter *ratelimit.Counter
	// of names the key in the 429's detail: "this credential".
	of string
}

func newLimiter(store ratelimit.Store, scope, of string, cfg RateLimit, now func() time.Time) *limiter {
	if cfg.Requests <= 0 || cfg.Window <= 0 {
		return nil
	}
	// The series exists from the start: a graph shows 0, not "No data".
	rateLimited.WithLabelValues(scope)
	return &limiter{cfg: cfg, scope: scope, of: of,
		counter: ratelimit.NewCounter(store, scope, ratelimit.Limit{Budget: cfg.Requests, Window: cfg.Window}, ratelimit.Options{Now: now})}
}

// allow counts the request against the key's window and sets the RateLimit headers; over
// the budget it answers 429 with Retry-After.
func (l *limiter) allow(c *fiber.Ctx, key string) error { return allowEach(c, budget{l, key}) }

// budget is one budget a request spends: a limiter (nil: off) and the key it counts under.
type budget struct {
	l   *limiter
	key string
}

// allowEach counts the request against each budget in turn and stops at the first that is
// spent, so a refused request spends none of the later ones. It sets the RateLimit headers
// (IETF draft: RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset, RateLimit-Policy) of
// the budget with the least left, the one a client must pace itself by; over a budget it
// answers 429 with Retry-After.
func allowEach(c *fiber.Ctx, budgets ...budget) error {
	var tight *limiter
	var d ratelimit.Decision
	for _, b := range budgets {
		if b.l == nil || b.key == "" {
			continue
		}
		got := b.l.counter.Take(c.UserContext(), b.key)
		if tight == nil || !got.Allowed || got.Remaining(b.l.cfg.Requests) < d.Remaining(tight.cfg.Requests) {
			tight, d = b.l, got
		}
		if !got.Allowed {
			break
		}
	}
	l := tight
	if l == nil {
		return nil
	}
	secs := retrySeconds(d.Reset)
	c.Set("RateLimit-Limit", strconv.Itoa(l.cfg.Requests))
	c.Set("RateLimit-Remaining", strconv.FormatInt(d.Remaining(l.cfg.Requests), 10))
	c.Set("RateLimit-Reset", strconv.Itoa(secs))
	c.Set("RateLimit-Policy", strconv.Itoa(l.cfg.Requests)+";w="+strconv.Itoa(int(l.cfg.Window/time.Second)))
	if !d.Allowed {
		rateLimited.WithLabelValues(l.scope).Inc()
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
	}, s.limiter.counterOrNil(), s.failedAuth.counterOrNil(), s.postbackLimiter.counterOrNil(),
		s.scriptLimiter.counterOrNil(), s.scriptAddressLimiter.counterOrNil())
}
