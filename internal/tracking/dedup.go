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
	key := d.key(link, visitor)
	s := &d.shards[key%dedupShards]
	now := at.UnixNano()
	window := d.window.Nanoseconds()
	s.mu.Lock()
	defer s.mu.Unlock()
	if now-s.started >= window {
		s.turn(now)
	}
	last, ok := s.cur[key]
	if !ok {
		last, ok = s.prev[key]
	}
	if ok && now-last < window {
		return true
	}
	if len(s.cur) >= d.perShard {
		s.turn(now)
	}
	s.cur[key] = now
	return false
}

// Remember records a click without asking, for a visitor id handed out with this click: its
// next click arrives with the cookie and must count as a repeat.
func (d *Dedup) Remember(link, visitor string, at time.Time) { d.Seen(link, visitor, at) }

func (s *dedupShard) turn(now int64) {
	s.prev, s.cur, s.started = s.cur, make(map[uint64]int64, len(s.cur)), now
}

func (d *Dedup) key(link, visitor string) uint64 {
	var h maphash.Hash
	h.SetSeed(d.seed)
	h.WriteString(link)
	h.WriteByte(0)
	h.WriteString(visitor)
	return h.Sum64()
}
