package ingest

import (
	"bytes"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/partnerstream/partnerstream/internal/events"
)

// scan decodes a click as the platform writes it, a flat object of strings, booleans and
// nulls, in one pass over its bytes, without fastjson's value tree and the visit of it. It reports false for anything else (numbers, nested values, escapes in keys, surrogate or malformed escapes, a value of the wrong type, malformed JSON),
// which parse then hands to fastjson: both read the same (FuzzClickParser), and fastjson's
// errors are the only ones. The strings go to the arena from start on, as parseTree's do.
func (cp *clickParser) scan(data []byte, r *clickRecord, start int) bool {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return false
	}
	if i = skipSpace(data, i+1); i < len(data) && data[i] == '}' {
		return skipSpace(data, i+1) == len(data)
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return false
		}
		end := bytes.IndexByte(data[i+1:], '"')
		if end < 0 {
			return false
		}
		key := data[i+1 : i+1+end]
		if bytes.IndexByte(key, '\\') >= 0 {
			return false
		}
		if i = skipSpace(data, i+end+2); i >= len(data) || data[i] != ':' {
			return false
		}
		if i = skipSpace(data, i+1); i >= len(data) {
			return false
		}
		field := clickKey(key)
		switch {
		case data[i] == '"':
			from := len(cp.arena)
			var ok bool
			if i, ok = cp.appendString(data, i+1); !ok {
				return false
			}
			switch takes[field] {
			case takeString, takeInput:
				r.spans[field] = span{uint32(from - start), uint32(len(cp.arena) - start)}
			case takeTime:
				if r.at.UnmarshalText(cp.arena[from:]) != nil {
					return false
				}
				cp.arena = cp.arena[:from]
			case takeBool:
				return false
			default: // a field statistics do not store
				cp.arena = cp.arena[:from]
			}
		case hasWord(data[i:], "null"):
			i += len("null") // leaves the field as it is, as encoding/json does
		case hasWord(data[i:], "true"), hasWord(data[i:], "false"):
			value := data[i] == 't'
			switch takes[field] {
			case takeBool:
				r.bools[field] = value
			case skip:
			default:
				return false
			}
			i += len("true")
			if !value {
				i++
			}
		default:
			return false
		}
		if i = skipSpace(data, i); i >= len(data) {
			return false
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case '}':
			return skipSpace(data, i+1) == len(data)
		default:
			return false
		}
	}
}

// appendString appends the JSON string that begins at data[i] (after its opening quote),
// unescaped, to the arena and returns where it ends (after its closing quote). Like fastjson,
// it takes control characters as they are.
func (cp *clickParser) appendString(data []byte, i int) (int, bool) {
	for {
		q := bytes.IndexByte(data[i:], '"')
		if q < 0 {
			return i, false
		}
		b := bytes.IndexByte(data[i:i+q], '\\')
		if b < 0 {
			cp.arena = append(cp.arena, data[i:i+q]...)
			return i + q + 1, true
		}
		cp.arena = append(cp.arena, data[i:i+b]...)
		if i += b; i+1 >= len(data) {
			return i, false
		}
		switch c := data[i+1]; c {
		case '"', '\\', '/':
			cp.arena = append(cp.arena, c)
		case 'b':
			cp.arena = append(cp.arena, '\b')
		case 'f':
			cp.arena = append(cp.arena, '\f')
		case 'n':
			cp.arena = append(cp.arena, '\n')
		case 'r':
			cp.arena = append(cp.arena, '\r')
		case 't':
			cp.arena = append(cp.arena, '\t')
		case 'u':
			r, ok := hex4(data[i+2:])
			if !ok || utf16.IsSurrogate(r) {
				return i, false
			}
			cp.arena = utf8.AppendRune(cp.arena, r)
			i += 4
		default:
			return i, false
		}
		i += 2
	}
}

// keyOther is what clickKey returns for a key that is no field ingest stores.
const keyOther = events.NumClickFields

// clickKey is the field whose key (events.ClickFields) is key, if ingest stores it, or
// keyOther. A switch rather than a map: hashing every key was a quarter of scan. It has no
// case for the fields ingest skips, and the sub-ids share one, because the
// compiler inlines it into scan only while it is small (an inlining cost of 80): past that it
// becomes a call per key, which BenchmarkDecodeClick shows. TestClickKeyKnowsEveryField holds
// it to the table.
func clickKey(key []byte) events.ClickField {
	switch string(key) {
	case "click_id":
		return events.FieldClickID
	case "visitor":
		return events.FieldVisitor
	case "occurred_at":
		return events.FieldOccurredAt
	case "link_id":
		return events.FieldLinkID
	case "program_id":
		return events.FieldProgramID
	case "affiliate_id":
		return events.FieldAffiliateID
	case "advertiser_id":
		return events.FieldAdvertiserID
	case "promotion_id":
		return events.FieldPromotionID
	case "sub1", "sub2", "sub3", "sub4", "sub5":
		return events.FieldSub1 + events.ClickField(key[3]-'1')
	case "ip":
		return events.FieldIP
	case "user_agent":
		return events.FieldUserAgent
	case "referrer":
		return events.FieldReferrer
	case "country":
		return events.FieldCountry
	case "is_bot":
		return events.FieldIsBot
	case "is_duplicate":
		return events.FieldIsDuplicate
	case "landing_url":
		return events.FieldLandingURL
	}
	return keyOther
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// hasWord reports whether b begins with the literal word.
func hasWord(b []byte, word string) bool {
	return len(b) >= len(word) && string(b[:len(word)]) == word
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}
