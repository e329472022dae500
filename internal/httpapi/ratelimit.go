package httpapi

import (
	"strconv"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
)

// RateLimit is the per-credential request budget: Requests per Window, counted per api
// replica (a fixed window: cheap, and the RateLimit-* headers describe it exactly).
type RateLimit struct {
	Requests int
	Window   time.Duration
}

type window struct {
	start time.Time
	count int
}

type limiter struct {
	cfg RateLimit
	now func() time.Time
	mu  sync.Mutex
	m   map[string]*window
}

func newLimiter(cfg RateLimit, now func() time.Time) *limiter {
	return &limiter{cfg: cfg, now: now, m: map[string]*window{}}
}

// allow counts the request against the credential's window and sets the RateLimit headers
// (IETF draft: RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset, RateLimit-Policy);
// over the budget it answers 429 with Retry-After.
func (l *limiter) allow(c *fiber.Ctx, id string) error {
	if l == nil || l.cfg.Requests <= 0 || id == "" {
		return nil
	}
	now := l.now()
	l.mu.Lock()
	w, ok := l.m[id]
	if !ok || now.Sub(w.start) >= l.cfg.Window {
		if len(l.m) > 100_000 {
			l.sweep(now)
		}
		w = &window{start: now}
		l.m[id] = w
	}
	w.count++
	count, reset := w.count, w.start.Add(l.cfg.Window).Sub(now)
	l.mu.Unlock()

	secs := int((reset + time.Second - 1) / time.Second)
	remaining := l.cfg.Requests - count
	if remaining < 0 {
		remaining = 0
	}
	c.Set("RateLimit-Limit", strconv.Itoa(l.cfg.Requests))
	c.Set("RateLimit-Remaining", strconv.Itoa(remaining))
	c.Set("RateLimit-Reset", strconv.Itoa(secs))
	c.Set("RateLimit-Policy", strconv.Itoa(l.cfg.Requests)+";w="+strconv.Itoa(int(l.cfg.Window/time.Second)))
	if count > l.cfg.Requests {
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(secs))
		return NewProblem(fiber.StatusTooManyRequests, "rate_limited", "too many requests for this credential; retry after "+strconv.Itoa(secs)+" s")
	}
	return nil
}

// sweep drops finished windows; called with the lock held when the map grows large.
func (l *limiter) sweep(now time.Time) {
	for id, w := range l.m {
		if now.Sub(w.start) >= l.cfg.Window {
			delete(l.m, id)
		}
	}
}
