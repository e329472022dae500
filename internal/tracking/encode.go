package tracking

import (
	"time"
	"unicode/utf8"

	"github.com/partnerstream/partnerstream/internal/events"
)

// encodeClick appends the JSON of a click, as encoding/json would write events.Click (same
// field names, order and omitempty fields: events.ClickFields), without reflection: it runs
// on every redirect, where json.Marshal's reflection showed in the profile. Its keys are
// literals because the compiler copies a literal without a call; one read from the table cost
// a call per field. TestEncodeClickMatchesEncodingJSON encodes each field of the table alone,
// so a field missing here, or taken from another, fails it.
func encodeClick(dst []byte, c *events.Click) []byte {
	dst = append(dst, `{"click_id":`...)
	dst = appendJSONString(dst, c.ClickID)
	dst = appendOptional(dst, `,"visitor":`, c.Visitor)
	dst = append(dst, `,"occurred_at":"`...)
	dst = c.OccurredAt.AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, `","link_id":`...)
	dst = appendJSONString(dst, c.LinkID)
	dst = append(dst, `,"program_id":`...)
	dst = appendJSONString(dst, c.ProgramID)
	dst = append(dst, `,"affiliate_id":`...)
	dst = appendJSONString(dst, c.AffiliateID)
	dst = append(dst, `,"advertiser_id":`...)
	dst = appendJSONString(dst, c.AdvertiserID)
	dst = appendOptional(dst, `,"promotion_id":`, c.PromotionID)
	dst = appendOptional(dst, `,"sub1":`, c.Sub1)
	dst = appendOptional(dst, `,"sub2":`, c.Sub2)
	dst = appendOptional(dst, `,"sub3":`, c.Sub3)
	dst = appendOptional(dst, `,"sub4":`, c.Sub4)
	dst = appendOptional(dst, `,"sub5":`, c.Sub5)
	dst = append(dst, `,"ip":`...)
	dst = appendJSONString(dst, c.IP)
	dst = append(dst, `,"user_agent":`...)
	dst = appendJSONString(dst, c.UserAgent)
	dst = appendOptional(dst, `,"referrer":`, c.Referrer)
	dst = appendOptional(dst, `,"country":`, c.Country)
	dst = append(dst, `,"is_bot":`...)
	dst = appendBool(dst, c.IsBot)
	dst = append(dst, `,"is_duplicate":`...)
	dst = appendBool(dst, c.IsDuplicate)
	dst = append(dst, `,"landing_url":`...)
	dst = appendJSONString(dst, c.LandingURL)
	return append(dst, '}')
}

func appendOptional(dst []byte, key, v string) []byte {
	if v == "" {
		return dst
	}
	return appendJSONString(append(dst, key...), v)
}

func appendBool(dst []byte, b bool) []byte {
	if b {
		return append(dst, "true"...)
	}
	return append(dst, "false"...)
}

const hexDigits = "0123456789abcdef"

// plainASCII marks the bytes appendJSONString copies as they are, so its loop is one table
// load per byte.
var plainASCII = func() (t [256]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = b != '"' && b != '\\' && b != '<' && b != '>' && b != '&'
	}
	return t
}()

// appendJSONString quotes s the way encoding/json does: control characters, quotes,
// backslashes, <, > and &, and U+2028/U+2029 escaped; invalid UTF-8 replaced by U+FFFD.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		// Eight plain bytes at a time: user agents, referrers and landing URLs are long runs
		// of them.
		if i+8 <= len(s) && !special8(load8(s, i)) {
			i += 8
			continue
		}
		b := s[i]
		if plainASCII[b] {
			i++
			continue
		}
		if b < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// Bit tricks on eight bytes in one word (Sean Anderson's "Bit Twiddling Hacks"): hasLess is
// non-zero when some byte is below n (n <= 128), hasByte when some byte equals b.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

func hasLess(x uint64, n byte) uint64 { return (x - ones*uint64(n)) & ^x & highs }

func hasByte(x uint64, b byte) uint64 { return hasLess(x^(ones*uint64(b)), 1) }

// special8 reports whether any of the eight bytes in x is one plainASCII does not mark.
func special8(x uint64) bool {
	return hasLess(x, 0x20)|x&highs|hasByte(x, '"')|hasByte(x, '\\')|hasByte(x, '<')|hasByte(x, '>')|hasByte(x, '&') != 0
}

// load8 reads s[i:i+8] as a little-endian word (the compiler makes it one load).
func load8(s string, i int) uint64 {
	_ = s[i+7]
	return uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
		uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
}
