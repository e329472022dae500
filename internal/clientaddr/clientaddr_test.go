package clientaddr

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pires/go-proxyproto"
)

// proxies is the trusted set of the tests: a pod network, a proxy's own address and an IPv6
// range.
var proxies = mustParse("10.0.0.0/8", "192.0.2.10", "2001:db8::/32")

func mustParse(entries ...string) Trusted {
	t, err := Parse(entries)
	if err != nil {
		panic(err)
	}
	return t
}

// headers splits a test's header values at "|".
func headers(s string) [][]byte {
	if s == "" {
		return nil
	}
	var out [][]byte
	for v := range strings.SplitSeq(s, "|") {
		out = append(out, []byte(v))
	}
	return out
}

func TestClient(t *testing.T) {
	hundred := strings.TrimSuffix(strings.Repeat("10.0.0.1, ", 100), ", ")
	for _, tc := range []struct {
		name, peer, xff, want string
	}{
		{"a peer outside the trusted ranges is the client", "198.51.100.7", "", "198.51.100.7"},
		{"an untrusted peer's X-Forwarded-For is ignored", "198.51.100.7", "203.0.113.5", "198.51.100.7"},
		{"a trusted peer without X-Forwarded-For is the client", "10.1.2.3", "", "10.1.2.3"},
		{"a trusted peer forwards the address it received the request from", "10.1.2.3", "203.0.113.5", "203.0.113.5"},
		{"a forged left-most entry does not change the address", "10.1.2.3", "1.2.3.4, 203.0.113.5", "203.0.113.5"},
		{"trusted hops are skipped from the right", "10.1.2.3", "1.2.3.4, 203.0.113.5, 192.0.2.10, 10.9.9.9", "203.0.113.5"},
		{"several headers form one list, the last one right-most", "10.1.2.3", "1.2.3.4|203.0.113.5, 10.9.9.9", "203.0.113.5"},
		{"a forged first header does not change the address", "10.1.2.3", "1.2.3.4|203.0.113.5", "203.0.113.5"},
		{"every entry trusted gives the left-most", "10.1.2.3", "10.0.0.1, 10.0.0.2", "10.0.0.1"},
		{"garbage right of the client stops the walk at the peer", "10.1.2.3", "203.0.113.5, garbage", "10.1.2.3"},
		{"garbage behind a trusted hop stops the walk at that hop", "10.1.2.3", "garbage, 10.0.0.9", "10.0.0.9"},
		{"an empty entry stops the walk", "10.1.2.3", "203.0.113.5, , 10.0.0.9", "10.0.0.9"},
		{"a trailing comma stops the walk at the peer", "10.1.2.3", "203.0.113.5,", "10.1.2.3"},
		{"an empty header stops the walk at the peer", "10.1.2.3", "203.0.113.5|", "10.1.2.3"},
		{"a hundred trusted entries are read only up to the hop limit", "10.1.2.3", "203.0.113.5, " + hundred, "10.0.0.1"},
		{"an IPv6 entry with a zone is refused", "10.1.2.3", "fe80::1%eth0", "10.1.2.3"},
		{"an IPv6 peer with a zone loses the zone", "fe80::1%eth0", "203.0.113.5", "fe80::1"},
		{"an IPv4-mapped entry is unmapped", "10.1.2.3", "::ffff:203.0.113.5", "203.0.113.5"},
		{"an IPv4-mapped peer is unmapped and trusted", "::ffff:10.1.2.3", "203.0.113.5", "203.0.113.5"},
		{"an IPv6 client behind an IPv6 proxy", "2001:db8::1", "2001:db8::2, 2a00:1450::68", "2a00:1450::68"},
		{"a port recorded by the proxy is dropped", "10.1.2.3", "203.0.113.5:41234", "203.0.113.5"},
		{"a bracketed IPv6 entry with a port is read", "10.1.2.3", "[2a00:1450::68]:443", "2a00:1450::68"},
		{"spaces and tabs around entries are ignored", "10.1.2.3", " 203.0.113.5 ,\t10.0.0.9 ", "203.0.113.5"},
		{"an IPv4 address with leading zeros is refused", "10.1.2.3", "203.0.113.05", "10.1.2.3"},
		{"an entry too long to be an address is refused", "10.1.2.3", strings.Repeat("1", 100), "10.1.2.3"},
		{"a host name is refused", "10.1.2.3", "client.example.com", "10.1.2.3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := proxies.Client(netip.MustParseAddr(tc.peer), headers(tc.xff))
			if got.String() != tc.want {
				t.Errorf("Client(%s, %q) = %s, want %s", tc.peer, tc.xff, got, tc.want)
			}
		})
	}
}

