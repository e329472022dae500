package enrich

import (
	"fmt"
	"net/netip"

	"github.com/oschwald/maxminddb-golang/v2"
)

// Place is where an address is, as far as the geo database says: an ISO 3166-1 alpha-2
// country code, and the region (first subdivision) and city in English when the database
// has them.
type Place struct {
	Country, Region, City string
}

// Address is a click's address as enrichment sees it.
type Address struct {
	// Stored is the address as ClickHouse keeps it: truncated (privacy.go) unless the operator
	// keeps it whole; empty for a recorded address that is not one.
	Stored  string
	Place   *Place   // nil when the address is in no network of the geo database
	Network *Network // nil when the address is in no network of the ASN database
}

// mmdb is an open MaxMind DB format file. The geo database is read in two layouts: MaxMind's
// GeoIP2 and GeoLite2 (country.iso_code, subdivisions[0].names.en, city.names.en), which
// DB-IP and IPinfo also use, and the flat one of the ip-location-db packages (country_code,
// state1, city); the ASN database as GeoLite2-ASN (network.go).
type mmdb struct {
	path string
	r    *maxminddb.Reader
}

// openMMDB opens a MaxMind DB format file, naming the setting and the file in its error.
func openMMDB(setting, path string) (*mmdb, error) {
	r, err := maxminddb.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--%s %s: %w", setting, path, err)
	}
	// Open reads only the metadata (at the end of the file): a corrupt search tree would
	// surface at the lookups, each click's failure a silent empty column, so a few addresses
	// across the tree are looked up now. Reader.Verify would be stricter, but refuses files
	// that work (the ip-location-db ones have no description).
	for _, a := range probeAddresses {
		if err := r.Lookup(a).Err(); err != nil {
			_ = r.Close()
			return nil, fmt.Errorf("--%s %s: not a valid MaxMind DB file: %w", setting, path, err)
		}
	}
	return &mmdb{path: path, r: r}, nil
}

var probeAddresses = []netip.Addr{netip.MustParseAddr("1.1.1.1"), netip.MustParseAddr("128.0.0.1"),
	netip.MustParseAddr("223.255.255.1"), netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2a00::1")}

func (m *mmdb) close() { _ = m.r.Close() }

func (m *mmdb) describe() string {
	return fmt.Sprintf("%s (%s, built %s)", m.path, m.r.Metadata.DatabaseType, m.r.Metadata.BuildTime().Format("2006-01-02"))
}

// record looks addr up in m and decodes its record, once per record: cache holds them by
// their offset in the file, which the addresses of one network (and often of one country)
// share.
func record[T any](m *mmdb, addr netip.Addr, cache map[uintptr]*T, decode func(maxminddb.Result) *T) *T {
	res := m.r.Lookup(addr)
	if !res.Found() {
		return nil
	}
	off := res.Offset()
	if v, ok := cache[off]; ok {
		return v
	}
	v := decode(res)
	if len(cache) >= recordCacheSize {
		clear(cache)
	}
	cache[off] = v
	return v
}

// decodePlace reads a place in either layout: each path is tried in turn, and a path of the
// other layout fails or reads nothing.
func decodePlace(res maxminddb.Result) *Place {
	p := &Place{}
	if res.DecodePath(&p.Country, "country", "iso_code") != nil || p.Country == "" {
		_ = res.DecodePath(&p.Country, "country_code")
	}
	if res.DecodePath(&p.Region, "subdivisions", 0, "names", "en") != nil || p.Region == "" {
		_ = res.DecodePath(&p.Region, "state1")
	}
	if res.DecodePath(&p.City, "city", "names", "en") != nil || p.City == "" {
		p.City = ""
		_ = res.DecodePath(&p.City, "city")
	}
	if *p == (Place{}) {
		return nil
	}
	return p
}

// address enriches a recorded address.
func (s *Session) address(ip string) *Address {
	if ip == "" {
		return nil
	}
	if a, ok := s.addresses.get(ip); ok {
		return a
	}
	a := &Address{}
	if addr, err := netip.ParseAddr(ip); err == nil {
		addr = addr.Unmap().WithZone("")
		a.Stored = storedAddress(addr, s.e.keepIP)
		// A private, loopback or link-local address is in no one's country, whatever a
		// database's data says (one here places 192.168.1.1 in Australia).
		if !addr.IsGlobalUnicast() || addr.IsPrivate() {
			s.addresses.put(ip, a)
			return a
		}
		if s.e.geo != nil {
			a.Place = record(s.e.geo, addr, s.places, decodePlace)
		}
		if s.e.asn != nil {
			a.Network = record(s.e.asn, addr, s.networks, s.decodeNetwork)
		}
	}
	s.addresses.put(ip, a)
	return a
}
