package tracking

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func openTestSpool(t *testing.T, dir string, maxBytes, segBytes int64) *spool {
	t.Helper()
	s, err := openSpool(dir, maxBytes, segBytes, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// drainSpool reads every segment in order the way the replay does, deleting each.
func drainSpool(t *testing.T, s *spool) (got []string, skipped int) {
	t.Helper()
	for {
		seg, ok, err := s.Oldest()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return got, skipped
		}
		ps, sk, err := readSegment(seg.path)
		if err != nil {
			t.Fatal(err)
		}
		skipped += sk
		for _, p := range ps {
			got = append(got, string(p))
		}
		if err := s.Remove(seg); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSpoolKeepsRecordsInOrderAcrossSegmentsAndReopening(t *testing.T) {
	dir := t.TempDir()
	s, err := openSpool(dir, 1<<20, 64, nil) // tiny segments: a few records each
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 20 {
		p := fmt.Sprintf("click-%02d", i)
		if err := s.Append([]byte(p)); err != nil {
			t.Fatal(err)
		}
		want = append(want, p)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "*.wal"))
	if len(segs) < 3 {
		t.Fatalf("%d segments, want the records spread over several", len(segs))
	}

	s = openTestSpool(t, dir, 1<<20, 64)
	if s.Size() == 0 {
		t.Fatal("a reopened spool reports no bytes")
	}
	// New records go after the old ones.
	if err := s.Append([]byte("after-reopen")); err != nil {
		t.Fatal(err)
	}
	want = append(want, "after-reopen")
	got, skipped := drainSpool(t, s)
	if fmt.Sprint(got) != fmt.Sprint(want) || skipped != 0 {
		t.Fatalf("got %v (skipped %d)\nwant %v", got, skipped, want)
	}
	if s.Size() != 0 {
		t.Fatalf("size %d after draining, want 0", s.Size())
	}
}

func TestSpoolGroupCommitsConcurrentAppends(t *testing.T) {
	s := openTestSpool(t, t.TempDir(), 1<<30, 4<<20)
	const writers, each = 32, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				if err := s.Append(fmt.Appendf(nil, "w%02d-%03d", w, i)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	got, _ := drainSpool(t, s)
	if len(got) != writers*each {
		t.Fatalf("%d records, want %d", len(got), writers*each)
	}
	// Each writer's records stay in its order.
	next := map[string]int{}
	for _, g := range got {
		var w, i int
		fmt.Sscanf(g, "w%02d-%03d", &w, &i)
		key := fmt.Sprint(w)
		if next[key] != i {
			t.Fatalf("writer %d: record %d came before %d", w, i, next[key])
		}
		next[key]++
	}
}

func TestSpoolRefusesRecordsBeyondItsSize(t *testing.T) {
	s := openTestSpool(t, t.TempDir(), 100, 1<<20)
	if err := s.Append(make([]byte, 80)); err != nil { // 88 bytes with its header
		t.Fatal(err)
	}
	if err := s.Append(make([]byte, 10)); !errors.Is(err, ErrSpoolFull) {
		t.Fatalf("append beyond the limit: %v, want ErrSpoolFull", err)
	}
	if err := s.Append(make([]byte, 4)); err != nil {
		t.Fatalf("a record that still fits: %v", err)
	}
}

func TestSpoolSkipsATornOrCorruptTail(t *testing.T) {
	cases := []struct {
		name    string
		tail    func(good []byte) []byte
		skipped int
	}{
		{"a header cut short", func([]byte) []byte { return []byte{0, 0, 0} }, 3},
		{"a payload cut short", func(good []byte) []byte { return good[:len(good)-2] }, 12},
		{"a checksum mismatch", func(good []byte) []byte {
			bad := append([]byte(nil), good...)
			bad[len(bad)-1] ^= 0xff
			return bad
		}, 14},
		{"a zero length", func([]byte) []byte { return make([]byte, 8) }, 8},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := openSpool(dir, 1<<20, 1<<20, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{"first", "second"} {
				if err := s.Append([]byte(p)); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			segs, _ := filepath.Glob(filepath.Join(dir, "*.wal"))
			data, _ := os.ReadFile(segs[0])
			good := data[13:] // the "second" record: 8 bytes of header and 6 of payload
			f, _ := os.OpenFile(segs[0], os.O_APPEND|os.O_WRONLY, 0)
			f.Write(c.tail(good))
			f.Close()

			s = openTestSpool(t, dir, 1<<20, 1<<20)
			got, skipped := drainSpool(t, s)
			if fmt.Sprint(got) != "[first second]" || skipped != c.skipped {
				t.Fatalf("got %v skipped %d, want [first second] and %d", got, skipped, c.skipped)
			}
		})
	}
}

func TestSpoolDirectoryIsExclusive(t *testing.T) {
	dir := t.TempDir()
	openTestSpool(t, dir, 1<<20, 1<<20)
	if s, err := openSpool(dir, 1<<20, 1<<20, nil); err == nil {
		s.Close()
		t.Fatal("a second spool opened a directory in use")
	}
}

// BenchmarkSpoolAppend is the cost of a spooled click with concurrent appenders sharing
// each write and fsync (group commit).
func BenchmarkSpoolAppend(b *testing.B) {
	s, err := openSpool(b.TempDir(), 1<<40, 4<<20, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	payload := make([]byte, 560)
	b.SetParallelism(64)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := s.Append(payload); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