func TestTheZeroTrustedSetTrustsNoOne(t *testing.T) {
	var none Trusted
	if got := none.Client(netip.MustParseAddr("10.1.2.3"), headers("203.0.113.5")); got.String() != "10.1.2.3" {
		t.Errorf("Client = %s, want the peer", got)
	}
	if !none.Empty() || proxies.Empty() {
		t.Error("Empty is wrong")
	}
}

func TestParse(t *testing.T) {
	got, err := Parse([]string{" 10.0.0.0/8", "", "192.0.2.10", "2001:db8::/32", "::1"})
	if err != nil {
		t.Fatal(err)
	}
	if s := got.String(); s != "10.0.0.0/8,192.0.2.10/32,2001:db8::/32,::1/128" {
		t.Errorf("ranges %s", s)
	}
	for _, tc := range []struct{ name, entry, want string }{
		{"a prefix length past the address", "10.0.0.0/33", `trusted proxy "10.0.0.0/33": netip.ParsePrefix`},
		{"host bits set", "10.0.0.1/8", `trusted proxy "10.0.0.1/8": has bits set past the prefix length; the range is 10.0.0.0/8`},
		{"a host name", "proxy.internal", `trusted proxy "proxy.internal": ParseAddr`},
		{"an address with a zone", "fe80::1%eth0", `trusted proxy "fe80::1%eth0": has a zone`},
		{"an IPv4-mapped range", "::ffff:10.0.0.0/104", `trusted proxy "::ffff:10.0.0.0/104": is an IPv4-mapped IPv6 form`},
		{"a truncated address", "10.1.2", `trusted proxy "10.1.2"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]string{"10.0.0.0/8", tc.entry})
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("Parse(%q) error %v, want one starting %q", tc.entry, err, tc.want)
			}
		})
	}
}

// FuzzClientAddr: whatever the peer and the headers, Client neither panics nor invents an
// address: the result is the peer or an address written in the headers, unmapped and without
// a zone, and an untrusted peer's headers are ignored.
func FuzzClientAddr(f *testing.F) {
	for _, seed := range [][2]string{
		{"10.1.2.3", "1.2.3.4, 203.0.113.5, 10.0.0.9"}, {"198.51.100.7", "203.0.113.5"},
		{"10.1.2.3", "garbage,,\t, 10.0.0.1"}, {"2001:db8::1", "fe80::1%eth0, [2a00:1450::68]:443"},
		{"::ffff:10.0.0.1", "::ffff:203.0.113.5\n10.0.0.1:80"}, {"10.1.2.3", strings.Repeat("10.0.0.1,", 100)},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, peerText, header string) {
		peer, err := netip.ParseAddr(peerText)
		if err != nil {
			peer = netip.MustParseAddr("10.1.2.3")
		}
		values := headers(strings.ReplaceAll(header, "\n", "|"))
		got := proxies.Client(peer, values)
		if got.Zone() != "" || got.Is4In6() {
			t.Fatalf("Client = %s, which has a zone or is IPv4-mapped", got)
		}
		want := peer.Unmap().WithZone("")
		if got == want {
			return
		}
		if !proxies.Contains(peer) {
			t.Fatalf("untrusted peer %s: Client = %s, want the peer", peer, got)
		}
		for _, v := range values {
			for e := range strings.SplitSeq(string(v), ",") {
				a, ok := parseEntry([]byte(e))
				if ok && a == got {
					return
				}
			}
		}
		t.Fatalf("Client(%s, %q) = %s, which is neither the peer nor in the header", peer, header, got)
	})
}

func BenchmarkClient(b *testing.B) {
	for _, bc := range []struct {
		name, peer string
		t          Trusted
		xff        [][]byte
	}{
		{"no proxy trusted", "198.51.100.7", Trusted{}, nil},
		{"untrusted peer", "198.51.100.7", proxies, headers("1.2.3.4")},
		{"client behind two proxies", "10.1.2.3", proxies, headers("1.2.3.4, 203.0.113.5, 10.9.9.9")},
		{"IPv6 client", "10.1.2.3", proxies, headers("2a00:1450:4001:82b::200e")},
		{"client with a port", "10.1.2.3", proxies, headers("203.0.113.5:41234")},
	} {
		b.Run(bc.name, func(b *testing.B) {
			peer := netip.MustParseAddr(bc.peer)
			b.ReportAllocs()
			for b.Loop() {
				_ = bc.t.Client(peer, bc.xff)
			}
		})
	}
}

// TestProxyProtocolTrustsOnlyTrustedPeers: a trusted peer's PROXY header (v1 or v2) names the
// client; the same header from an untrusted peer closes the connection; a trusted peer may
// also connect without one.
func TestProxyProtocolTrustsOnlyTrustedPeers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		trusted Trusted
		version byte // 0: no header
		want    string
	}{
		{"a v1 header from a trusted peer names the client", mustParse("127.0.0.0/8"), 1, "203.0.113.5"},
		{"a v2 header from a trusted peer names the client", mustParse("127.0.0.0/8"), 2, "203.0.113.5"},
		{"a trusted peer may connect without a header", mustParse("127.0.0.0/8"), 0, "127.0.0.1"},
		{"an untrusted peer's header closes the connection", mustParse("10.0.0.0/8"), 2, "refused"},
		{"an untrusted peer without a header is served", mustParse("10.0.0.0/8"), 0, "127.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := proxyRoundTrip(t, tc.trusted, tc.version); got != tc.want {
				t.Errorf("the server saw %s, want %s", got, tc.want)
			}
		})
	}
}

// proxyRoundTrip connects to an echo server behind tr.ProxyProtocol, sends a PROXY header of
// the version (none for 0) and a line, and returns the peer address the server saw, or
// "refused" when the server closed the connection unread.
func proxyRoundTrip(t *testing.T, tr Trusted, version byte) string {
	t.Helper()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := tr.ProxyProtocol(raw)
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
			return
		}
		fmt.Fprintf(c, "%s\n", addrOf(c.RemoteAddr()))
	}()
	conn, err := net.Dial("tcp", raw.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if version != 0 {
		h := proxyproto.HeaderProxyFromAddrs(version, &net.TCPAddr{IP: net.ParseIP("203.0.113.5"), Port: 41234}, &net.TCPAddr{IP: net.ParseIP("192.0.2.1"), Port: 443})
		if _, err := h.WriteTo(conn); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := conn.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return "refused"
	}
	return strings.TrimSpace(line)
}

// TestNoCodeAsksFiberForTheClientAddress keeps Client the one rule: Fiber's c.IP() and c.IPs()
// would read the peer, or with a ProxyHeader any header, whatever the trusted ranges say.
func TestNoCodeAsksFiberForTheClientAddress(t *testing.T) {
	fiberIP := regexp.MustCompile(`\.IPs?\(\)`)
	for _, dir := range []string{"../../internal", "../../cmd", "../../hack"} {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			if loc := fiberIP.FindIndex(src); loc != nil {
				t.Errorf("%s:%d calls %s; use the api's clientIP (clientaddr.Trusted.Client)", path, bytes.Count(src[:loc[0]], []byte("\n"))+1, src[loc[0]:loc[1]])
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
