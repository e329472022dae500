package enrich

import (
	"net/url"
	"strings"
)

// UTM is the campaign a landing URL names with Google's utm_ parameters, and the paid-ads
// click ids it carries.
type UTM struct {
	Source, Medium, Campaign string
	// PaidAds lists the PaidAdsParams the landing URL carried, comma-separated, in that
	// order ("" none): an ad network added them, so the affiliate bought the click.
	PaidAds string
}

// PaidAdsParams are the landing-URL parameters that paid-ads networks add to a click they
// sold (Google, Meta, Microsoft, TikTok, LinkedIn, X, Pinterest, Snap, Reddit, Yandex). The
// fraud rule paid_ads_click fires on those a program does not allow (docs/fraud.md).
var PaidAdsParams = []string{"gclid", "gbraid", "wbraid", "gad_source", "dclid", "fbclid", "msclkid", "ttclid",
	"li_fat_id", "twclid", "epik", "sccid", "rdt_cid", "yclid"}

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
	// Copies: no views of landing (cache.put).
	utm := &UTM{Source: strings.Clone(cut(q.Get("utm_source"))), Medium: strings.Clone(cut(q.Get("utm_medium"))),
		Campaign: strings.Clone(cut(q.Get("utm_campaign")))}
	var paid []string
	for _, p := range PaidAdsParams {
		if q.Has(p) || p == "sccid" && q.Has("ScCid") {
			paid = append(paid, p)
		}
	}
	utm.PaidAds = strings.Join(paid, ",")
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
