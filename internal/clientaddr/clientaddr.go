// Package clientaddr decides the address of the client behind a request: the connection's
// peer, or, when the peer is a trusted proxy, the address the proxies recorded for it in
// X-Forwarded-For or sent in a PROXY protocol header. Every use of a client address (clicks
// and their duplicate detection, throttles, sign-in limits, session records) takes it from
// Trusted.Client, so one rule decides which headers are believed.
package clientaddr

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"unsafe"

	"github.com/pires/go-proxyproto"
)

// MaxHops bounds the X-Forwarded-For entries examined for one request: a real chain of
// proxies is a few hops long, and a client may send hundreds of entries.
const MaxHops = 32

// maxEntryLen is the longest entry that can be an address: a bracketed IPv6 address with an
// embedded IPv4 address and a port. Longer ones are refused without parsing.
const maxEntryLen = len("[ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255]:65535")

// Trusted is the set of proxy address ranges whose forwarding headers are believed. The zero
// value trusts no one: the client is always the connection's peer.
type Trusted struct {
	ranges []netip.Prefix
}

// Parse reads trusted ranges ("10.0.0.0/8", "2001:db8::/32") and single addresses
// ("192.0.2.7"). Blank entries are skipped. A range with bits set past its length, an
// IPv4-mapped IPv6 form or an address with a zone is refused: each is more likely a typo
// than what the operator meant, and trusting the wrong range lets clients pick their address.
func Parse(entries []string) (Trusted, error) {
	var t Trusted
	for _, e := range entries {
		e = strings.TrimSpace(e)
		if e == "" {
			continue
		}
		p, err := parseRange(e)
		if err != nil {
			return Trusted{}, fmt.Errorf("trusted proxy %q: %w", e, err)
		}
		t.ranges = append(t.ranges, p)
	}
	return t, nil
}

func parseRange(s string) (netip.Prefix, error) {
	var p netip.Prefix
	if strings.Contains(s, "/") {
		var err error
		if p, err = netip.ParsePrefix(s); err != nil {
			return p, err
		}
		if p != p.Masked() {
			return p, fmt.Errorf("has bits set past the prefix length; the range is %s", p.Masked())
		}
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return p, err
		}
		if a.Zone() != "" {
			return p, errors.New("has a zone, which no forwarded address carries")
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	if p.Addr().Is4In6() {
		return p, errors.New("is an IPv4-mapped IPv6 form; write the IPv4 range")
	}
	return p, nil
}

// Empty reports whether no proxy is trusted.
func (t Trusted) Empty() bool { return len(t.ranges) == 0 }

// String lists the ranges, comma-separated.
func (t Trusted) String() string {
	s := make([]string, len(t.ranges))
	for i, p := range t.ranges {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

// Contains reports whether a is in a trusted range. A plain loop: the list is a few ranges
// long, and this runs for every request.
func (t Trusted) Contains(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range t.ranges {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Client returns the address of the client of a request that arrived from peer with the
// given X-Forwarded-For header values, in the order received (several headers form one list,
// RFC 9110 section 5.3). It never fails: a request is never refused for its headers.
//
// When peer is not trusted the headers are ignored (anyone can write them) and the client is
// the peer. Otherwise the list is read from the right, where each trusted proxy appended the
// address it received the request from: trusted entries are skipped and the first untrusted
// one is the client; entries left of it were written by the client and may be forged.
//
// An entry that is not an address (garbage, an empty entry, an IPv6 address with a zone,
// which has no meaning on another host) ends the walk, as do more than MaxHops entries, and
// the client is then the last trusted hop read, or the peer: the nearest address a trusted
// proxy vouched for, never one that nobody did. When every entry is trusted, the left-most is
// the client (a caller inside the trusted network). IPv4-mapped IPv6 addresses are unmapped
// and ports ("192.0.2.1:5678", which some proxies record) are dropped.
func (t Trusted) Client(peer netip.Addr, forwardedFor [][]byte) netip.Addr {
	client := peer.Unmap().WithZone("")
	if !t.Contains(client) {
		return client
	}
	hops := 0
	for i := len(forwardedFor) - 1; i >= 0; i-- {
		rest := forwardedFor[i]
		for more := true; more; {
			entry := rest
			if comma := bytes.LastIndexByte(rest, ','); comma >= 0 {
				entry, rest = rest[comma+1:], rest[:comma]
			} else {
				more = false
			}
			if hops++; hops > MaxHops {
				return client
			}
			a, ok := parseEntry(entry)
			if !ok {
				return client
			}
			if !t.Contains(a) {
				return a
			}
			client = a
		}
	}
	return client
}

// parseEntry reads one X-Forwarded-For entry: an address, optionally with a port.
func parseEntry(b []byte) (netip.Addr, bool) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || len(b) > maxEntryLen || bytes.IndexByte(b, '%') >= 0 {
		return netip.Addr{}, false
	}
	// The entry is parsed in place, without copying it to a string: this runs for every
	// request through a proxy. The string does not outlive the calls below (their errors are
	// dropped, and without a zone an Addr keeps no string).
	s := unsafe.String(unsafe.SliceData(b), len(b))
	var a netip.Addr
	var err error
	if b[0] == '[' || bytes.Count(b, []byte{':'}) == 1 {
		// An address with a port, as some proxies record it: [2001:db8::1]:443,
		// 192.0.2.1:5678. Told apart before parsing, since a failed parse allocates its error.
		var ap netip.AddrPort
		ap, err = netip.ParseAddrPort(s)
		a = ap.Addr()
	} else {
		a, err = netip.ParseAddr(s)
	}
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// ProxyProtocol wraps the listener ln so that a connection from a trusted peer may start with
// a PROXY protocol header (v1 or v2), whose source address then becomes the connection's peer
// address. For trusted peers the header is optional (the library's USE): probes and other
// direct connections from a trusted range send none. A header from any other peer is refused
// (REJECT): the connection's first read fails and the server closes it. Ignoring the header
// (IGNORE) would serve the request from its real peer too, but would hide a forging client or
// a proxy missing from the trusted ranges, whose every client would then share its address.
func (t Trusted) ProxyProtocol(ln net.Listener) net.Listener {
	return &proxyproto.Listener{Listener: ln, ConnPolicy: func(o proxyproto.ConnPolicyOptions) (proxyproto.Policy, error) {
		if t.Contains(addrOf(o.Upstream)) {
			return proxyproto.USE, nil
		}
		return proxyproto.REJECT, nil
	}}
}

// addrOf is the IP address of a TCP address, unmapped; the zero Addr for other kinds.
func addrOf(a net.Addr) netip.Addr {
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.Addr{}
	}
	return tcp.AddrPort().Addr().Unmap()
}

// Subscriber is the range of addresses one client usually holds, which a budget per client
// address counts: the address itself for IPv4, its /64 for IPv6, since one subscriber is
// usually given a whole /64 and could rotate through it. It is the zero Prefix for the zero
// Addr.
func Subscriber(a netip.Addr) netip.Prefix {
	a = a.WithZone("").Unmap()
	bits := 32
	if a.Is6() {
		bits = 64
	}
	p, _ := a.Prefix(bits)
	return p
}
