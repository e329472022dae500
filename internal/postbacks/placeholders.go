package postbacks

import (
	"encoding/json"
	"net/url"
	"strings"

	"github.com/partnerstream/partnerstream/internal/events"
)

// placeholders are what a postback URL may name in braces, each filled from the event it
// delivers, as networks such as Everflow and TUNE offer: a receiver that reads its values from
// the query needs no JSON parser.
var placeholders = map[string]func(d *events.ConversionData) string{
	"click_id":      func(d *events.ConversionData) string { return d.ClickID },
	"sub1":          func(d *events.ConversionData) string { return d.Sub1 },
	"amount":        func(d *events.ConversionData) string { return d.Amount },
	"commission":    func(d *events.ConversionData) string { return d.CommissionAmount },
	"currency":      func(d *events.ConversionData) string { return d.Currency },
	"status":        func(d *events.ConversionData) string { return d.Status },
	"conversion_id": func(d *events.ConversionData) string { return d.ID },
	"external_id":   func(d *events.ConversionData) string { return d.ExternalID },
	"program_id":    func(d *events.ConversionData) string { return d.ProgramID },
	"affiliate_id":  func(d *events.ConversionData) string { return d.AffiliateID },
	// reason_codes are the fraud rules that fired, comma-separated (docs/fraud.md).
	"reason_codes": func(d *events.ConversionData) string { return strings.Join(d.Risk.ReasonCodes(), ",") },
	// country and device are the click's, once the click loop knows it (docs/fraud.md).
	"country": func(d *events.ConversionData) string { return d.Country },
	"device":  func(d *events.ConversionData) string { return d.DeviceType },
}

// Placeholders lists the names a postback URL may use, in the order the docs give them.
var Placeholders = []string{"click_id", "sub1", "amount", "commission", "currency", "status", "conversion_id",
	"external_id", "program_id", "affiliate_id", "reason_codes", "country", "device"}

// checkPlaceholders refuses braces that are not a known placeholder, and placeholders outside
// the path and query: a value must never choose the host a postback goes to.
func checkPlaceholders(u *url.URL, raw string) error {
	invalid := func(msg string) error { return &ValidationError{Field: "url", Message: msg} }
	if strings.ContainsAny(u.Host, "{}") {
		return invalid("url placeholders may stand in the path or the query, not in the host")
	}
	for rest := raw; ; {
		open := strings.IndexAny(rest, "{}")
		if open < 0 {
			return nil
		}
		end := strings.IndexByte(rest[open:], '}')
		if rest[open] == '}' || end < 0 {
			return invalid("url has an unmatched brace; placeholders are {name}, one of " + strings.Join(Placeholders, ", "))
		}
		name := rest[open+1 : open+end]
		if _, ok := placeholders[name]; !ok {
			return invalid("url has an unknown placeholder {" + name + "}; known: " + strings.Join(Placeholders, ", "))
		}
		rest = rest[open+end+1:]
	}
}

// ExpandURL fills the placeholders of a postback URL from the body of a delivery (the webhook
// body of a commission.status_changed event). Values are percent-encoded so that they stay one
// value wherever they stand; a value the event lacks is empty. A URL without placeholders, or
// a body that is not a conversion's, comes back as it is.
func ExpandURL(raw string, body []byte) string {
	if !strings.Contains(raw, "{") {
		return raw
	}
	var b struct {
		Data events.ConversionData `json:"data"`
	}
	if json.Unmarshal(body, &b) != nil {
		return raw
	}
	pairs := make([]string, 0, 2*len(placeholders))
	for name, value := range placeholders {
		// QueryEscape writes a space as "+", which only a query reads as one.
		pairs = append(pairs, "{"+name+"}", strings.ReplaceAll(url.QueryEscape(value(&b.Data)), "+", "%20"))
	}
	return strings.NewReplacer(pairs...).Replace(raw)
}
