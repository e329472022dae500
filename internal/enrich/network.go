package enrich

import (
	"bufio"
	"bytes"
	_ "embed"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"github.com/oschwald/maxminddb-golang/v2"
)

// Network is the autonomous system an address belongs to.
type Network struct {
	ASN uint32
	Org string
	// Hosting says the AS is a data centre's, a cloud's or a VPN provider's (hosting-asns.txt
	// and the operator's --hosting-asns): a click from it is rarely a person at home.
	Hosting bool
}

// asnDB is a MaxMind DB format file of autonomous systems (GeoLite2-ASN, DB-IP ASN Lite,
// ip-location-db's asn-mmdb: autonomous_system_number, autonomous_system_organization).
type asnDB struct {
	path string
	r    *maxminddb.Reader
}

func openASNDB(path string) (*asnDB, error) {
	r, err := openMMDB("asn-db", path)
	if err != nil {
		return nil, err
	}
	return &asnDB{path: path, r: r}, nil
}

func (a *asnDB) close() { _ = a.r.Close() }

func (a *asnDB) describe() string {
	return fmt.Sprintf("%s (%s, built %s)", a.path, a.r.Metadata.DatabaseType, a.r.Metadata.BuildTime().Format("2006-01-02"))
}

func (a *asnDB) network(addr netip.Addr, networks map[uintptr]*Network, hosting map[uint32]bool) *Network {
	res := a.r.Lookup(addr)
	if !res.Found() {
		return nil
	}
	off := res.Offset()
	if n, ok := networks[off]; ok {
		return n
	}
	var rec struct {
		Number uint32 `maxminddb:"autonomous_system_number"`
		Org    string `maxminddb:"autonomous_system_organization"`
	}
	var n *Network
	if res.Decode(&rec) == nil && rec.Number != 0 {
		n = &Network{ASN: rec.Number, Org: rec.Org, Hosting: hosting[rec.Number]}
	}
	if len(networks) >= recordCacheSize {
		clear(networks)
	}
	networks[off] = n
	return n
}

//go:embed hosting-asns.txt
var shippedHostingASNs []byte

// hostingASNs is the shipped list and the operator's file, if any.
func hostingASNs(path string) (map[uint32]bool, error) {
	set := map[uint32]bool{}
	if err := parseASNList("hosting-asns.txt", shippedHostingASNs, set); err != nil {
		return nil, err
	}
	if path == "" {
		return set, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--hosting-asns %s: %w", path, err)
	}
	if err := parseASNList(path, data, set); err != nil {
		return nil, fmt.Errorf("--hosting-asns %w", err)
	}
	return set, nil
}

// parseASNList reads one AS number a line ("16509" or "AS16509"), with # comments and blank
// lines.
func parseASNList(name string, data []byte, set map[uint32]bool) error {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for line := 1; sc.Scan(); line++ {
		text, _, _ := strings.Cut(sc.Text(), "#")
		text = strings.TrimSpace(text)
		if text == "" {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimPrefix(strings.ToUpper(text), "AS"), 10, 32)
		if err != nil || n == 0 {
			return fmt.Errorf("%s:%d: %q is not an AS number like 16509 or AS16509", name, line, text)
		}
		set[uint32(n)] = true
	}
	return sc.Err()
}
