package httpapi

import (
	"regexp"
	"strings"
)

// FieldCodes are the codes of FieldError, in the order FieldCode tries them: a message that
// matches two rules (an URL "must be at most 2048 characters") takes the first.
//
// The domain validators (programs, links, conversions, rates, webhooks, postbacks, sign-in)
// answer with English sentences of a few fixed shapes; the codes name those shapes, so that
// the wording can improve without breaking a client that switches on the code, and a new
// validator message of a known shape gets its code without touching the API layer.
var FieldCodes = []struct {
	Code string
	re   *regexp.Regexp
}{
	{"required", regexp.MustCompile(`^is required|needs an? |^needs `)},
	{"unknown_currency", regexp.MustCompile(`ISO 4217|not an ISO 4217 currency code`)},
	{"too_many_decimals", regexp.MustCompile(`more than \d+ decimals`)},
	{"not_a_decimal", regexp.MustCompile(`not a decimal|must be a (non-negative )?decimal|decimal string`)},
	{"too_long", regexp.MustCompile(`must be at most \d+ (characters|bytes)`)},
	{"invalid_url", regexp.MustCompile(`(?i)\burl\b|must have a host|must not contain credentials|must be a path on this site`)},
	{"invalid_length", regexp.MustCompile(`^must be \d+ to \d+ characters`)},
	{"invalid_text", regexp.MustCompile(`control characters|valid UTF-8|letters, digits`)},
	{"invalid_email", regexp.MustCompile(`e-mail`)},
	{"invalid_id", regexp.MustCompile(`\bid\b.*\([a-z]+_\.\.\.\)|id starting with|\(clk_\.\.\.\)`)},
	{"invalid_date", regexp.MustCompile(`RFC 3339|a date`)},
	{"not_after", regexp.MustCompile(`^must be after|is after`)},
	{"not_positive", regexp.MustCompile(`greater than zero|more than 0|above 0`)},
	{"out_of_range", regexp.MustCompile(`^must be (between )?-?\d+ (to|and) \d+|whole number from`)},
	{"not_one_of", regexp.MustCompile(`^must be one of|^must be "?[a-z_]+"? or "?[a-z_]+"?$|^must be true or false$`)},
	{"must_differ", regexp.MustCompile(`^must differ`)},
	{"not_allowed", regexp.MustCompile(`not both|, not an? |cannot change|^a new program is`)},
}

// FieldCode is the stable code of a validator's message; "invalid" when it has no known
// shape.
func FieldCode(message string) string {
	m := strings.TrimSpace(message)
	for _, c := range FieldCodes {
		if c.re.MatchString(m) {
			return c.Code
		}
	}
	return "invalid"
}
