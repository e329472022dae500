package page

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// Parse reads the limit and cursor of every list request: it accepts only limits within
// bounds, and a cursor it accepts names an id that Postgres can compare (valid UTF-8 without
// NUL) and that Cursor encodes back to a cursor it accepts.
func FuzzParse(f *testing.F) {
	for _, seed := range []struct{ limit, cursor string }{
		{"", ""}, {"50", ""}, {"0", ""}, {"101", ""}, {"-1", ""}, {"1e2", ""}, {"+5", ""},
		{"10", Cursor("cnv_01m814cmepabcdefghjkmnpqrs")}, {"", "%%%"}, {"", "AAAA="}, {"", "_-_-"},
		{"", "garbage"}, {"", "__8"}, {"", "_w"}, {"", Cursor("a\x00b")},
	} {
		f.Add(seed.limit, seed.cursor)
	}
	f.Fuzz(func(t *testing.T, limit, cursor string) {
		r, err := Parse(limit, cursor)
		if err != nil {
			return
		}
		if r.Limit < 1 || r.Limit > MaxLimit {
			t.Fatalf("Parse(%q, %q) accepted limit %d", limit, cursor, r.Limit)
		}
		if cursor == "" {
			if r.Before != "" {
				t.Fatalf("Parse without a cursor continues after %q", r.Before)
			}
			return
		}
		if !utf8.ValidString(r.Before) || strings.ContainsRune(r.Before, 0) {
			t.Fatalf("cursor %q names %q, which Postgres refuses as text", cursor, r.Before)
		}
		again, err := Parse("", Cursor(r.Before))
		if err != nil || again.Before != r.Before {
			t.Fatalf("cursor %q names %q, but Cursor(%q) reads back as %q, %v", cursor, r.Before, r.Before, again.Before, err)
		}
	})
}
