package page

import "testing"

func TestParse(t *testing.T) {
	cases := []struct {
		name, limit, cursor string
		want                Request
		err                 error
	}{
		{"no parameters give the default page", "", "", Request{Limit: DefaultLimit}, nil},
		{"a cursor round-trips to the id", "10", Cursor("co_abc"), Request{Limit: 10, Before: "co_abc"}, nil},
		{"limit zero is refused", "0", "", Request{}, ErrBadLimit},
		{"limit above 100 is refused", "101", "", Request{}, ErrBadLimit},
		{"a non-numeric limit is refused", "ten", "", Request{}, ErrBadLimit},
		{"a cursor that is not base64url is refused", "", "%%%", Request{}, ErrBadCursor},
		{"a cursor of invalid UTF-8 is refused", "", "garbage", Request{}, ErrBadCursor},
		{"a cursor of a lone 0xff is refused", "", "_w", Request{}, ErrBadCursor},
		{"a cursor holding NUL is refused", "", Cursor("cnv_\x00"), Request{}, ErrBadCursor},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Parse(c.limit, c.cursor)
			if err != c.err || got != c.want {
				t.Fatalf("Parse(%q, %q) = %+v, %v; want %+v, %v", c.limit, c.cursor, got, err, c.want, c.err)
			}
		})
	}
}

func TestCutGivesANextCursorOnlyWhenMoreRowsExist(t *testing.T) {
	id := func(s string) string { return s }
	rows, next := Cut([]string{"c", "b", "a"}, 2, id)
	if len(rows) != 2 || next != Cursor("b") {
		t.Fatalf("Cut = %v %q", rows, next)
	}
	rows, next = Cut([]string{"c", "b"}, 2, id)
	if len(rows) != 2 || next != "" {
		t.Fatalf("last page Cut = %v %q", rows, next)
	}
}
