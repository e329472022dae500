package httpapi_test

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pires/go-proxyproto"

	"github.com/partnerstream/partnerstream/internal/clientaddr"
	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/httpapi"
)

// On loopback every 127.x.y.z is a source of its own: the proxy the tests trust, and a client
// that reaches the api directly.
const (
	trustedProxy = "127.0.0.1"
	directClient = "127.0.0.2"
)

// recordedClicks keeps the address of every click recorded.
type recordedClicks struct {
	mu  sync.Mutex
	ips []string
}

func (r *recordedClicks) Record(_ context.Context, c events.Click) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ips = append(r.ips, c.IP)
	return nil
}

func (r *recordedClicks) last() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.ips) == 0 {
		return ""
	}
	return r.ips[len(r.ips)-1]
}

// proxiedAPI is a fake fixture that trusts trustedProxy, serves clickService's link and
// listens on loopback, so that the peer address is real.
type proxiedAPI struct {
	*fakeFixture
	addr   string
	clicks *recordedClicks
}

func newProxiedAPI(t *testing.T, opts ...func(*httpapi.Options)) *proxiedAPI {
	t.Helper()
	trusted, err := clientaddr.Parse([]string{trustedProxy})
	if err != nil {
		t.Fatal(err)
	}
	f := newFakeFixture(t, append([]func(*httpapi.Options){func(o *httpapi.Options) { o.TrustedProxies = trusted }}, opts...)...)
	clicks := &recordedClicks{}
	f.srv.MountTracking(nil, clickService(t, clicks), httpapi.TrackingOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	addr, err := f.srv.Addr(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return &proxiedAPI{fakeFixture: f, addr: addr, clicks: clicks}
}

// dial connects to the api from the loopback address from.
func (p *proxiedAPI) dial(t *testing.T, from string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	conn, err := d.Dial("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	return conn
}

// get sends GET path from the address from with the X-Forwarded-For headers and other
// headers ("Name: value") over conn, or a new connection when conn is nil.
func (p *proxiedAPI) get(t *testing.T, conn net.Conn, from, path string, xff []string, headers ...string) (*http.Response, error) {
	t.Helper()
	if conn == nil {
		conn = p.dial(t, from)
	}
	var b strings.Builder
	b.WriteString("GET " + path + " HTTP/1.1\r\nHost: track.example.com\r\nConnection: close\r\n")
	for _, v := range xff {
		b.WriteString("X-Forwarded-For: " + v + "\r\n")
	}
	for _, h := range headers {
		b.WriteString(h + "\r\n")
	}
	b.WriteString("\r\n")
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	return resp, nil
}

func TestAClickIsRecordedWithTheClientAddressTheProxiesName(t *testing.T) {
	p := newProxiedAPI(t)
	hundred := strings.TrimSuffix(strings.Repeat("203.0.113.9, ", 100), ", ")
	for _, tc := range []struct {
		name, from string
		xff        []string
		want       string
	}{
		{"a trusted proxy's X-Forwarded-For names the client", trustedProxy, []string{"203.0.113.5"}, "203.0.113.5"},
		{"a forged left-most entry does not change the address", trustedProxy, []string{"198.51.100.66, 203.0.113.5"}, "203.0.113.5"},
		{"a forged header before the proxy's does not change the address", trustedProxy, []string{"198.51.100.66", "203.0.113.5"}, "203.0.113.5"},
		{"an untrusted peer's X-Forwarded-For is ignored", directClient, []string{"203.0.113.5"}, directClient},
		{"without X-Forwarded-For the proxy is the client", trustedProxy, nil, trustedProxy},
		{"a malformed X-Forwarded-For leaves the proxy", trustedProxy, []string{"203.0.113.5, <script>"}, trustedProxy},
		{"an IPv6 address with a zone is refused", trustedProxy, []string{"fe80::1%eth0"}, trustedProxy},
		{"a hundred addresses are read from the right", trustedProxy, []string{hundred}, "203.0.113.9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := p.get(t, nil, tc.from, "/c/"+clickCode, tc.xff)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusFound {
				t.Fatalf("status %d, want the redirect", resp.StatusCode)
			}
			if got := p.clicks.last(); got != tc.want {
				t.Errorf("click recorded from %s, want %s", got, tc.want)
			}
		})
	}
}

// The failed-credential throttle counts per client: two clients behind one proxy do not
// share a budget, and a direct client cannot spend another's by naming it.
func TestTheFailedCredentialThrottleKeysOnTheClientAddress(t *testing.T) {
	p := newProxiedAPI(t, func(o *httpapi.Options) { o.FailedAuthLimit = 2 })
	wrongKey := "X-Api-Key: ps_live_" + strings.Repeat("x", 40)
	status := func(from, xff string) int {
		t.Helper()
		resp, err := p.get(t, nil, from, "/api/partner-api/me", []string{xff}, wrongKey)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode
	}
	for range 2 {
		if got := status(trustedProxy, "203.0.113.1"); got != http.StatusUnauthorized {
			t.Fatalf("a wrong key: %d, want 401", got)
		}
	}
	if got := status(trustedProxy, "203.0.113.1"); got != http.StatusTooManyRequests {
		t.Fatalf("the third wrong key of a client: %d, want 429", got)
	}
	if got := status(trustedProxy, "203.0.113.2"); got != http.StatusUnauthorized {
		t.Errorf("another client behind the same proxy: %d, want 401 (a budget of its own)", got)
	}
	if got := status(directClient, "203.0.113.1"); got != http.StatusUnauthorized {
		t.Errorf("a direct client naming the throttled one: %d, want 401", got)
	}
}

// With the PROXY protocol on, a trusted peer's header names the client; an untrusted peer's
// header closes the connection unanswered, and without one it is served as itself.
func TestAPROXYProtocolHeaderNamesTheClientOnlyFromATrustedPeer(t *testing.T) {
	p := newProxiedAPI(t, func(o *httpapi.Options) { o.ProxyProtocol = true })
	for _, tc := range []struct {
		name, from string
		version    byte // 0: no header
		want       string
	}{
		{"a v1 header from the trusted proxy", trustedProxy, 1, "203.0.113.7"},
		{"a v2 header from the trusted proxy", trustedProxy, 2, "203.0.113.7"},
		{"the trusted proxy without a header", trustedProxy, 0, trustedProxy},
		{"a direct client without a header", directClient, 0, directClient},
		{"a direct client's header", directClient, 2, "refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn := p.dial(t, tc.from)
			if tc.version != 0 {
				h := proxyproto.HeaderProxyFromAddrs(tc.version, &net.TCPAddr{IP: net.ParseIP("203.0.113.7"), Port: 52000},
					&net.TCPAddr{IP: net.ParseIP("192.0.2.1"), Port: 443})
				if _, err := h.WriteTo(conn); err != nil {
					t.Fatal(err)
				}
			}
			before := p.clicks.last()
			resp, err := p.get(t, conn, tc.from, "/c/"+clickCode, nil)
			got := p.clicks.last()
			switch {
			case err != nil && tc.want == "refused" && got == before:
				return
			case err != nil:
				t.Fatalf("no answer: %v", err)
			case resp.StatusCode != http.StatusFound:
				t.Fatalf("status %d, want the redirect", resp.StatusCode)
			case got != tc.want:
				t.Errorf("click recorded from %s, want %s", got, tc.want)
			}
		})
	}
}

