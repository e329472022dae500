package tracking

import (
	"hash/maphash"
	"sync"
	"time"
)

// dedupShards spreads the lock of the duplicate detector over the cores.
const dedupShards = 16

// Dedup remembers, per api replica and in memory, which visitor clicked which link in the
// last window, so repeat clicks can be flagged as duplicates. Only 64-bit keyed hashes of
// (link, visitor) are kept: no IP address or cookie value stays in memory.
//
// A visitor's first click on a link counts as unique, and the following ones are duplicates
// until the window has passed since that first click (repeats do not extend it), so the
// unique clicks are at most one per visitor, link and window.
//
// Memory is bounded: each shard keeps the current and the previous window in two maps and
// starts a new window early when the current one holds its share of maxEntries. That early
// turn forgets some visitors, which can only make a duplicate look unique, never the
// reverse. Behind several api replicas a visitor whose clicks land on different replicas is
// also counted once per replica; exact unique counts are for the statistics store.
type Dedup struct {
	window   time.Duration
	perShard int
	seed     maphash.Seed
	shards   [dedupShards]dedupShard
}

type dedupShard struct {
	mu        sync.Mutex
	cur, prev map[uint64]int64 // key hash -> unix nanoseconds of the unique click
	started   int64            // when cur began
}

// NewDedup returns a detector for the window (an hour in production) holding at most about
// maxEntries visitor-link pairs.
func NewDedup(window time.Duration, maxEntries int) *Dedup {
	d := &Dedup{window: window, perShard: max(1, maxEntries/dedupShards/2), seed: maphash.MakeSeed()}
	for i := range d.shards {
		d.shards[i] = dedupShard{cur: map[uint64]int64{}, prev: map[uint64]int64{}}
	}
	return d
}

// Seen reports whether the visitor clicked the link within the window before at, and
// remembers this click when it did not.
func (d *Dedup) Seen(link, visitor string, at time.Time) bool {
	return d.seen(d.key(link, visitor), at)
}

// SeenDevice is Seen for a visitor without a visitor id, known by its IP address and user
// agent.
func (d *Dedup) SeenDevice(link, ip, userAgent string, at time.Time) bool {
	// A zero byte first: no visitor id starts with one, so a device never matches an id.
	return d.seen(d.key(link, "\x00", ip, "\x00", userAgent), at)
}

func (d *Dedup) seen(key uint64, at time.Time) bool {
	return d.update(key, at, true)
}

// Remember records a click without asking, for a visitor id handed out with this click: its
// next click arrives with the cookie and must count as a repeat. The id is new, so there is
// nothing to look up: on a large map each lookup is a cache miss.
func (d *Dedup) Remember(link, visitor string, at time.Time) {
	d.update(d.key(link, visitor), at, false)
}

// update remembers key's click at at unless lookup finds an earlier one within the window,
// and reports whether it did.
func (d *Dedup) update(key uint64, at time.Time, lookup bool) bool {
	s := &d.shards[key%dedupShards]
	now := at.UnixNano()
	window := d.window.Nanoseconds()
	s.mu.Lock()
	defer s.mu.Unlock()
	if now-s.started >= window {
		s.turn(now)
	}
	if lookup {
		last, ok := s.cur[key]
		if !ok {
			last, ok = s.prev[key]
		}
		if ok && now-last < window {
			return true
		}
	}
	if len(s.cur) >= d.perShard {
		s.turn(now)
	}
	s.cur[key] = now
	return false
}

func (s *dedupShard) turn(now int64) {
	s.prev, s.cur, s.started = s.cur, make(map[uint64]int64, len(s.cur)), now
}

// key hashes a link and the parts of a visitor, written one after the other: hashing the
// parts costs no concatenation.
func (d *Dedup) key(link string, visitor ...string) uint64 {
	var h maphash.Hash
	h.SetSeed(d.seed)
	h.WriteString(link)
	h.WriteByte(0)
	for _, p := range visitor {
		h.WriteString(p)
	}
	return h.Sum64()
}
