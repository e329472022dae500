package delivery

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

// checkAddr refuses ip unless it is public or allow-listed.
func checkAddr(ip netip.Addr, allow []netip.Prefix) error {
	ip = ip.Unmap() // ::ffff:127.0.0.1 is 127.0.0.1
	for _, p := range allow {
		if p.Contains(ip) {
			return nil
		}
	}
	for _, b := range blocked {
		if b.prefix.Contains(ip) {
			return &RefusedError{IP: ip, Reason: b.reason}
		}
	}
	return nil
}

// guardedDialer connects only to permitted addresses. The check runs in Control, after name
// resolution and right before connect, on the address actually dialled: a name that resolves
// to a public address when validated and to a private one later (DNS rebinding) is still
// refused.
func guardedDialer(allow []netip.Prefix) *net.Dialer {
	return &net.Dialer{
		Timeout:   connectTimeout,
		KeepAlive: 30 * time.Second,
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("refused: cannot check address %q: %w", address, err)
			}
			return checkAddr(ap.Addr(), allow)
		},
	}
}
