// Package enrich derives where a click comes from out of what the redirect recorded: the
// country, region and city and the network (autonomous system, hosting) of its address, the
// device, browser and OS of its user agent, the registrable domain of its referrer and the
// UTM parameters of its landing URL, and the address as it is stored (truncated by default).
//
// It runs at ingest, off the redirect's CPU budget (docs/tracking.md, "Where clicks come
// from"). An Enricher holds what every goroutine shares and only reads (the databases, the
// user-agent parser, the hosting list); each goroutine that enriches keeps a Session of its
// own, whose bounded caches make a repeated address, user agent, referrer or landing URL cost
// a map lookup, without locks.
package enrich

import (
	"fmt"
	"hash/maphash"
	"strings"
)

// Options configure an Enricher.
type Options struct {
	// GeoIPDB is a MaxMind DB format file of countries (and regions and cities when it has
	// them); empty means no geolocation.
	GeoIPDB string
	// ASNDB is a MaxMind DB format file of autonomous systems; empty means no network.
	ASNDB string
	// HostingASNs is a file of autonomous system numbers of data centres, clouds and VPN
	// providers, added to the list the package ships (hosting-asns.txt); empty adds none.
	HostingASNs string
	// KeepFullIP stores the address whole instead of truncated to its /24 (IPv4) or /48 (IPv6).
	KeepFullIP bool
}

// Enricher is safe for concurrent use; each goroutine enriches through its own Session.
type Enricher struct {
	geo     *mmdb
	asn     *mmdb
	hosting map[uint32]bool
	devices *deviceParser
	keepIP  bool
}

// New opens the databases the options name. A file that is missing or not a MaxMind DB is
// an error that names it, so a wrong path stops the component at start.
func New(o Options) (*Enricher, error) {
	e := &Enricher{devices: newDeviceParser(), keepIP: o.KeepFullIP}
	var err error
	if o.GeoIPDB != "" {
		if e.geo, err = openMMDB("geoip-db", o.GeoIPDB); err != nil {
			return nil, err
		}
	}
	if o.ASNDB != "" {
		if e.asn, err = openMMDB("asn-db", o.ASNDB); err != nil {
			e.Close()
			return nil, err
		}
	}
	if e.hosting, err = hostingASNs(o.HostingASNs); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// Close releases the databases.
func (e *Enricher) Close() {
	if e.geo != nil {
		e.geo.close()
	}
	if e.asn != nil {
		e.asn.close()
	}
}

// Describe says what the enricher reads, for the start-up log.
func (e *Enricher) Describe() string {
	var parts []string
	if e.geo != nil {
		parts = append(parts, "geo "+e.geo.describe())
	} else {
		parts = append(parts, "no geo database")
	}
	if e.asn != nil {
		parts = append(parts, "asn "+e.asn.describe())
	} else {
		parts = append(parts, "no asn database")
	}
	parts = append(parts, fmt.Sprintf("%d hosting ASNs", len(e.hosting)))
	if e.keepIP {
		parts = append(parts, "addresses kept whole")
	} else {
		parts = append(parts, "addresses truncated to /24 and /48")
	}
	return strings.Join(parts, ", ")
}

// Click is what enrichment adds to a click. Its parts are shared by every click with the same
// address, user agent, referrer or landing URL, and never change: a caller keeps pointers,
// not copies (a few words per click for the garbage collector, however many fields).
type Click struct {
	Address  *Address
	Device   *Device
	Referrer *Referrer
	UTM      *UTM
}

// Session enriches clicks on one goroutine; it is not safe for concurrent use.
type Session struct {
	e         *Enricher
	addresses cache[*Address]
	devices   cache[*Device]
	referrers cache[*Referrer]
	utms      cache[*UTM]
	places    map[uintptr]*Place   // by the geo database's record
	networks  map[uintptr]*Network // by the ASN database's record
}

// Cache sizes per Session. Each entry is its key and a pointer to a shared value; a key a
// few hundred bytes at most (user agents are cut to 1024 by the redirect).
const (
	addressCacheSize  = 1 << 14
	deviceCacheSize   = 1 << 12
	referrerCacheSize = 1 << 12
	utmCacheSize      = 1 << 12
	recordCacheSize   = 1 << 14
)

// NewSession returns a session with empty caches.
func (e *Enricher) NewSession() *Session {
	return &Session{e: e,
		addresses: newCache[*Address](addressCacheSize), devices: newCache[*Device](deviceCacheSize),
		referrers: newCache[*Referrer](referrerCacheSize), utms: newCache[*UTM](utmCacheSize),
		places: map[uintptr]*Place{}, networks: map[uintptr]*Network{}}
}

// Enrich returns what the click's recorded address, user agent, referrer and landing URL
// say. Each part is nil for an input that is empty or says nothing: an address that does not
// parse is not stored at all, a user agent no parser knows is of type other.
func (s *Session) Enrich(ip, userAgent, referrer, landingURL string) Click {
	return Click{Address: s.address(ip), Device: s.device(userAgent), Referrer: s.referrer(referrer), UTM: s.utm(landingURL)}
}

// cache is a bounded map from a string to a shared value, keyed by the string's 64-bit hash
// rather than the string: a user agent or landing URL is a hundred bytes or more, and a map
// of strings compares the whole key on every hit, a cache miss of the CPU's each. Two inputs
// of one session share a hash with a probability of about 10^-12 (a few thousand entries
// among 2^64 hashes); such a click would take the other's values. When full the cache starts
// over: clicks repeat the same user agents and landing URLs, so a cleared cache fills again
// within a fetch, and clearing costs nothing per click, unlike keeping an order for LRU.
type cache[V any] struct {
	seed maphash.Seed
	m    map[uint64]V
	max  int
}

func newCache[V any](max int) cache[V] {
	return cache[V]{seed: maphash.MakeSeed(), m: make(map[uint64]V), max: max}
}

func (c *cache[V]) get(k string) (V, bool) {
	v, ok := c.m[maphash.String(c.seed, k)]
	return v, ok
}

// put keeps no reference to k, which may be a view of a buffer the caller reuses (ingest's
// arena); nor may v: a value that kept a piece of an input (a referrer's domain, a campaign)
// kept the whole of ingest's arena of a fetch's clicks, 256 KiB, for as long as it was
// cached, so such values are copies (strings.Clone, on a cache's misses only).
func (c *cache[V]) put(k string, v V) {
	if len(c.m) >= c.max {
		clear(c.m)
	}
	c.m[maphash.String(c.seed, k)] = v
}
