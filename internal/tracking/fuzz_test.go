package tracking

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
)

// readSegment decodes the click spool after a crash, whatever the disk holds: it never
// panics, returns only records whose checksum holds, and accounts for every byte (records
// read plus the skipped tail).
func FuzzReadSegment(f *testing.F) {
	record := func(p string) []byte {
		b := make([]byte, recordHeader, recordHeader+len(p))
		binary.BigEndian.PutUint32(b, uint32(len(p)))
		binary.BigEndian.PutUint32(b[4:], crc32.Checksum([]byte(p), castagnoli))
		return append(b, p...)
	}
	two := append(record(`{"click_id":"clk_1"}`), record(`{"click_id":"clk_2"}`)...)
	f.Add(two)
	f.Add(two[:len(two)-3])                // torn tail
	f.Add(append(record("x"), 0, 0, 0, 0)) // short header
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(dir, "segment")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		payloads, skipped, err := readSegment(path)
		if err != nil {
			t.Fatal(err)
		}
		n := skipped
		for _, p := range payloads {
			if len(p) == 0 || len(p) > maxRecord {
				t.Fatalf("returned a record of %d bytes", len(p))
			}
			n += recordHeader + len(p)
		}
		if n != len(data) {
			t.Fatalf("%d bytes read and skipped of %d", n, len(data))
		}
	})
}
