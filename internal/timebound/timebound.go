// Package timebound is the range of times the platform takes from its clients: when a
// conversion occurred, the days a report or a list covers, a rate's day, a promotion's dates.
//
// One range for all of them, because they meet in the statistics store: ClickHouse's DateTime
// holds seconds since 1970 in 32 bits, so a time before 1970 or after 2106 wraps around and
// turns up on another day, in every report that reaches that day. Times before the first
// day of 2000 have no business in an affiliate platform's books either.
package timebound

import "time"

var (
	// Earliest is the first instant accepted.
	Earliest = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	// End is the first instant no longer accepted.
	End = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
)

// Message says what Contains checks, for an error that names the field.
const Message = "must be from 2000-01-01 to 2099-12-31 (UTC)"

// Contains reports whether t lies in [Earliest, End).
func Contains(t time.Time) bool {
	return !t.Before(Earliest) && t.Before(End)
}
