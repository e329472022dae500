package enrich

import (
	"net/url"
	"strings"

	"golang.org/x/net/publicsuffix"
)

// Referrer is where a visitor came from.
type Referrer struct {
	// Domain is the registrable domain of the referring page's host by the public suffix
	// list (news.bbc.co.uk -> bbc.co.uk, foo.blogspot.com -> foo.blogspot.com), its address
	// for a host that is one, empty when the referrer is no absolute http(s) URL.
	Domain string
}

var noReferrer = &Referrer{}

func (s *Session) referrer(ref string) *Referrer {
	if ref == "" {
		return noReferrer
	}
	if r, ok := s.referrers.get(ref); ok {
		return r
	}
	r := &Referrer{Domain: strings.Clone(registrableDomain(ref))} // no view of ref (cache.put)
	if r.Domain == "" {
		r = noReferrer
	}
	s.referrers.put(ref, r)
	return r
}

func registrableDomain(ref string) string {
	u, err := url.Parse(ref)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return ""
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if host == "" {
		return ""
	}
	if strings.Contains(host, ":") || isIPv4(host) { // an address has no registrable domain
		return host
	}
	d, err := publicsuffix.EffectiveTLDPlusOne(host)
	if err != nil { // the host is a public suffix itself (co.uk) or malformed
		return ""
	}
	return d
}

func isIPv4(host string) bool {
	for _, c := range host {
		if c != '.' && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}
