package httpapi

import (
	"strconv"
	"strings"
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

// windows counts events per key in fixed windows, in this process.
type windows struct {
	size time.Duration
	now  func() time.Time
	mu   sync.Mutex
	m    map[string]*window
}

type window struct {
	start time.Time
	count int
}

func newWindows(size time.Duration, now func() time.Time) *windows {
	return &windows{size: size, now: now, m: map[string]*window{}}
}

// add counts n events of key in its current window and returns the window's count and the
// time until it ends. n = 0 only reads, and keeps nothing for a key without a window.
func (ws *windows) add(key string, n int) (int, time.Duration) {
	now := ws.now()
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w, ok := ws.m[key]
	if !ok || now.Sub(w.start) >= ws.size {
		if n == 0 {
			return 0, 0
		}
		if len(ws.m) > 100_000 {
			ws.sweep(now)
		}
		w = &window{start: now}
		ws.m[strings.Clone(key)] = w // the key may point into a reused request buffer
	}
	w.count += n
	return w.count, w.start.Add(ws.size).Sub(now)
}

// sweep drops finished windows; called with the lock held when the map grows large.
func (ws *windows) sweep(now time.Time) {
	for key, w := range ws.m {
		if now.Sub(w.start) >= ws.size {
			delete(ws.m, key)
		}
	}
}

// retrySeconds rounds a wait up to whole seconds, for Retry-After.
func retrySeconds(d time.Duration) int { return int((d + time.Second - 1) / time.Second) }

type limiter struct {
	cfg RateLimit
	w   *windows
}

func newLimiter(cfg RateLimit, now func() time.Time) *limiter {
	return &limiter{cfg: cfg, w: newWindows(cfg.Window, now)}
}

// allow counts the request against the credential's window and sets the RateLimit headers
// (IETF draft: RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset, RateLimit-Policy);
// over the budget it answers 429 with Retry-After.
func (l *limiter) allow(c *fiber.Ctx, id string) error {
	if l == nil || l.cfg.Requests <= 0 || id == "" {
		return nil
	}
	count, reset := l.w.add(id, 1)
	secs := retrySeconds(reset)
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
