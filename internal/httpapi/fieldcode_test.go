package httpapi_test

import (
	"testing"

	"github.com/partnerstream/partnerstream/internal/httpapi"
)

// The validators' messages, as they are written in the domain packages, get the code that the
// dashboard translates; a message reworded out of its shape fails here rather than reaching a
// user as the bare "invalid".
func TestFieldCodesOfTheValidatorsMessages(t *testing.T) {
	for msg, want := range map[string]string{
		"is required": "required",
		"is required: the order id, unique per program":                                    "required",
		"a fixed rule needs an amount, as a decimal string in the program currency":        "required",
		`"abc": not a decimal amount`:                                                      "not_a_decimal",
		`"1.234" has more than 2 decimals for EUR: not a decimal amount`:                   "too_many_decimals",
		"must be a non-negative decimal with at most 2 decimals for EUR":                   "not_a_decimal",
		"must be a decimal string greater than 0 and at most 100, with at most 2 decimals": "not_a_decimal",
		`"EURO": not an ISO 4217 currency code`:                                            "unknown_currency",
		"must be an ISO 4217 currency code in upper case, e.g. EUR":                        "unknown_currency",
		"must be a valid absolute URL":                                                     "invalid_url",
		"must be an http or https URL":                                                     "invalid_url",
		"must have a host":                                                                 "invalid_url",
		"url must be at most 2048 characters":                                              "too_long",
		"must be at most 2048 bytes":                                                       "too_long",
		"must be at most 200 characters":                                                   "too_long",
		"must be 1 to 200 characters":                                                      "invalid_length",
		"must not contain control characters":                                              "invalid_text",
		"must be 1 to 64 letters, digits, '_' or '-'":                                      "invalid_text",
		"must be a valid e-mail address":                                                   "invalid_email",
		"must be a program id (prg_...)":                                                   "invalid_id",
		"must be an id starting with co_":                                                  "invalid_id",
		"must be the click id (clk_...) passed to the landing page":                        "invalid_id",
		"must be a date such as 2026-03-14":                                                "invalid_date",
		"must be an RFC 3339 timestamp, e.g. 2026-01-31T00:00:00Z":                         "invalid_date",
		"must be after starts_at":                                                          "not_after",
		"must be greater than zero":                                                        "not_positive",
		"must be 0 to 365":                                                                 "out_of_range",
		`must be 1 to 120, or use {"lifetime": true}`:                                      "out_of_range",
		"must be between 0 and 604800 (7 days)":                                            "out_of_range",
		"must be one of pending, approved":                                                 "not_one_of",
		`must be "fixed" or "percent"`:                                                     "not_one_of",
		"must be en or es":                                                                 "not_one_of",
		"must differ from base":                                                            "must_differ",
		"a fixed rule has an amount, not a percent":                                        "not_allowed",
		"cannot change once the program exists":                                            "not_allowed",
		"something no validator says":                                                      "invalid",
	} {
		if got := httpapi.FieldCode(msg); got != want {
			t.Errorf("FieldCode(%q) = %q, want %q", msg, got, want)
		}
	}
}

// Invalid fills in the code of each field from its message, and keeps one a validator gave.
func TestInvalidCarriesACodePerField(t *testing.T) {
	p := httpapi.Invalid(httpapi.FieldError{Field: "currency", Message: `"EURO": not an ISO 4217 currency code`},
		httpapi.FieldError{Field: "name", Code: "taken", Message: "is taken"})
	errs := p.Extra["errors"].([]httpapi.FieldError)
	if errs[0].Code != "unknown_currency" || errs[1].Code != "taken" {
		t.Fatalf("codes %+v", errs)
	}
}
