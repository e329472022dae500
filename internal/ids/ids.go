// Package ids makes the platform's identifiers: a type prefix and a UUIDv7 written in
// lowercase Crockford base32 (26 characters), e.g. "co_06f2d1x0k8m9q...". Fixed length and a
// big-endian timestamp first make ids sort by creation time as plain strings, which keeps
// cursor pagination a simple "id > cursor".
package ids

import (
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Prefixes of every aggregate (docs/architecture.md, "Identifiers").
const (
	Company     = "co"
	User        = "usr"
	APIKey      = "key"
	Program     = "prg"
	Promotion   = "prm"
	Partnership = "ptn"
	CouponCode  = "cpn"
	Link        = "lnk"
	Click       = "clk"
	Conversion  = "cnv"
	Commission  = "cms"
	Payout      = "pay"
	Event       = "evt"
	Delivery    = "msg"
	Webhook     = "wh"
	Invitation  = "inv"
)

// TestConversion is a brand's test conversion (docs/programs.md, "Onboarding").
const TestConversion = "tcv"

// Alphabet is lowercase Crockford base32 (no i, l, o, u), the alphabet of every id.
const Alphabet = "0123456789abcdefghjkmnpqrstvwxyz"

const alphabet = Alphabet

// digits maps each byte to its value in Alphabet, or to 0xff: decoding looks characters up
// here rather than searching the alphabet, on every click of the redirect.
var digits = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for i := 0; i < len(alphabet); i++ {
		t[alphabet[i]] = byte(i)
	}
	return t
}()

// Digit returns the value of b in Alphabet, or -1 when b is not in it.
func Digit(b byte) int {
	if v := digits[b]; v != 0xff {
		return int(v)
	}
	return -1
}

// encodedLen is the length of 128 bits in base32 (26 * 5 = 130 bits, the top 2 are zero).
const encodedLen = 26

// Ids are not secrets (keys and tokens take their randomness from crypto/rand directly), so
// the random bits may come from a buffered pool: one read of the system source serves many
// ids, which matters on the click redirect, where every request makes two.
func init() { uuid.EnableRandPool() }

// New returns a fresh time-sortable id with the prefix.
func New(prefix string) string {
	u := uuid.Must(uuid.NewV7())
	return prefix + "_" + encode(u)
}

// FromBytes writes the 128 bits of an id (what Bytes returns) with the prefix.
func FromBytes(prefix string, b [16]byte) string { return prefix + "_" + encode(b) }

// Bytes returns the 128 bits of an id with the prefix, for codecs that carry an id in less
// room than its text (the signed click id carries its link's).
func Bytes(prefix, s string) ([16]byte, bool) {
	var out [16]byte
	rest, ok := strings.CutPrefix(s, prefix+"_")
	if !ok || len(rest) != encodedLen {
		return out, false
	}
	var acc uint64
	var bits uint
	b := 15
	for i := encodedLen - 1; i >= 0; i-- {
		n := Digit(rest[i])
		if n < 0 || i == 0 && n > 3 { // the first character holds 2 bits above the 128: zero
			return [16]byte{}, false
		}
		acc |= uint64(n) << bits
		bits += 5
		for bits >= 8 {
			out[b] = byte(acc)
			b--
			acc >>= 8
			bits -= 8
		}
	}
	return out, true
}

func encode(u uuid.UUID) string {
	var out [encodedLen]byte
	// Walk the 128 bits from the least significant end, five at a time.
	var acc uint64
	var bits uint
	i := encodedLen - 1
	for b := 15; b >= 0; b-- {
		acc |= uint64(u[b]) << bits
		bits += 8
		for bits >= 5 {
			out[i] = alphabet[acc&31]
			i--
			acc >>= 5
			bits -= 5
		}
	}
	for ; i >= 0; i-- {
		out[i] = alphabet[acc&31]
		acc >>= 5
	}
	return string(out[:])
}

// Floor returns the id with the prefix that sorts after every id New made before t and not
// after any made at t or later (millisecond precision): "created before t" on an id column,
// which its primary-key index answers without an index on a time column.
func Floor(prefix string, t time.Time) string {
	var b [16]byte
	ms := uint64(t.UnixMilli())
	for i := 5; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	b[6] = 0x70 // the version nibble, so that Time reads Floor's ids too
	return FromBytes(prefix, b)
}

// Valid reports whether s is a well-formed id with the prefix. Handlers use it to refuse
// garbage with a 400 before touching a store.
func Valid(prefix, s string) bool {
	rest, ok := strings.CutPrefix(s, prefix+"_")
	if !ok || len(rest) != encodedLen {
		return false
	}
	for i := 0; i < len(rest); i++ {
		if Digit(rest[i]) < 0 {
			return false
		}
	}
	return true
}

// Check returns an error naming the field when s is not an id with the prefix.
func Check(field, prefix, s string) error {
	if !Valid(prefix, s) {
		return fmt.Errorf("%s must be an id starting with %q", field, prefix+"_")
	}
	return nil
}

// Time returns the creation time New wrote into an id (the UUIDv7 timestamp, millisecond
// precision), with any prefix. It is false for a string that is not such an id, so a caller
// can tell "made a moment ago" apart from garbage without a lookup.
func Time(id string) (time.Time, bool) {
	i := strings.LastIndexByte(id, '_')
	body := id[i+1:]
	if i < 1 || len(body) != encodedLen {
		return time.Time{}, false
	}
	var v [encodedLen]uint64
	for j := 0; j < encodedLen; j++ {
		n := Digit(body[j])
		if n < 0 {
			return time.Time{}, false
		}
		v[j] = uint64(n)
	}
	// The first character carries the two always-zero bits above the 128; characters 0..9
	// hold the top 50 bits, i.e. the 48-bit Unix milliseconds, and character 10 begins with
	// the version nibble, which must be 7.
	if v[0] > 3 || v[10]>>1 != 7 {
		return time.Time{}, false
	}
	var ms uint64
	for j := 0; j < 10; j++ {
		ms = ms<<5 | v[j]
	}
	return time.UnixMilli(int64(ms)).UTC(), true
}
