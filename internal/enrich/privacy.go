package enrich

import "net/netip"

// Truncation of stored addresses: the /24 of an IPv4 address and the /48 of an IPv6 one name
// a network (a street, an office, a customer's IPv6 site), not a household or a device. The
// lookups run on the whole address before it is cut.
const (
	ipv4Keep = 24
	ipv6Keep = 48
)

// storedAddress is addr as ClickHouse keeps it.
func storedAddress(addr netip.Addr, keepWhole bool) string {
	if keepWhole {
		return addr.String()
	}
	bits := ipv6Keep
	if addr.Is4() {
		bits = ipv4Keep
	}
	p, err := addr.Prefix(bits)
	if err != nil { // an invalid address; ParseAddr never returns one
		return ""
	}
	return p.Addr().String()
}
