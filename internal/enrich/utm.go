package enrich

import (
	"net/url"
	"strings"
)

// UTM is the campaign a landing URL names with Google's utm_ parameters.
type UTM struct {
	Source, Medium, Campaign string
}

var noUTM = &UTM{}

// utmValueMax bounds each stored value: a landing URL is the brand's, but its query can be
// anything, and the values are grouped by in statistics.
const utmValueMax = 256

func (s *Session) utm(landing string) *UTM {
	if landing == "" {
		return noUTM
	}
	if u, ok := s.utms.get(landing); ok {
		return u
	}
	u := parseUTM(landing)
	s.utms.put(landing, u)
	return u
}

func parseUTM(landing string) *UTM {
	u, err := url.Parse(landing)
	if err != nil || u.RawQuery == "" {
		return noUTM
	}
	// ParseQuery keeps the pairs it could read when a later one is malformed.
	q, _ := url.ParseQuery(u.RawQuery)
	utm := &UTM{Source: cut(q.Get("utm_source")), Medium: cut(q.Get("utm_medium")), Campaign: cut(q.Get("utm_campaign"))}
	if *utm == (UTM{}) {
		return noUTM
	}
	return utm
}

func cut(s string) string {
	if len(s) > utmValueMax {
		return strings.ToValidUTF8(s[:utmValueMax], "") // no rune cut in half
	}
	return s
}
