// Command asndb builds the autonomous-system database that --asn-db reads by default, in the
// MaxMind DB format (GeoLite2-ASN's record: autonomous_system_number and
// autonomous_system_organization), from the CSV files of the npm package @ip-location-db/asn
// (hack/asn; CC BY 4.0: RouteViews, DB-IP and NRO). The package publishes no MaxMind DB file of
// its own that the registry serves, and an operator's GeoLite2-ASN or DB-IP ASN Lite file has the
// same shape, so the enricher reads either the same way.
//
//	go run ./hack/asndb --out asn.mmdb asn-ipv4.csv asn-ipv6.csv
package main

import (
	"encoding/csv"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/maxmind/mmdbwriter"
	"github.com/maxmind/mmdbwriter/mmdbtype"
)

func main() {
	out := flag.String("out", "asn.mmdb", "the MaxMind DB file to write")
	flag.Parse()
	if flag.NArg() == 0 {
		log.Fatal("asndb: name the CSV files (start,end,asn,organisation)")
	}
	if err := build(*out, flag.Args()); err != nil {
		log.Fatalf("asndb: %v", err)
	}
}

func build(out string, inputs []string) error {
	tree, err := mmdbwriter.New(mmdbwriter.Options{
		DatabaseType: "GeoLite2-ASN",
		Description:  map[string]string{"en": "PartnerStream's ASN database, built from @ip-location-db/asn (CC BY 4.0: RouteViews, DB-IP, NRO)"},
		RecordSize:   24,
		IPVersion:    6,
	})
	if err != nil {
		return fmt.Errorf("new tree: %w", err)
	}
	// One value per AS: the writer stores equal values once, and a map keeps the CSV's
	// hundreds of thousands of ranges from allocating a record each.
	records := map[uint32]mmdbtype.Map{}
	total := 0
	for _, in := range inputs {
		n, err := insertFile(tree, in, records)
		if err != nil {
			return err
		}
		log.Printf("asndb: %s: %d ranges", filepath.Base(in), n)
		total += n
	}
	tmp := out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	if _, err := tree.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	// Renamed only when whole: an interrupted build never leaves a file that looks finished.
	if err := os.Rename(tmp, out); err != nil {
		return fmt.Errorf("rename %s: %w", out, err)
	}
	log.Printf("asndb: %d ranges, %d autonomous systems -> %s", total, len(records), out)
	return nil
}

func insertFile(tree *mmdbwriter.Tree, path string, records map[uint32]mmdbtype.Map) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = 4
	n := 0
	for {
		row, err := r.Read()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("%s: %w", path, err)
		}
		start, end := net.ParseIP(row[0]), net.ParseIP(row[1])
		asn, err := strconv.ParseUint(row[2], 10, 32)
		if start == nil || end == nil || err != nil {
			line, _ := r.FieldPos(0)
			return n, fmt.Errorf("%s:%d: want start,end,asn,organisation, got %q", path, line, row)
		}
		rec, ok := records[uint32(asn)]
		if !ok {
			rec = mmdbtype.Map{
				"autonomous_system_number":       mmdbtype.Uint32(asn),
				"autonomous_system_organization": mmdbtype.String(row[3]),
			}
			records[uint32(asn)] = rec
		}
		err = tree.InsertRange(start, end, rec)
		var reserved *mmdbwriter.ReservedNetworkError
		var aliased *mmdbwriter.AliasedNetworkError
		if errors.As(err, &reserved) || errors.As(err, &aliased) {
			// Special-purpose space (6to4 relays, IPv4 seen through IPv6): never a click's
			// public address, and the format keeps it unassigned.
			continue
		}
		if err != nil {
			line, _ := r.FieldPos(0)
			return n, fmt.Errorf("%s:%d: insert %s-%s: %w", path, line, row[0], row[1], err)
		}
		n++
	}
}
