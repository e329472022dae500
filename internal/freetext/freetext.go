// Package freetext is the one rule for text people type (names, descriptions, messages) and
// text that arrives from visitors (a click's sub-ids): valid UTF-8 without control characters.
// Control characters are refused because the text ends up in CSV exports, logs and other
// people's screens, where a CR/LF or an escape sequence forges lines or rewrites the display.
package freetext

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Check returns why s is not free text of min..max characters, or "" when it is. Multi-line
// fields may hold newlines and tabs. Callers trim s first when spaces at the ends do not
// matter.
func Check(s string, min, max int, multiline bool) string {
	n := utf8.RuneCountInString(s)
	switch {
	case !utf8.ValidString(s):
		return "must be valid UTF-8"
	case n < min || n > max:
		if min > 0 {
			return "must be " + strconv.Itoa(min) + " to " + strconv.Itoa(max) + " characters"
		}
		return "must be at most " + strconv.Itoa(max) + " characters"
	case strings.IndexFunc(s, func(r rune) bool { return forbidden(r, multiline) }) >= 0:
		return "must not contain control characters"
	}
	return ""
}

// Clean makes text that nobody validated (a click's query string) single-line free text: it
// drops control characters and replaces invalid UTF-8 with U+FFFD. Clean text is returned as
// it is, without allocating.
func Clean(s string) string {
	clean := true
	for i := 0; i < len(s); i++ {
		if b := s[i]; b < 0x20 || b >= 0x7f {
			clean = false // a control character, or non-ASCII that needs a closer look
			break
		}
	}
	if clean {
		return s
	}
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if strings.IndexFunc(s, func(r rune) bool { return forbidden(r, false) }) < 0 {
		return s
	}
	return strings.Map(func(r rune) rune {
		if forbidden(r, false) {
			return -1
		}
		return r
	}, s)
}

func forbidden(r rune, multiline bool) bool {
	return unicode.IsControl(r) && !(multiline && (r == '\n' || r == '\r' || r == '\t'))
}
