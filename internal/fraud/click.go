package fraud

import (
	"slices"
	"strconv"
	"strings"
	"time"
)

// Click are the facts the click-stage rules decide from: the conversion's click as ingest
// stored it in ClickHouse's clicks (docs/tracking.md, "Where clicks come from"), and the
// count click_velocity needs. Registration and its late-click loop fill it from the click's
// row (ClickStore); a backtest may fill it from any rows of clicks it reads. The zero value
// of a field means unknown, and a rule whose fact is unknown does not fire.
type Click struct {
	ID     string
	LinkID string
	At     time.Time // the click's time
	// Country is the ISO 3166-1 alpha-2 code of the click's address ("" unknown).
	Country string
	ASN     uint32
	// Hosting: the address is in a data-centre, cloud or VPN network (enrich's hosting list).
	Hosting bool
	// DeviceType is desktop, mobile, tablet, bot or other; Browser and OS are families.
	DeviceType, Browser, OS string
	// ReferrerDomain is the registrable domain of the click's referrer ("" none).
	ReferrerDomain                    string
	UTMSource, UTMMedium, UTMCampaign string
	// PaidAds are the PaidAdsParams the landing URL carried, in that order.
	PaidAds []string
	// RecentClicks counts the clicks on the same link from the same visitor or the same
	// (stored) address in click_velocity's window_seconds up to this click, this one
	// included; 0 when not counted.
	RecentClicks int
}

// Conversion are the conversion's facts the custom rule reads (the other click-stage rules
// read none).
type Conversion struct {
	ProgramID, AffiliateID string
	Type                   string
	// Amount in minor units of Currency (the program's).
	Amount     int64
	Currency   string
	OccurredAt time.Time
}

// DecideClick runs the click-stage rules on the click k of conversion c and returns the
// findings, at now. It is pure: it reads nothing but its arguments (the custom rule's
// compiled program comes from a cache keyed by the expression).
func DecideClick(s Settings, exempt []string, k Click, c Conversion, now time.Time) []Finding {
	var out []Finding
	fire := func(code, observed string) {
		st := s[code]
		out = append(out, Finding{Code: code, Action: st.Action, Shadow: st.Shadow, Observed: observed,
			Stage: StageClick, DecidedAt: now})
	}
	if s.Active(HostingNetwork, exempt) && k.Hosting {
		observed := "hosting"
		if k.ASN != 0 {
			observed = "AS" + strconv.FormatUint(uint64(k.ASN), 10)
		}
		fire(HostingNetwork, observed)
	}
	if s.Active(CountryNotAllowed, exempt) && k.Country != "" {
		if allowed := s[CountryNotAllowed].Lists["countries"]; len(allowed) > 0 && !slices.Contains(allowed, k.Country) {
			fire(CountryNotAllowed, k.Country)
		}
	}
	if s.Active(ClickVelocity, exempt) && int64(k.RecentClicks) > s[ClickVelocity].Seconds["max_clicks"] {
		fire(ClickVelocity, strconv.Itoa(k.RecentClicks))
	}
	if s.Active(PaidAdsClick, exempt) {
		allowed := s[PaidAdsClick].Lists["allowed"]
		var seen []string
		for _, p := range k.PaidAds {
			if !slices.Contains(allowed, p) {
				seen = append(seen, p)
			}
		}
		if seen != nil {
			fire(PaidAdsClick, strings.Join(seen, ","))
		}
	}
	if s.Active(BannedReferrer, exempt) && k.ReferrerDomain != "" && MatchesPattern(k.ReferrerDomain, s[BannedReferrer].Lists["patterns"]) {
		fire(BannedReferrer, k.ReferrerDomain)
	}
	if s.Active(CustomRule, exempt) {
		if expr := s[CustomRule].Text[paramExpression]; expr != "" && evalRule(expr, k, c) {
			fire(CustomRule, "true")
		}
	}
	return out
}

// MatchesPattern reports whether domain matches one of patterns: "example.com" matches that
// domain alone, "*.example.com" it and every domain under it.
func MatchesPattern(domain string, patterns []string) bool {
	for _, p := range patterns {
		if base, ok := strings.CutPrefix(p, "*."); ok {
			if domain == base || strings.HasSuffix(domain, "."+base) {
				return true
			}
		} else if domain == p {
			return true
		}
	}
	return false
}

// ClickRulesActive reports whether any click-stage rule runs for a partnership: when none
// does, the click need not be read for the rules.
func ClickRulesActive(s Settings, exempt []string) bool {
	for _, r := range Catalogue {
		if r.Stage == StageClick && s.Active(r.Code, exempt) {
			return true
		}
	}
	return false
}

// ruleColumns are the columns of ClickHouse's clicks each click-stage rule decides from,
// besides click_id and occurred_at (click_velocity counts by link, address and visitor);
// custom_rule reads every fact of Click (Context), so every column.
var ruleColumns = map[string][]string{
	HostingNetwork:    {"hosting", "asn"},
	CountryNotAllowed: {"country"},
	ClickVelocity:     {"link_id", "ip", "visitor"},
	PaidAdsClick:      {"paid_ads"},
	BannedReferrer:    {"referrer_domain"},
}

// ClickColumns reports which columns of clicks the click-stage rules that run for a
// partnership read: a reader that reads many clicks (a backtest) may leave the others
// empty, which the rules read as unknown.
func ClickColumns(s Settings, exempt []string) func(column string) bool {
	if s.Active(CustomRule, exempt) {
		return func(string) bool { return true }
	}
	read := map[string]bool{}
	for code, columns := range ruleColumns {
		if s.Active(code, exempt) {
			for _, c := range columns {
				read[c] = true
			}
		}
	}
	return func(c string) bool { return read[c] }
}
