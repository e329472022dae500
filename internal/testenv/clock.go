package testenv

import (
	"sync"
	"time"
)

// Clock is a settable clock for code that takes an injected `func() time.Time`, so tests of
// expiry move time instead of sleeping. It is safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock starts a clock at a fixed, arbitrary instant (1 March 2026, 12:00 UTC).
func NewClock() *Clock { return &Clock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

// Now is the clock's time; pass the method value as the injected clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}
