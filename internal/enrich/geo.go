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

// geoDB is a MaxMind DB format file of places. Two layouts are read: MaxMind's GeoIP2 and
// GeoLite2 (country.iso_code, subdivisions[0].names.en, city.names.en), which DB-IP and
// IPinfo also use, and the flat one of the ip-location-db packages (country_code, state1,
// city).
type geoDB struct {
	path string
	r    *maxminddb.Reader
}

func openGeoDB(path string) (*geoDB, error) {
	r, err := openMMDB("geoip-db", path)
	if err != nil {
		return nil, err
	}
	return &geoDB{path: path, r: r}, nil
}

// openMMDB opens a MaxMind DB format file, naming the setting and the file in its error.
func openMMDB(setting, path string) (*maxminddb.Reader, error) {
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
	return r, nil
}

var probeAddresses = []netip.Addr{netip.MustParseAddr("1.1.1.1"), netip.MustParseAddr("128.0.0.1"),
	netip.MustParseAddr("223.255.255.1"), netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2a00::1")}

func (g *geoDB) close() { _ = g.r.Close() }

func (g *geoDB) describe() string {
	return fmt.Sprintf("%s (%s, built %s)", g.path, g.r.Metadata.DatabaseType, g.r.Metadata.BuildTime().Format("2006-01-02"))
}

// place looks addr up; places caches the decoded records by their offset in the file, which
// the addresses of one network (and often of one country) share.
func (g *geoDB) place(addr netip.Addr, places map[uintptr]*Place) *Place {
	res := g.r.Lookup(addr)
	if !res.Found() {
		return nil
	}
	off := res.Offset()
	if p, ok := places[off]; ok {
		return p
	}
	p := &Place{}
	// Each path is tried in turn; a path of the other layout fails or reads nothing.
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
		p = nil
	}
	if len(places) >= recordCacheSize {
		clear(places)
	}
	places[off] = p
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
			a.Place = s.e.geo.place(addr, s.places)
		}
		if s.e.asn != nil {
			a.Network = s.e.asn.network(addr, s.networks, s.e.hosting)
		}
	}
	s.addresses.put(ip, a)
	return a
}
