// Package egress is the SSRF guard of outgoing requests to customers' URLs (webhooks,
// postbacks): it refuses connections to addresses that are not on the public internet unless
// the operator allow-listed them.
package egress

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// RefusedError is a connection the SSRF guard refused: the receiver's name resolved to an
// address that is not on the public internet, and no allow-listed range contains it.
type RefusedError struct {
	IP     netip.Addr
	Reason string // e.g. "a loopback address"
}

func (e *RefusedError) Error() string { return fmt.Sprintf("refused: %s is %s", e.IP, e.Reason) }

// blocked are the ranges a receiver may not resolve to (docs/architecture.md, "Delivery:
// retries, limits and the SSRF guard"). The metadata address comes before the link-local
// range that holds it, for a clearer message.
var blocked = []struct {
	prefix netip.Prefix
	reason string
}{
	{netip.MustParsePrefix("169.254.169.254/32"), "the cloud metadata address"},
	{netip.MustParsePrefix("0.0.0.0/8"), "an unspecified address"},
	{netip.MustParsePrefix("::/128"), "an unspecified address"},
	{netip.MustParsePrefix("127.0.0.0/8"), "a loopback address"},
	{netip.MustParsePrefix("::1/128"), "a loopback address"},
	{netip.MustParsePrefix("10.0.0.0/8"), "a private address"},
	{netip.MustParsePrefix("172.16.0.0/12"), "a private address"},
	{netip.MustParsePrefix("192.168.0.0/16"), "a private address"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a carrier-grade NAT address"},
	{netip.MustParsePrefix("169.254.0.0/16"), "a link-local address"},
	{netip.MustParsePrefix("fe80::/10"), "a link-local address"},
	{netip.MustParsePrefix("fc00::/7"), "a unique local address"},
	{netip.MustParsePrefix("224.0.0.0/4"), "a multicast address"},
	{netip.MustParsePrefix("ff00::/8"), "a multicast address"},
	{netip.MustParsePrefix("255.255.255.255/32"), "the broadcast address"},
}

// ParseAllowList reads the operator's allow-list of CIDRs (e.g. "127.0.0.0/8", "10.1.0.0/16";
// a bare address is a /32 or /128).
func ParseAllowList(cidrs []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(cidrs))
	for _, c := range cidrs {
		c = strings.TrimSpace(c)
		if c == "" {
			continue
		}
		if !strings.Contains(c, "/") {
			a, err := netip.ParseAddr(c)
			if err != nil {
				return nil, fmt.Errorf("allow-list: %q is neither a CIDR nor an address: %w", c, err)
			}
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return nil, fmt.Errorf("allow-list: %q: %w", c, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// embeddings are the IPv6 ranges whose addresses carry an IPv4 address: a packet to one
// reaches that IPv4 host through a translator or a tunnel, so the IPv4 address is checked too.
// A range whose embedded address cannot be known is refused whole.
var embeddings = []struct {
	prefix netip.Prefix
	name   string
	// v4 extracts the embedded address; nil when its position is the operator's choice.
	v4 func(a [16]byte) netip.Addr
}{
	{netip.MustParsePrefix("64:ff9b::/96"), "a NAT64 address", last32},
	// RFC 8215's local-use prefix: the network chooses the prefix length, hence the position.
	{netip.MustParsePrefix("64:ff9b:1::/48"), "a local-use NAT64 address", nil},
	{netip.MustParsePrefix("2002::/16"), "a 6to4 address", func(a [16]byte) netip.Addr { return netip.AddrFrom4([4]byte(a[2:6])) }},
	// Teredo carries the client's address inverted in the last 32 bits.
	{netip.MustParsePrefix("2001::/32"), "a Teredo address", func(a [16]byte) netip.Addr {
		return netip.AddrFrom4([4]byte{^a[12], ^a[13], ^a[14], ^a[15]})
	}},
	{netip.MustParsePrefix("::ffff:0:0:0/96"), "an IPv4-translated address", last32},
	{netip.MustParsePrefix("::/96"), "an IPv4-compatible address", last32},
}

func last32(a [16]byte) netip.Addr { return netip.AddrFrom4([4]byte(a[12:16])) }

// checkAddr refuses ip unless it is public or allow-listed; an IPv6 address that carries an
// IPv4 address must pass with both.
func checkAddr(ip netip.Addr, allow []netip.Prefix) error {
	// ::ffff:127.0.0.1 is 127.0.0.1; and a prefix never contains an address with a zone,
	// so fe80::1%eth0 must lose it to be seen as link-local.
	ip = ip.Unmap().WithZone("")
	if allowed(ip, allow) {
		return nil
	}
	if reason := blockedBy(ip); reason != "" {
		return &RefusedError{IP: ip, Reason: reason}
	}
	if !ip.Is6() {
		return nil
	}
	for _, e := range embeddings {
		if !e.prefix.Contains(ip) {
			continue
		}
		if e.v4 == nil {
			return &RefusedError{IP: ip, Reason: e.name + ", whose IPv4 address cannot be known"}
		}
		v4 := e.v4(ip.As16())
		if allowed(v4, allow) {
			return nil
		}
		if reason := blockedBy(v4); reason != "" {
			return &RefusedError{IP: ip, Reason: fmt.Sprintf("%s of %s, %s", e.name, v4, reason)}
		}
		return nil
	}
	return nil
}

func allowed(ip netip.Addr, allow []netip.Prefix) bool {
	for _, p := range allow {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// blockedBy says why ip is refused, or "".
func blockedBy(ip netip.Addr) string {
	for _, b := range blocked {
		if b.prefix.Contains(ip) {
			return b.reason
		}
	}
	return ""
}

// Dialer connects only to permitted addresses, giving up after timeout. The check runs in Control, after name
// resolution and right before connect, on the address actually dialled: a name that resolves
// to a public address when validated and to a private one later (DNS rebinding) is still
// refused.
func Dialer(allow []netip.Prefix, timeout time.Duration) *net.Dialer {
	return &net.Dialer{
		Timeout:   timeout,
		KeepAlive: 30 * time.Second,
		Control:   func(_, address string, _ syscall.RawConn) error { return checkDial(address, allow) },
	}
}

// checkDial is the dialer's decision on the address it is about to connect to ("ip:port").
func checkDial(address string, allow []netip.Prefix) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("refused: cannot check address %q: %w", address, err)
	}
	return checkAddr(ap.Addr(), allow)
}
