package enrich

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/partnerstream/partnerstream/internal/enrich/enrichtest"
	"github.com/partnerstream/partnerstream/internal/testenv"
)

// The networks of the generated databases. 16509 is Amazon's, on the shipped hosting list;
// 64501 is on none until the operator's file adds it.
var testNetworks = []enrichtest.Network{
	{CIDR: "203.0.113.0/24", Country: "ES", Region: "Madrid", City: "Madrid", ASN: 64500, Org: "Example Telecom"},
	{CIDR: "198.51.100.0/24", Country: "US", Region: "Virginia", City: "Ashburn", ASN: 16509, Org: "AMAZON-02"},
	{CIDR: "2001:db8:1::/48", Country: "DE", Region: "Bavaria", City: "Munich", ASN: 64501, Org: "Example Fiber"},
	{CIDR: "192.0.2.0/24", Country: "JP"}, // a country-only record, in no AS
}

func asnNetworks() (nets []enrichtest.Network) {
	for _, n := range testNetworks {
		if n.ASN != 0 {
			nets = append(nets, n)
		}
	}
	return nets
}

func mustNew(t *testing.T, o Options) *Enricher {
	t.Helper()
	e, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

type addressCase struct {
	ip      string
	stored  string
	place   *Place
	network *Network
}

var addressCases = []addressCase{
	{"203.0.113.77", "203.0.113.0", &Place{"ES", "Madrid", "Madrid"}, &Network{64500, "Example Telecom", false}},
	{"198.51.100.200", "198.51.100.0", &Place{"US", "Virginia", "Ashburn"}, &Network{16509, "AMAZON-02", true}},
	{"2001:db8:1:42::7", "2001:db8:1::", &Place{"DE", "Bavaria", "Munich"}, &Network{64501, "Example Fiber", true}},
	{"192.0.2.9", "192.0.2.0", &Place{Country: "JP"}, nil},
	// An IPv4 address written as IPv6 is the IPv4 one.
	{"::ffff:203.0.113.9", "203.0.113.0", &Place{"ES", "Madrid", "Madrid"}, &Network{64500, "Example Telecom", false}},
	// Absent from both databases: stored truncated, with nothing else.
	{"100.64.1.2", "100.64.1.0", nil, nil},
	{"2001:db8:ffff::1", "2001:db8:ffff::", nil, nil},
	{"fe80::1%eth0", "fe80::", nil, nil},
	// Not an address: nothing is stored.
	{"not-an-ip", "", nil, nil},
	{"203.0.113.256", "", nil, nil},
}

func TestAddressesInBothLayouts(t *testing.T) {
	hostingFile := filepath.Join(t.TempDir(), "hosting.txt")
	if err := os.WriteFile(hostingFile, []byte("# ours\nAS64501\n\n 64502 # a comment\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	asn := enrichtest.ASN(t, asnNetworks()...)
	for layout, geo := range map[string]string{"GeoLite2": enrichtest.GeoLite2City(t, testNetworks...), "ip-location-db": enrichtest.Flat(t, testNetworks...)} {
		t.Run(layout, func(t *testing.T) {
			s := mustNew(t, Options{GeoIPDB: geo, ASNDB: asn, HostingASNs: hostingFile}).NewSession()
			for range 2 { // the second time from the caches
				for _, tc := range addressCases {
					got := s.Enrich(tc.ip, "", "", "").Address
					if got.Stored != tc.stored || !equal(got.Place, tc.place) || !equal(got.Network, tc.network) {
						t.Errorf("%s: stored %q, place %+v, network %+v; want %q, %+v, %+v", tc.ip,
							got.Stored, deref(got.Place), deref(got.Network), tc.stored, deref(tc.place), deref(tc.network))
					}
				}
			}
		})
	}
}

func TestKeepFullIP(t *testing.T) {
	s := mustNew(t, Options{GeoIPDB: enrichtest.GeoLite2City(t, testNetworks...), KeepFullIP: true}).NewSession()
	for ip, want := range map[string]string{"203.0.113.77": "203.0.113.77", "2001:db8:1:42::7": "2001:db8:1:42::7", "::ffff:203.0.113.9": "203.0.113.9"} {
		a := s.Enrich(ip, "", "", "").Address
		if a.Stored != want || a.Place == nil {
			t.Errorf("%s: stored %q, place %v; want %q and a place", ip, a.Stored, a.Place, want)
		}
	}
}

// Without databases an address is still truncated, and has no place or network.
func TestNoDatabases(t *testing.T) {
	a := mustNew(t, Options{}).NewSession().Enrich("203.0.113.77", "", "", "").Address
	if a.Stored != "203.0.113.0" || a.Place != nil || a.Network != nil {
		t.Errorf("got %+v", *a)
	}
}

// The image's database (hack/npm-tools.sh geoip) places well-known public addresses in their
// countries: a lookup in a local file, no network.
func TestDefaultDatabase(t *testing.T) {
	db := testenv.Require(t, testenv.EnvGeoIPDB)
	s := mustNew(t, Options{GeoIPDB: db}).NewSession()
	for ip, country := range map[string]string{
		"8.8.8.8":              "US", // Google Public DNS
		"2001:4860:4860::8888": "US",
		"193.0.6.139":          "NL", // RIPE NCC, Amsterdam
		"202.12.29.205":        "AU", // APNIC, Brisbane
		"200.160.2.3":          "BR", // NIC.br
		"77.88.8.8":            "RU", // Yandex DNS
		"81.2.69.142":          "GB",
	} {
		a := s.Enrich(ip, "", "", "").Address
		if a.Place == nil || a.Place.Country != country {
			t.Errorf("%s: place %+v, want country %s", ip, deref(a.Place), country)
		}
	}
	for _, ip := range []string{"10.1.2.3", "127.0.0.1", "192.168.1.1"} {
		if a := s.Enrich(ip, "", "", ""); a.Address.Place != nil {
			t.Errorf("%s, a private address, is placed in %+v", ip, *a.Address.Place)
		}
	}
}

// The image's ASN database (hack/npm-tools.sh asn, built by hack/asndb) names the networks of
// well-known public addresses, and the shipped hosting list flags the clouds among them.
func TestDefaultASNDatabase(t *testing.T) {
	db := testenv.Require(t, testenv.EnvASNDB)
	s := mustNew(t, Options{ASNDB: db}).NewSession()
	for _, c := range []struct {
		ip      string
		asn     uint32
		hosting bool
	}{
		{"8.8.8.8", 15169, true}, // Google Public DNS
		{"2001:4860:4860::8888", 15169, true},
		{"1.1.1.1", 13335, true},     // Cloudflare
		{"193.0.6.139", 3333, false}, // RIPE NCC
		{"9.9.9.9", 19281, false},    // Quad9
	} {
		n := s.Enrich(c.ip, "", "", "").Address.Network
		if n == nil || n.ASN != c.asn || n.Org == "" || n.Hosting != c.hosting {
			t.Errorf("%s: network %+v, want AS%d (hosting %v) with its organisation", c.ip, n, c.asn, c.hosting)
		}
	}
	for _, ip := range []string{"10.1.2.3", "127.0.0.1", "192.168.1.1"} {
		if n := s.Enrich(ip, "", "", "").Address.Network; n != nil {
			t.Errorf("%s, a private address, is in %+v", ip, *n)
		}
	}
}

// Real user agents of the major browsers, phones, tablets and bots.
var deviceCases = []struct {
	ua   string
	want Device
}{
	{"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36", Device{"desktop", "Chrome", "Windows"}},
	{"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0", Device{"desktop", "Edge", "Windows"}},
	{"Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0", Device{"desktop", "Firefox", "Windows"}},
	{"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 OPR/115.0.0.0", Device{"desktop", "Opera", "Windows"}},
	{"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15", Device{"desktop", "Safari", "MacOS"}},
	{"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36", Device{"desktop", "Chrome", "Linux"}},
	{"Mozilla/5.0 (X11; CrOS x86_64 14541.0.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36", Device{"desktop", "Chrome", "ChromeOS"}},
	{"Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1", Device{"mobile", "Safari", "iOS"}},
	{"Mozilla/5.0 (iPhone; CPU iPhone OS 17_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/131.0.6778.73 Mobile/15E148 Safari/604.1", Device{"mobile", "Chrome", "iOS"}},
	{"Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36", Device{"mobile", "Chrome", "Android"}},
	{"Mozilla/5.0 (Linux; Android 14; SAMSUNG SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/26.0 Chrome/122.0.0.0 Mobile Safari/537.36", Device{"mobile", "Samsung Browser", "Android"}},
	{"Mozilla/5.0 (iPad; CPU OS 17_6 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.6 Mobile/15E148 Safari/604.1", Device{"tablet", "Safari", "iOS"}},
	{"Mozilla/5.0 (Linux; Android 13; SM-X700) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36", Device{"tablet", "Chrome", "Android"}},
	{"Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", Device{Type: "bot"}},
	{"Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)", Device{Type: "bot"}},
	{"facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)", Device{Type: "bot"}},
	{"curl/8.5.0", Device{Type: "bot"}},
	// A smart TV is no type of the table: other.
	{"Mozilla/5.0 (SMART-TV; Linux; Tizen 6.0) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/4.0 Chrome/76.0.3809.146 TV Safari/537.36", Device{"other", "Samsung Browser", "Linux"}},
	// What no parser understands.
	{"not a user agent at all", Device{Type: "other"}},
	{"\x00\xff(((;;;", Device{Type: "other"}},
	{strings.Repeat("Mozilla/5.0 (", 80), Device{Type: "other"}},
	{"", Device{Type: "other"}},
}

func TestDevices(t *testing.T) {
	s := mustNew(t, Options{}).NewSession()
	for range 2 {
		for _, tc := range deviceCases {
			if got := s.Enrich("", tc.ua, "", "").Device; *got != tc.want {
				t.Errorf("%q: %+v, want %+v", tc.ua, *got, tc.want)
			}
		}
	}
}

func TestReferrerDomains(t *testing.T) {
	s := mustNew(t, Options{}).NewSession()
	for ref, want := range map[string]string{
		"https://news.bbc.co.uk/sport/football?page=2":   "bbc.co.uk",
		"https://www.google.com/":                        "google.com",
		"https://l.facebook.com/l.php?u=https%3A%2F%2Fx": "facebook.com",
		"https://someone.github.io/post":                 "someone.github.io", // a private suffix
		"http://WWW.Example.COM./a":                      "example.com",
		"https://192.0.2.1:8080/x":                       "192.0.2.1",
		"https://[2001:db8::1]/":                         "2001:db8::1",
		"android-app://com.google.android.gm/":           "",
		"not a url":                                      "",
		"://bad":                                         "",
		"https://":                                       "",
		"https://co.uk/":                                 "", // a public suffix alone
		"https://localhost/":                             "",
		"http://%zz/":                                    "",
		"":                                               "",
	} {
		if got := s.Enrich("", "", ref, "").Referrer.Domain; got != want {
			t.Errorf("%q: domain %q, want %q", ref, got, want)
		}
	}
}

func TestUTM(t *testing.T) {
	long := strings.Repeat("é", 200) // 400 bytes
	s := mustNew(t, Options{}).NewSession()
	for landing, want := range map[string]UTM{
		"https://shop.example/p?utm_source=newsletter&utm_medium=email&utm_campaign=black%20friday": {Source: "newsletter", Medium: "email", Campaign: "black friday"},
		"https://shop.example/p?gclid=abc&utm_source=g&fbclid=x&ScCid=1&gclidx=2":                   {Source: "g", PaidAds: "gclid,fbclid,sccid"},
		"https://shop.example/p?msclkid=1":                                                          {PaidAds: "msclkid"},
		"https://shop.example/p?utm_campaign=c&utm_source=a&broken=%zz":                             {Source: "a", Campaign: "c"},
		"https://shop.example/p?utm_source=" + long:                                                 {Source: strings.Repeat("é", 128)},
		"https://shop.example/p":                                                                    {},
		"https://shop.example/p?q=shoes":                                                            {},
		"::not a url?utm_source=x":                                                                  {},
		"https://shop.example/%zz?utm_source=x":                                                     {},
		"":                                                                                          {},
	} {
		if got := s.Enrich("", "", "", landing).UTM; *got != want {
			t.Errorf("%q: %+v, want %+v", landing, *got, want)
		}
	}
}

// A wrong file stops the component at start, with the setting and the file in the error.
func TestBadFiles(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.mmdb")
	if err := os.WriteFile(garbage, []byte(strings.Repeat("not a database ", 1000)), 0o600); err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(enrichtest.GeoLite2City(t, testNetworks...))
	if err != nil {
		t.Fatal(err)
	}
	// The search tree overwritten, metadata intact: Open succeeds, lookups fail.
	corrupt := filepath.Join(dir, "corrupt.mmdb")
	bad := append([]byte{}, good...)
	for i := range min(len(bad)/2, 4096) {
		bad[i] = 0xff
	}
	if err := os.WriteFile(corrupt, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(dir, "truncated.mmdb")
	if err := os.WriteFile(truncated, good[:len(good)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	badHosting := filepath.Join(dir, "hosting.txt")
	if err := os.WriteFile(badHosting, []byte("16509\nAmazon\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.mmdb")
	for name, tc := range map[string]struct {
		o    Options
		want []string
	}{
		"missing geo":     {Options{GeoIPDB: missing}, []string{"--geoip-db", missing, "no such file"}},
		"garbage geo":     {Options{GeoIPDB: garbage}, []string{"--geoip-db", garbage}},
		"corrupt geo":     {Options{GeoIPDB: corrupt}, []string{"--geoip-db", corrupt}},
		"truncated geo":   {Options{GeoIPDB: truncated}, []string{"--geoip-db", truncated}},
		"missing asn":     {Options{ASNDB: missing}, []string{"--asn-db", missing}},
		"garbage asn":     {Options{ASNDB: garbage}, []string{"--asn-db", garbage}},
		"missing hosting": {Options{HostingASNs: missing}, []string{"--hosting-asns", missing}},
		"bad hosting":     {Options{HostingASNs: badHosting}, []string{"--hosting-asns", badHosting + ":2", `"Amazon"`}},
	} {
		e, err := New(tc.o)
		if err == nil {
			e.Close()
			t.Errorf("%s: no error", name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not name %q", name, err, w)
			}
		}
	}
}

// A repeated input is one parse: the session hands out the same value. Full, a cache starts
// over rather than growing.
func TestCaches(t *testing.T) {
	s := mustNew(t, Options{}).NewSession()
	ua := deviceCases[0].ua
	a, b := s.Enrich("203.0.113.7", ua, "https://a.example/", "https://b.example/?utm_source=x"), s.Enrich("203.0.113.7", ua, "https://a.example/", "https://b.example/?utm_source=x")
	if a != b {
		t.Errorf("the same click enriched twice: %+v and %+v", a, b)
	}
	c := newCache[int](3)
	for i, k := range []string{"a", "b", "c", "d"} {
		c.put(k, i)
	}
	if _, ok := c.get("a"); ok || len(c.m) != 1 {
		t.Errorf("a full cache kept %d entries", len(c.m))
	}
	if v, ok := c.get("d"); !ok || v != 3 {
		t.Errorf("the entry put after it started over: %d, %v", v, ok)
	}
}

// Ingest hands the session views of its arena, which a cached value must not keep: the arena
// would live as long as the value, and a test overwriting the bytes sees whether it does.
func TestCachedValuesKeepNoViewOfTheirInputs(t *testing.T) {
	geo := enrichtest.GeoLite2City(t, testNetworks...)
	s := mustNew(t, Options{GeoIPDB: geo, ASNDB: enrichtest.ASN(t, asnNetworks()...)}).NewSession()
	ip, ua := "203.0.113.7", deviceCases[0].ua
	ref, landing := "https://www.example.co.uk/reviews", "https://shop.example/p?utm_source=news&utm_medium=email&utm_campaign=spring"
	arena := []byte(ip + ua + ref + landing)
	view := func(from, n int) string { return unsafe.String(&arena[from], n) }
	got := s.Enrich(view(0, len(ip)), view(len(ip), len(ua)), view(len(ip)+len(ua), len(ref)), view(len(ip)+len(ua)+len(ref), len(landing)))
	for i := range arena {
		arena[i] = 'x'
	}
	want := mustNew(t, Options{GeoIPDB: geo, ASNDB: enrichtest.ASN(t, asnNetworks()...)}).NewSession().Enrich(ip, ua, ref, landing)
	if *got.Address.Place != *want.Address.Place || *got.Address.Network != *want.Address.Network || got.Address.Stored != want.Address.Stored {
		t.Errorf("the address's values changed with the bytes of the input: %+v, want %+v", *got.Address, *want.Address)
	}
	if *got.Device != *want.Device || *got.Referrer != *want.Referrer || *got.UTM != *want.UTM {
		t.Errorf("values changed with the bytes of the input: %+v %+v %+v, want %+v %+v %+v",
			*got.Device, *got.Referrer, *got.UTM, *want.Device, *want.Referrer, *want.UTM)
	}
	if want.Referrer.Domain != "example.co.uk" || want.UTM.Campaign != "spring" {
		t.Fatalf("the inputs say nothing: %+v %+v", *want.Referrer, *want.UTM)
	}
}

func equal[T comparable](a, b *T) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
