package fraud

import (
	"strconv"
	"time"
)

// Facts are what the registration-stage rules decide from. The caller (conversions) reads
// the ones that need Postgres only when a rule that needs them is Active.
type Facts struct {
	// ClickedAt is the click's time from the signed click id; zero for a conversion without a
	// click (the time rules do not apply).
	ClickedAt  time.Time
	OccurredAt time.Time
	// Email is the customer's normalised e-mail; nil when the conversion named none.
	Email *Email
	// SelfReferral is what MatchAffiliate found ("" nothing).
	SelfReferral string
	// DuplicateOrder and DuplicateCustomer are the earlier conversion of another affiliate with
	// the same order id, or the same customer ("" none).
	DuplicateOrder    string
	DuplicateCustomer string
}

// Decide runs the registration-stage rules on f and returns the findings, at now.
func Decide(s Settings, exempt []string, f Facts, now time.Time) []Finding {
	var out []Finding
	fire := func(code, observed string) {
		st := s[code]
		out = append(out, Finding{Code: code, Action: st.Action, Shadow: st.Shadow, Observed: observed,
			Stage: StageRegistration, DecidedAt: now})
	}
	if !f.ClickedAt.IsZero() {
		// Whole seconds, as the click id keeps the click time and an advertiser sends times.
		elapsed := int64(f.OccurredAt.Sub(f.ClickedAt.Truncate(time.Second)) / time.Second)
		if s.Active(ConversionTooFast, exempt) && elapsed < s[ConversionTooFast].Seconds["min_seconds"] {
			fire(ConversionTooFast, strconv.FormatInt(elapsed, 10)+"s")
		}
		if s.Active(ConversionTooSlow, exempt) && elapsed > s[ConversionTooSlow].Seconds["max_seconds"] {
			fire(ConversionTooSlow, strconv.FormatInt(elapsed, 10)+"s")
		}
	}
	if f.Email != nil {
		if s.Active(SelfReferral, exempt) && f.SelfReferral != "" {
			fire(SelfReferral, f.SelfReferral)
		}
		if s.Active(DisposableEmail, exempt) && Disposable(f.Email.Domain, s[DisposableEmail].Domains["extra_domains"]) {
			fire(DisposableEmail, f.Email.Domain)
		}
	}
	if s.Active(DuplicateOrder, exempt) && f.DuplicateOrder != "" {
		fire(DuplicateOrder, f.DuplicateOrder)
	}
	if s.Active(DuplicateCustomer, exempt) && f.DuplicateCustomer != "" {
		fire(DuplicateCustomer, f.DuplicateCustomer)
	}
	return out
}
