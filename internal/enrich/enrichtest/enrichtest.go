// Package enrichtest writes small MaxMind DB format databases for tests, with MaxMind's own
// writer, in the layouts internal/enrich reads.
package enrichtest

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"
)

// Network is one network of a generated database and what it says.
type Network struct {
	CIDR                  string
	Country, Region, City string
	ASN                   uint32
	Org                   string
}

// GeoLite2City writes a database in the layout of MaxMind's GeoLite2-City (and DB-IP's and
// IPinfo's): country.iso_code, subdivisions[0].names.en, city.names.en.
func GeoLite2City(t testing.TB, nets ...Network) string {
	return write(t, "GeoLite2-City", nets, func(n Network) mmdbtype.Map {
		m := mmdbtype.Map{"country": mmdbtype.Map{"iso_code": mmdbtype.String(n.Country),
			"names": mmdbtype.Map{"en": mmdbtype.String("Country " + n.Country)}}}
		if n.Region != "" {
			m["subdivisions"] = mmdbtype.Slice{mmdbtype.Map{"names": mmdbtype.Map{"en": mmdbtype.String(n.Region)}}}
		}
		if n.City != "" {
			m["city"] = mmdbtype.Map{"names": mmdbtype.Map{"en": mmdbtype.String(n.City), "de": mmdbtype.String("Stadt")}}
		}
		return m
	})
}

// Flat writes a database in the layout of the ip-location-db packages: country_code, state1,
// city.
func Flat(t testing.TB, nets ...Network) string {
	return write(t, "ip-location-db", nets, func(n Network) mmdbtype.Map {
		m := mmdbtype.Map{"country_code": mmdbtype.String(n.Country)}
		if n.Region != "" {
			m["state1"] = mmdbtype.String(n.Region)
		}
		if n.City != "" {
			m["city"] = mmdbtype.String(n.City)
		}
		return m
	})
}

// ASN writes a database in the layout of GeoLite2-ASN: autonomous_system_number,
// autonomous_system_organization.
func ASN(t testing.TB, nets ...Network) string {
	return write(t, "GeoLite2-ASN", nets, func(n Network) mmdbtype.Map {
		return mmdbtype.Map{"autonomous_system_number": mmdbtype.Uint32(n.ASN),
			"autonomous_system_organization": mmdbtype.String(n.Org)}
	})
}

func write(t testing.TB, dbType string, nets []Network, record func(Network) mmdbtype.Map) string {
	t.Helper()
	// Documentation ranges (192.0.2.0/24, 2001:db8::/32) are reserved: tests use them.
	tree, err := mmdbwriter.New(mmdbwriter.Options{DatabaseType: dbType, IncludeReservedNetworks: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nets {
		_, ipnet, err := net.ParseCIDR(n.CIDR)
		if err != nil {
			t.Fatal(err)
		}
		if err := tree.Insert(ipnet, record(n)); err != nil {
			t.Fatalf("insert %s: %v", n.CIDR, err)
		}
	}
	path := filepath.Join(t.TempDir(), dbType+".mmdb")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tree.WriteTo(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}
