package export

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestGuardNeutralisesWhatASpreadsheetWouldRun(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"order-1", "order-1"},
		{"=HYPERLINK(\"http://x\")", "'=HYPERLINK(\"http://x\")"},
		{"+1+2", "'+1+2"},
		{"-2+3", "'-2+3"},
		{"@SUM(A1)", "'@SUM(A1)"},
		{"\t=1", "'\t=1"},
		{"\r=1", "'\r=1"},
		{" =1", " =1"},
		{"a=b", "a=b"},
		{"'quoted", "'quoted"},
		{"Zürich 東京", "Zürich 東京"},
	} {
		if got := Guard(c.in); got != c.want {
			t.Errorf("Guard(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestPlainNumber(t *testing.T) {
	for _, c := range []struct {
		in   string
		want bool
	}{
		{"0", true}, {"42.50", true}, {"-12.50", true}, {"1000000", true},
		{"", false}, {"-", false}, {".5", false}, {"5.", false}, {"1.2.3", false}, {"-1+2", false}, {"=1", false}, {"1e5", false},
	} {
		if got := plainNumber(c.in); got != c.want {
			t.Errorf("plainNumber(%q) = %v, want %v", c.in, got, c.want)
		}
	}
}

// sliceCursor is a Cursor over values, failing with err after them when err is set.
type sliceCursor[T any] struct {
	vals []T
	i    int
	err  error
}

func (c *sliceCursor[T]) Next() bool { c.i++; return c.i <= len(c.vals) }
func (c *sliceCursor[T]) Value() T   { return c.vals[c.i-1] }
func (c *sliceCursor[T]) Err() error {
	if c.i > len(c.vals) {
		return c.err
	}
	return nil
}
func (c *sliceCursor[T]) Close() {}

type item struct{ text, amount string }

var items = Table[item]{
	Columns: []Column{{Name: "text"}, {Name: "amount", Number: true}},
	Record:  func(v item, rec []string) { rec[0], rec[1] = v.text, v.amount },
}

func writeAll(t *testing.T, vals []item, err error) (out string, rows, flushes int, werr error) {
	t.Helper()
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	cur := &sliceCursor[item]{vals: vals, err: err}
	rows, werr = write(w, items, cur, cur.Next(), func() { flushes++ })
	_ = w.Flush()
	return buf.String(), rows, flushes, werr
}

func TestWriteQuotesGuardsAndKeepsNumbers(t *testing.T) {
	out, n, _, err := writeAll(t, []item{
		{`say "hi", then
leave`, "42.50"},
		{"=1+1", "-12.50"},
		{"-negative text", "=1+1"},
		{"Zürich, 東京", "0"},
	}, nil)
	if err != nil || n != 4 {
		t.Fatalf("write: %d rows, %v", n, err)
	}
	want := "text,amount\n" +
		"\"say \"\"hi\"\", then\nleave\",42.50\n" +
		"'=1+1,-12.50\n" +
		"'-negative text,'=1+1\n" +
		"\"Zürich, 東京\",0\n"
	if out != want {
		t.Fatalf("got\n%q\nwant\n%q", out, want)
	}
	// And a standard reader reads the cells back.
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(recs) != 5 || recs[1][0] != "say \"hi\", then\nleave" {
		t.Fatalf("read back: %q, %v", recs, err)
	}
}

func TestWriteFlushesAfterTheFirstRowAndAsItGoes(t *testing.T) {
	vals := make([]item, 2*flushEvery+1)
	for i := range vals {
		vals[i] = item{"x", "1"}
	}
	_, n, flushes, err := writeAll(t, vals, nil)
	// After row 1, rows 512 and 1024, and at the end.
	if err != nil || n != len(vals) || flushes != 4 {
		t.Fatalf("%d rows, %d flushes, %v; want %d rows, 4 flushes", n, flushes, err, len(vals))
	}
}

func TestWriteReportsAFailedCursorAfterItsRows(t *testing.T) {
	boom := errors.New("connection reset")
	out, n, _, err := writeAll(t, []item{{"a", "1"}, {"b", "2"}}, boom)
	if !errors.Is(err, boom) || n != 2 {
		t.Fatalf("%d rows, %v; want 2 rows and the cursor's error", n, err)
	}
	if lines := strings.Split(strings.TrimSpace(out), "\n"); !slices.Equal(lines, []string{"text,amount", "a,1", "b,2"}) {
		t.Fatalf("written before the failure: %q", lines)
	}
}
