package tracking

import (
	"hash/maphash"
	"math/bits"
	"sync"
	"time"
)

// dedupShards spreads the lock of the duplicate detector over the cores.
const (
	dedupShardBits = 4
	dedupShards    = 1 << dedupShardBits
)

// Dedup remembers, per api replica and in memory, which visitor clicked which link in the
// last window, so repeat clicks can be flagged as duplicates. Only 64-bit keyed hashes of
// (link, visitor) are kept: no IP address or cookie value stays in memory.
//
// A visitor's first click on a link counts as unique, and the following ones are duplicates
// until the window has passed since that first click (repeats do not extend it), so the
// unique clicks are at most one per visitor, link and window.
//
// Memory is bounded: each shard keeps the current and the previous window in two tables and
// starts a new window early when the current one holds its share of maxEntries. That early
// turn forgets some visitors, which can only make a duplicate look unique, never the
// reverse. Behind several api replicas a visitor whose clicks land on different replicas is
// also counted once per replica; exact unique counts are for the statistics store.
type Dedup struct {
	window   time.Duration
	perShard int
	size     int // of a table: at most half full, so a probe soon ends at an empty slot
	seed     maphash.Seed
	shards   [dedupShards]dedupShard
}

type dedupShard struct {
	mu        sync.Mutex
	cur, prev dedupTable // allocated at first use
	n, prevN  int        // entries in cur and prev
	started   int64      // when cur began
}

// NewDedup returns a detector for the window (an hour in production) holding at most about
// maxEntries visitor-link pairs.
func NewDedup(window time.Duration, maxEntries int) *Dedup {
	perShard := max(1, maxEntries/dedupShards/2)
	return &Dedup{window: window, perShard: perShard, size: 1 << bits.Len(uint(2*perShard-1)), seed: maphash.MakeSeed()}
}

// dedupTable is an open-addressing hash table of key hashes (0 marks an empty slot) to unix
// nanoseconds of the unique click, its length a power of two. A key and its time share one
// 16-byte slot, so a lookup or an insert is one cache miss where a Go map, whose slots sit
// beside control words and which rehashes the key, took two or three: the detector is far
// larger than the CPU's caches, and a new visitor is a miss on every click.
type dedupTable []dedupSlot

type dedupSlot struct {
	key uint64
	at  int64
}

// find returns the time stored for key, or the index of the empty slot where it would go.
func (t dedupTable) find(key uint64) (i uint64, at int64, ok bool) {
	if len(t) == 0 {
		return 0, 0, false
	}
	mask := uint64(len(t) - 1)
	for i = key & mask; ; i = (i + 1) & mask {
		switch t[i].key {
		case key:
			return i, t[i].at, true
		case 0:
			return i, 0, false
		}
	}
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
	// The top bits pick the shard and the bottom ones the slot, so each shard's table uses
	// all of its slots.
	s := &d.shards[key>>(64-dedupShardBits)]
	now := at.UnixNano()
	window := d.window.Nanoseconds()
	s.mu.Lock()
	defer s.mu.Unlock()
	if now-s.started >= window || s.cur == nil {
		s.turn(now, d.size)
	}
	i, last, ok := s.cur.find(key)
	if lookup {
		if !ok {
			_, last, ok = s.prev.find(key)
		}
		if ok && now-last < window {
			return true
		}
	}
	if !ok && s.n >= d.perShard {
		s.turn(now, d.size)
		i, _, _ = s.cur.find(key)
	}
	if s.cur[i].key == 0 {
		s.n++
	}
	s.cur[i] = dedupSlot{key: key, at: now}
	return false
}

// turn starts a new window in the previous window's table, emptied. Tables are allocated
// when first needed: memory the detector never fills is never touched.
func (s *dedupShard) turn(now int64, size int) {
	s.prev, s.cur = s.cur, s.prev
	switch {
	case s.cur == nil:
		s.cur = make(dedupTable, size)
	case s.prevN > 0:
		clear(s.cur)
	}
	s.prevN, s.n, s.started = s.n, 0, now
}

// key hashes a link and the parts of a visitor, written one after the other: hashing the
// parts costs no concatenation. It is never 0, which marks an empty slot.
func (d *Dedup) key(link string, visitor ...string) uint64 {
	var h maphash.Hash
	h.SetSeed(d.seed)
	h.WriteString(link)
	h.WriteByte(0)
	for _, p := range visitor {
		h.WriteString(p)
	}
	return max(h.Sum64(), 1)
}
