package programs

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/partnerstream/partnerstream/internal/money"
)

// Commission rule types.
const (
	Fixed   = "fixed"
	Percent = "percent"
)

// Rule is a commission rule in storage units.
type Rule struct {
	Type string // Fixed or Percent
	// Value is minor units of Currency per conversion (Fixed) or basis points of the sale
	// amount (Percent: 1250 = 12.50 %).
	Value int64
	// Currency is the program's, in which a Fixed amount is written.
	Currency string
	// Recurring says how long a bound customer's later conversions earn; nil: only the
	// customer's first conversion earns.
	Recurring *Recurring
}

// MaxRecurringMonths bounds a recurring rule of a number of months.
const MaxRecurringMonths = 120

// Recurring is the recurring part of a rule: Months after the customer's first conversion,
// or for the customer's lifetime.
type Recurring struct {
	Months   int  `json:"months,omitempty"`
	Lifetime bool `json:"lifetime,omitempty"`
}

// Columns returns the recurring part as the recurring_months and recurring_lifetime columns.
func (r *Recurring) Columns() (*int, bool) {
	if r == nil {
		return nil, false
	}
	if r.Lifetime {
		return nil, true
	}
	m := r.Months
	return &m, false
}

// RecurringFrom reads the recurring_months and recurring_lifetime columns; nil for neither.
func RecurringFrom(months *int, lifetime bool) *Recurring {
	switch {
	case lifetime:
		return &Recurring{Lifetime: true}
	case months != nil:
		return &Recurring{Months: *months}
	}
	return nil
}

// RuleInput is a rule as clients write it: {"type":"fixed","amount":"5.00"} in the program's
// currency, or {"type":"percent","percent":"12.5"} (0 < percent <= 100, two decimals at most).
type RuleInput struct {
	Type      string     `json:"type"`
	Amount    string     `json:"amount,omitempty"`
	Percent   string     `json:"percent,omitempty"`
	Recurring *Recurring `json:"recurring,omitempty"`
}

// ruleJSON is how a rule is shown: the amount with its currency, or the percent with two
// decimals.
type ruleJSON struct {
	Type      string     `json:"type"`
	Amount    string     `json:"amount,omitempty"`
	Currency  string     `json:"currency,omitempty"`
	Percent   string     `json:"percent,omitempty"`
	Recurring *Recurring `json:"recurring,omitempty"`
}

// MarshalJSON writes the rule with decimal strings.
func (r Rule) MarshalJSON() ([]byte, error) {
	in := r.Input()
	out := ruleJSON{Type: in.Type, Amount: in.Amount, Percent: in.Percent, Recurring: r.Recurring}
	if r.Type == Fixed {
		out.Currency = r.Currency
	}
	return json.Marshal(out)
}

// Input is the rule in the form clients write it.
func (r Rule) Input() RuleInput {
	if r.Type == Percent {
		return RuleInput{Type: Percent, Percent: formatBasisPoints(r.Value), Recurring: r.Recurring}
	}
	return RuleInput{Type: Fixed, Amount: money.Format(r.Value, r.Currency), Recurring: r.Recurring}
}

// parseRecurring checks the recurring part: {"months": 1..120} or {"lifetime": true}.
func parseRecurring(r *Recurring, field string) []FieldError {
	switch {
	case r == nil:
		return nil
	case r.Lifetime && r.Months != 0:
		return []FieldError{{Field: field + ".recurring", Message: `is either {"months": n} or {"lifetime": true}, not both`}}
	case !r.Lifetime && (r.Months < 1 || r.Months > MaxRecurringMonths):
		return []FieldError{{Field: field + ".recurring.months", Message: fmt.Sprintf("must be 1 to %d, or use {\"lifetime\": true}", MaxRecurringMonths)}}
	}
	return nil
}

// parseRule validates a rule for a program in currency; field prefixes its errors.
func parseRule(in RuleInput, currency, field string) (Rule, []FieldError) {
	r, errs := parseAmount(in, currency, field)
	if errs := parseRecurring(in.Recurring, field); errs != nil {
		return Rule{}, errs
	}
	if in.Recurring != nil {
		rec := *in.Recurring
		r.Recurring = &rec
	}
	return r, errs
}

// parseAmount validates the type and amount (or percent) of a rule.
func parseAmount(in RuleInput, currency, field string) (Rule, []FieldError) {
	fail := func(sub, msg string) (Rule, []FieldError) {
		return Rule{}, []FieldError{{Field: field + sub, Message: msg}}
	}
	switch in.Type {
	case Fixed:
		if in.Percent != "" {
			return fail(".percent", "a fixed rule has an amount, not a percent")
		}
		if in.Amount == "" {
			return fail(".amount", "a fixed rule needs an amount, as a decimal string in the program currency")
		}
		if !money.ValidCurrency(currency) {
			// The currency field reports the problem; the amount cannot be read without it.
			return Rule{}, nil
		}
		v, err := money.Parse(in.Amount, currency)
		if err != nil {
			return fail(".amount", err.Error())
		}
		if v == 0 {
			return fail(".amount", "must be greater than zero")
		}
		return Rule{Type: Fixed, Value: v, Currency: currency}, nil
	case Percent:
		if in.Amount != "" {
			return fail(".amount", "a percent rule has a percent, not an amount")
		}
		bps, err := parseBasisPoints(in.Percent)
		if err != nil {
			return fail(".percent", err.Error())
		}
		return Rule{Type: Percent, Value: bps, Currency: currency}, nil
	default:
		return fail(".type", `must be "fixed" or "percent"`)
	}
}

var errPercent = errors.New("must be a decimal string greater than 0 and at most 100, with at most 2 decimals")

// parseBasisPoints reads "12.5" as 1250 basis points. More than two decimals is an error,
// never a rounding.
func parseBasisPoints(s string) (int64, error) {
	whole, frac, hasDot := strings.Cut(s, ".")
	if whole == "" || len(whole) > 3 || len(frac) > 2 || (hasDot && frac == "") || !isDigits(whole) || !isDigits(frac) {
		return 0, fmt.Errorf("%q: %w", s, errPercent)
	}
	frac += strings.Repeat("0", 2-len(frac))
	bps, _ := strconv.ParseInt(whole+frac, 10, 64) // at most 5 digits, checked above
	if bps <= 0 || bps > 10000 {
		return 0, fmt.Errorf("%q: %w", s, errPercent)
	}
	return bps, nil
}

func formatBasisPoints(bps int64) string {
	return fmt.Sprintf("%d.%02d", bps/100, bps%100)
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