// A PROXY header garbled or cut short closes the connection: never a 500, never a panic, and
// the server goes on serving.
func TestAMalformedPROXYHeaderIsNeverA500(t *testing.T) {
	p := newProxiedAPI(t, func(o *httpapi.Options) { o.ProxyProtocol = true })
	for _, header := range []string{
		"PROXY TCP4 not-an-address 192.0.2.1 52000 443\r\n",
		"PROXY TCP6 fe80::1%eth0 2001:db8::1 52000 443\r\n",
		"PROXY TCP4 " + strings.Repeat("1", 200) + "\r\n",
		"\r\n\r\n\x00\r\nQUIT\n\x21\x11\xff\xff",
	} {
		conn := p.dial(t, trustedProxy)
		if _, err := conn.Write([]byte(header)); err != nil {
			t.Fatal(err)
		}
		if resp, err := p.get(t, conn, trustedProxy, "/c/"+clickCode, nil); err == nil && resp.StatusCode >= 500 {
			t.Errorf("header %q: status %d", header, resp.StatusCode)
		}
	}
	if resp, err := p.get(t, nil, trustedProxy, "/c/"+clickCode, nil); err != nil || resp.StatusCode != http.StatusFound {
		t.Fatalf("after the malformed headers: %v %v, want the redirect", resp, err)
	}
}
