package enrich

import (
	"bufio"
	"bytes"
	_ "embed"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/oschwald/maxminddb-golang/v2"
)

// Network is the autonomous system an address belongs to, as an ASN database says
// (GeoLite2-ASN, DB-IP ASN Lite: autonomous_system_number, autonomous_system_organization).
type Network struct {
	ASN uint32
	Org string
	// Hosting says the AS is a data centre's, a cloud's or a VPN provider's (hosting-asns.txt
	// and the operator's --hosting-asns): a click from it is rarely a person at home.
	Hosting bool
}

func (s *Session) decodeNetwork(res maxminddb.Result) *Network {
	var rec struct {
		Number uint32 `maxminddb:"autonomous_system_number"`
		Org    string `maxminddb:"autonomous_system_organization"`
	}
	if res.Decode(&rec) != nil || rec.Number == 0 {
		return nil
	}
	return &Network{ASN: rec.Number, Org: rec.Org, Hosting: s.e.hosting[rec.Number]}
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
