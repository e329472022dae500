// Package page is the cursor pagination shared by every list: `limit` (1..100, default 50)
// and an opaque `cursor`; lists answer `next_cursor` (empty on the last page). Ids sort by
// creation time, so a cursor is simply the last id seen, newest first.
package page

import (
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"
)

const (
	// DefaultLimit is used when the request names none.
	DefaultLimit = 50
	// MaxLimit is the largest page.
	MaxLimit = 100
)

// Request is a parsed page request. Before is the id to continue after (exclusive, in
// newest-first order); empty for the first page.
type Request struct {
	Limit  int
	Before string
}

// ErrBadLimit and ErrBadCursor describe malformed page parameters.
var (
	ErrBadLimit  = errors.New("limit must be an integer between 1 and 100")
	ErrBadCursor = errors.New("cursor is not one this API returned")
)

// Parse reads the limit and cursor query values.
func Parse(limit, cursor string) (Request, error) {
	r := Request{Limit: DefaultLimit}
	if limit != "" {
		n, err := strconv.Atoi(limit)
		if err != nil || n < 1 || n > MaxLimit {
			return Request{}, ErrBadLimit
		}
		r.Limit = n
	}
	if cursor != "" {
		b, err := base64.RawURLEncoding.DecodeString(cursor)
		if err != nil || len(b) == 0 || len(b) > 64 || !storable(string(b)) {
			return Request{}, ErrBadCursor
		}
		r.Before = string(b)
	}
	return r, nil
}

// storable reports whether an id can be compared with the stored ones: Postgres refuses text
// that is not UTF-8 or holds NUL, and a store error would read as a 500 rather than a bad cursor.
func storable(id string) bool {
	return utf8.ValidString(id) && !strings.ContainsRune(id, 0)
}

// Cursor encodes the id to continue after.
func Cursor(lastID string) string {
	if lastID == "" {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString([]byte(lastID))
}

// Cut trims a result fetched with Limit+1 rows to the page and returns the next cursor.
func Cut[T any](rows []T, limit int, id func(T) string) ([]T, string) {
	if len(rows) <= limit {
		return rows, ""
	}
	rows = rows[:limit]
	return rows, Cursor(id(rows[len(rows)-1]))
}

// List is the JSON shape of every list response.
type List[T any] struct {
	Data       []T    `json:"data"`
	NextCursor string `json:"next_cursor"`
}
