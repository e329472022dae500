package programs

import (
	"net/url"
	"strings"
	"time"

	"github.com/partnerstream/partnerstream/internal/freetext"
	"github.com/partnerstream/partnerstream/internal/ids"
)

// MaxURLLength bounds landing URLs.
const MaxURLLength = 2048

// validator collects field errors so that one response lists them all.
type validator struct{ errs []FieldError }

func (v *validator) add(field, msg string) {
	v.errs = append(v.errs, FieldError{Field: field, Message: msg})
}

func (v *validator) check(ok bool, field, msg string) {
	if !ok {
		v.add(field, msg)
	}
}

func (v *validator) err() error {
	if len(v.errs) == 0 {
		return nil
	}
	return &ValidationError{Fields: v.errs}
}

// text checks a trimmed free-text field of min..max characters (freetext.Check).
func (v *validator) text(field, s string, min, max int, multiline bool) {
	if msg := freetext.Check(s, min, max, multiline); msg != "" {
		v.add(field, msg)
	}
}

// landingURL checks an absolute http(s) URL with a host and no credentials, at most
// MaxURLLength bytes. Other schemes (javascript:, data:, ftp:) would let a tracking link send
// visitors anywhere the browser goes.
func (v *validator) landingURL(field, s string) {
	if len(s) > MaxURLLength {
		v.add(field, "must be at most 2048 bytes")
		return
	}
	u, err := url.Parse(s)
	switch {
	case err != nil || strings.ContainsAny(s, " \t\r\n") || s != strings.TrimSpace(s):
		v.add(field, "must be a valid absolute URL")
	case u.Scheme != "http" && u.Scheme != "https":
		v.add(field, "must be an http or https URL")
	case u.Host == "" || u.Hostname() == "":
		v.add(field, "must have a host")
	case u.User != nil:
		v.add(field, "must not contain credentials")
	}
}

// id checks a well-formed id (a malformed one is bad input, not an unknown record).
func (v *validator) id(field, prefix, s string) {
	if err := ids.Check(field, prefix, s); err != nil {
		v.add(field, "must be an id starting with "+prefix+"_")
	}
}

// oneOf checks an enumerated value.
func (v *validator) oneOf(field, s string, allowed ...string) {
	for _, a := range allowed {
		if s == a {
			return
		}
	}
	v.add(field, "must be one of "+strings.Join(allowed, ", "))
}

// timestamp parses an optional RFC 3339 time; "" is none.
func (v *validator) timestamp(field string, s *string) *time.Time {
	if s == nil || *s == "" {
		return nil
	}
	t, err := time.Parse(time.RFC3339, *s)
	if err != nil {
		v.add(field, "must be an RFC 3339 timestamp, e.g. 2026-01-31T00:00:00Z")
		return nil
	}
	t = t.UTC()
	return &t
}

// optional turns "" into nil, so that an empty string clears an optional field like null.
func optional(s *string) *string {
	if s == nil || *s == "" {
		return nil
	}
	return s
}
