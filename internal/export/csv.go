// Package export writes lists as CSV files streamed to the client: each row is written as the
// store's cursor reads it, so a file of a million rows takes the memory of a few buffers and
// its first bytes leave at once. The layouts of the files (columns per list) are in
// layouts.go; docs/exports.md documents them for users.
package export

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"time"
)

// Cursor is rows read one at a time from a store (a Postgres or ClickHouse result set).
type Cursor[T any] interface {
	Next() bool
	Value() T
	Err() error
	Close()
}

// Column is one column of a file. A Number column holds amounts and counts the code formats
// itself; every other column may hold text a user typed and goes through Guard.
type Column struct {
	Name   string
	Number bool
}

// Table is the layout of one kind of file: its columns and how a value fills a record.
type Table[T any] struct {
	Columns []Column
	// Record fills rec (one cell per column) from v.
	Record func(v T, rec []string)
}

// Guard neutralises a cell that a spreadsheet would run as a formula: one starting with =, +,
// -, @, a tab or a carriage return gets a leading ' (the OWASP "CSV injection" rule), which
// spreadsheets show as text and do not print.
func Guard(s string) string {
	if s == "" {
		return s
	}
	switch s[0] {
	case '=', '+', '-', '@', '\t', '\r':
		return "'" + s
	}
	return s
}

// plainNumber reports whether s is an optional minus, digits and at most one point with
// digits after it: such a cell is a number to every spreadsheet, never a formula.
func plainNumber(s string) bool {
	if len(s) > 0 && s[0] == '-' {
		s = s[1:]
	}
	digits, point := 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits++
		case c == '.' && !point && digits > 0 && i < len(s)-1:
			point = true
		default:
			return false
		}
	}
	return digits > 0
}

// flushEvery is how many rows go out between two flushes after the first row, and
// flushInterval the longest a row read waits before the rows before it are pushed out: a
// fast query fills whole chunks, and a slow one's rows do not sit in a buffer (nor does the
// connection's write deadline, which each flush moves on, run out while rows trickle in).
const (
	flushEvery    = 512
	flushInterval = time.Second
)

// write writes the header and every row of cur to w (RFC 4180, as encoding/csv writes it),
// the row already read when first is true, then cur's further rows. It flushes w (pushes
// what is written to the client) after the first row, every flushEvery rows, before a row
// read flushInterval or more after the last flush, and at the end; beforeFlush runs before
// each flush. It returns the rows written.
func write[T any](w *bufio.Writer, t Table[T], cur Cursor[T], first bool, beforeFlush func()) (int, error) {
	cw := csv.NewWriter(w)
	rec := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		rec[i] = c.Name
	}
	if err := cw.Write(rec); err != nil {
		return 0, fmt.Errorf("write header: %w", err)
	}
	n, last := 0, time.Now()
	push := func() error {
		last = time.Now()
		beforeFlush()
		return flush(cw, w)
	}
	for ok := first; ok; ok = cur.Next() {
		clear(rec)
		t.Record(cur.Value(), rec)
		for i, c := range t.Columns {
			if !c.Number || !plainNumber(rec[i]) {
				rec[i] = Guard(rec[i])
			}
		}
		if n > 0 && time.Since(last) >= flushInterval {
			if err := push(); err != nil {
				return n, err
			}
		}
		if err := cw.Write(rec); err != nil {
			return n, fmt.Errorf("write row %d: %w", n+1, err)
		}
		n++
		if n == 1 || n%flushEvery == 0 {
			if err := push(); err != nil {
				return n, err
			}
		}
	}
	if err := cur.Err(); err != nil {
		return n, fmt.Errorf("read row %d: %w", n+1, err)
	}
	return n, push()
}

// flush pushes the CSV writer's buffer and w's to w's destination.
func flush(cw *csv.Writer, w *bufio.Writer) error {
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("send: %w", err)
	}
	return nil
}
