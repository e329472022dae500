// Package fraud holds the fraud rules: their catalogue and reason codes, each program's
// settings of them (on or off, flag or hold, shadow, parameters) with the partnerships a rule
// is switched off for, and the decision of the rules that need nothing but the conversion and
// Postgres (docs/fraud.md). The conversions package asks for that decision inside the
// transaction that registers a conversion, and records what fired beside its commission.
//
// A rule decides at a stage: StageRegistration rules decide when the conversion is
// registered (Decide, over Facts); StageClick rules decide from the click as ingest stored it
// in ClickHouse (DecideClick, over Click: country, network, device, referrer, landing URL),
// in the registration's transaction when the click is there by then, or later once it is,
// adding verdicts to the commission. Both write the same verdict rows, so a commission's risk
// reads alike whichever stage found it.
package fraud

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/partnerstream/partnerstream/internal/enrich"
)

// Reason codes of the rules built so far (docs/fraud.md lists the later ones too).
const (
	ConversionTooFast = "conversion_too_fast"
	ConversionTooSlow = "conversion_too_slow"
	SelfReferral      = "self_referral"
	DisposableEmail   = "disposable_email"
	DuplicateOrder    = "duplicate_order"
	DuplicateCustomer = "duplicate_customer"

	HostingNetwork    = "hosting_network"
	CountryNotAllowed = "country_not_allowed"
	ClickVelocity     = "click_velocity"
	PaidAdsClick      = "paid_ads_click"
	BannedReferrer    = "banned_referrer"
	CustomRule        = "custom_rule"
)

// Actions of a rule that fired.
const (
	// ActionFlag shows the verdict and changes nothing else.
	ActionFlag = "flag"
	// ActionHold puts the commission on hold: never approved by the hold days, never paid,
	// until the advertiser releases or rejects it.
	ActionHold = "hold"
)

// Actions lists them.
var Actions = []string{ActionFlag, ActionHold}

// Stages at which rules decide.
const (
	StageRegistration = "registration"
	StageClick        = "click"
)

// Param kinds.
const (
	kindSeconds    = "seconds"
	kindCount      = "count"      // a whole number, kept with the seconds
	kindDomains    = "domains"    // domain names
	kindCountries  = "countries"  // ISO 3166-1 alpha-2 codes
	kindPatterns   = "patterns"   // domain names, or "*." and a domain for it and what is under it
	kindClickIDs   = "click_ids"  // names of PaidAdsParams
	kindExpression = "expression" // a CEL expression (cel.go)
)

// Param is a parameter a rule takes: a whole number (seconds or a count) in [Min, Max], a
// list of at most MaxItems entries, or an expression.
type Param struct {
	Name     string
	Kind     string
	Min, Max int64
	MaxItems int
	// Default of a seconds parameter (a domains list defaults to empty).
	Default int64
}

// Rule is one entry of the catalogue.
type Rule struct {
	Code   string
	Stage  string
	Params []Param
	// The setting of a program that never configured the rule (its costs: docs/fraud.md).
	Default Setting
}

// MaxListDomains bounds a rule's list of domains (or referrer patterns).
const MaxListDomains = 500

// MaxCountries bounds a list of countries: there are 249 codes.
const MaxCountries = 250

// MaxVelocityWindow is the longest click_velocity window: a day. The count reads the clicks
// of one link in it, so a longer one would read more of ClickHouse per conversion.
const MaxVelocityWindow = 24 * 3600

// PaidAdsParams are the paid-ads click ids ingest looks for on a landing URL: an affiliate
// who buys ads on the advertiser's brand shows them. paid_ads_click fires on those its
// program does not allow.
var PaidAdsParams = enrich.PaidAdsParams

// MaxMinSeconds is the largest minimum click-to-conversion time: an hour is already far
// beyond any checkout a bot would skip.
const MaxMinSeconds = 3600

// MaxMaxSeconds is the largest maximum click-to-conversion time: the longest attribution
// window a program may have (365 days).
const MaxMaxSeconds = 365 * 24 * 3600

// Catalogue lists the rules in the order the docs give them.
var Catalogue = []Rule{
	{Code: ConversionTooFast, Stage: StageRegistration,
		Params:  []Param{{Name: "min_seconds", Kind: kindSeconds, Min: 1, Max: MaxMinSeconds, Default: 10}},
		Default: Setting{Enabled: true, Action: ActionFlag}},
	{Code: ConversionTooSlow, Stage: StageRegistration,
		Params:  []Param{{Name: "max_seconds", Kind: kindSeconds, Min: 60, Max: MaxMaxSeconds, Default: 30 * 24 * 3600}},
		Default: Setting{Enabled: false, Action: ActionFlag}},
	{Code: SelfReferral, Stage: StageRegistration,
		Default: Setting{Enabled: true, Action: ActionHold}},
	{Code: DisposableEmail, Stage: StageRegistration,
		Params:  []Param{{Name: "extra_domains", Kind: kindDomains, MaxItems: MaxListDomains}},
		Default: Setting{Enabled: true, Action: ActionFlag}},
	{Code: DuplicateOrder, Stage: StageRegistration,
		Default: Setting{Enabled: true, Action: ActionFlag}},
	{Code: DuplicateCustomer, Stage: StageRegistration,
		Default: Setting{Enabled: true, Action: ActionFlag}},
	{Code: HostingNetwork, Stage: StageClick,
		Default: Setting{Enabled: true, Action: ActionFlag}},
	{Code: CountryNotAllowed, Stage: StageClick,
		Params:  []Param{{Name: "countries", Kind: kindCountries, MaxItems: MaxCountries}},
		Default: Setting{Enabled: false, Action: ActionFlag}},
	{Code: ClickVelocity, Stage: StageClick,
		Params: []Param{{Name: "max_clicks", Kind: kindCount, Min: 1, Max: 10000, Default: 10},
			{Name: "window_seconds", Kind: kindSeconds, Min: 1, Max: MaxVelocityWindow, Default: 3600}},
		Default: Setting{Enabled: true, Action: ActionFlag}},
	{Code: PaidAdsClick, Stage: StageClick,
		Params:  []Param{{Name: "allowed", Kind: kindClickIDs, MaxItems: len(PaidAdsParams)}},
		Default: Setting{Enabled: true, Action: ActionFlag}},
	{Code: BannedReferrer, Stage: StageClick,
		Params:  []Param{{Name: "patterns", Kind: kindPatterns, MaxItems: MaxListDomains}},
		Default: Setting{Enabled: true, Action: ActionFlag}},
	{Code: CustomRule, Stage: StageClick,
		Params:  []Param{{Name: "expression", Kind: kindExpression, MaxItems: MaxExpression}},
		Default: Setting{Enabled: false, Action: ActionFlag}},
}

// Codes lists the reason codes of the catalogue.
func Codes() []string {
	out := make([]string, len(Catalogue))
	for i, r := range Catalogue {
		out[i] = r.Code
	}
	return out
}

// Lookup returns the rule of a code.
func Lookup(code string) (Rule, bool) {
	i := slices.IndexFunc(Catalogue, func(r Rule) bool { return r.Code == code })
	if i < 0 {
		return Rule{}, false
	}
	return Catalogue[i], true
}

// Setting is how a program runs one rule.
type Setting struct {
	Enabled bool   `json:"enabled"`
	Action  string `json:"action"`
	// Shadow decides and records, and never acts: its verdicts are kept apart and change
	// nothing (no hold, nothing in webhooks).
	Shadow bool `json:"shadow"`
	// Whole-number parameters (seconds and counts) by name; lists of domains by name; the
	// other lists (countries, referrer patterns, click-id names) by name; expressions by name.
	Seconds map[string]int64    `json:"seconds,omitempty"`
	Domains map[string][]string `json:"domains,omitempty"`
	Lists   map[string][]string `json:"lists,omitempty"`
	Text    map[string]string   `json:"text,omitempty"`
}

// Param is the value of the parameter name as the API shows it: a number, a list (never
// nil) or a string.
func (s Setting) Param(p Param) any {
	switch p.Kind {
	case kindSeconds, kindCount:
		return s.Seconds[p.Name]
	case kindExpression:
		return s.Text[p.Name]
	case kindDomains:
		return nonNil(s.Domains[p.Name])
	}
	return nonNil(s.Lists[p.Name])
}

func nonNil(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

// Settings are a program's settings of every rule of the catalogue.
type Settings map[string]Setting

// Defaults are the settings of a program that never configured its rules.
func Defaults() Settings {
	out := make(Settings, len(Catalogue))
	for _, r := range Catalogue {
		s := r.Default
		for _, p := range r.Params {
			if p.Kind == kindSeconds || p.Kind == kindCount {
				if s.Seconds == nil {
					s.Seconds = map[string]int64{}
				}
				s.Seconds[p.Name] = p.Default
			}
		}
		out[r.Code] = s
	}
	return out
}

// Merge lays stored over the defaults: a code the program never configured, or a parameter
// added to a rule after it was saved, takes its default. Codes no longer in the catalogue are
// dropped.
func Merge(stored Settings) Settings {
	out := Defaults()
	for code, s := range stored {
		d, ok := out[code]
		if !ok {
			continue
		}
		for name, v := range d.Seconds {
			if _, set := s.Seconds[name]; !set {
				if s.Seconds == nil {
					s.Seconds = map[string]int64{}
				}
				s.Seconds[name] = v
			}
		}
		out[code] = s
	}
	return out
}

// Active reports whether a rule runs for a partnership: enabled and not switched off for it.
func (s Settings) Active(code string, exempt []string) bool {
	return s[code].Enabled && !slices.Contains(exempt, code)
}

// FieldError is a setting that fails validation, naming the field ("rules.<code>.params.<name>").
type FieldError struct{ Field, Message string }

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

// ValidationError lists every invalid field of a change.
type ValidationError struct{ Fields []FieldError }

func (e *ValidationError) Error() string {
	msgs := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		msgs[i] = f.Error()
	}
	return strings.Join(msgs, "; ")
}

// Change is a change of one rule's setting: the fields given replace the current ones.
type Change struct {
	Enabled *bool
	Action  *string
	Shadow  *bool
	// Params by name: a number of seconds (int64) or a list of domains ([]string); any other
	// value is refused.
	Params map[string]any
}

// Apply validates changes (by code) and applies them to current, returning the new settings;
// a *ValidationError names every invalid field.
func Apply(current Settings, changes map[string]Change) (Settings, error) {
	out := make(Settings, len(current))
	for code, s := range current {
		out[code] = s.clone()
	}
	var errs []FieldError
	codes := make([]string, 0, len(changes))
	for code := range changes {
		codes = append(codes, code)
	}
	sort.Strings(codes)
	for _, code := range codes {
		ch := changes[code]
		field := "rules." + code
		r, ok := Lookup(code)
		if !ok {
			errs = append(errs, FieldError{Field: field, Message: "is not a reason code; known: " + strings.Join(Codes(), ", ")})
			continue
		}
		s := out[code]
		if ch.Enabled != nil {
			s.Enabled = *ch.Enabled
		}
		if ch.Shadow != nil {
			s.Shadow = *ch.Shadow
		}
		if ch.Action != nil {
			if !slices.Contains(Actions, *ch.Action) {
				errs = append(errs, FieldError{Field: field + ".action", Message: "must be one of " + strings.Join(Actions, ", ")})
			} else {
				s.Action = *ch.Action
			}
		}
		names := make([]string, 0, len(ch.Params))
		for name := range ch.Params {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			if err := setParam(&s, r, name, ch.Params[name]); err != nil {
				errs = append(errs, FieldError{Field: field + ".params." + name, Message: err.Error()})
			}
		}
		if code == CustomRule && s.Enabled && s.Text[paramExpression] == "" && ch.Params[paramExpression] == nil {
			errs = append(errs, FieldError{Field: field + ".params." + paramExpression, Message: "is required to enable the rule"})
		}
		out[code] = s
	}
	if errs != nil {
		return nil, &ValidationError{Fields: errs}
	}
	return out, nil
}

func setParam(s *Setting, r Rule, name string, v any) error {
	i := slices.IndexFunc(r.Params, func(p Param) bool { return p.Name == name })
	if i < 0 {
		if len(r.Params) == 0 {
			return errors.New("is not a parameter: the rule takes none")
		}
		known := make([]string, len(r.Params))
		for j, p := range r.Params {
			known[j] = p.Name
		}
		return fmt.Errorf("is not a parameter of the rule; it takes %s", strings.Join(known, ", "))
	}
	p := r.Params[i]
	switch p.Kind {
	case kindSeconds, kindCount:
		n, ok := v.(int64)
		if !ok || n < p.Min || n > p.Max {
			unit := " of seconds"
			if p.Kind == kindCount {
				unit = ""
			}
			return fmt.Errorf("must be a whole number%s from %d to %d", unit, p.Min, p.Max)
		}
		if s.Seconds == nil {
			s.Seconds = map[string]int64{}
		}
		s.Seconds[name] = n
	case kindDomains, kindCountries, kindPatterns, kindClickIDs:
		noun := "strings"
		if p.Kind == kindDomains {
			noun = "domains"
		}
		list, ok := v.([]string)
		if !ok {
			return errors.New("must be a list of " + noun)
		}
		if len(list) > p.MaxItems {
			if p.Kind != kindDomains {
				noun = "entries"
			}
			return fmt.Errorf("must hold at most %d %s, has %d", p.MaxItems, noun, len(list))
		}
		clean := make([]string, 0, len(list))
		for _, e := range list {
			e, err := listEntry(p.Kind, e)
			if err != nil {
				return err
			}
			if !slices.Contains(clean, e) {
				clean = append(clean, e)
			}
		}
		lists := &s.Lists
		if p.Kind == kindDomains {
			lists = &s.Domains
		}
		if *lists == nil {
			*lists = map[string][]string{}
		}
		(*lists)[name] = clean
	case kindExpression:
		expr, ok := v.(string)
		if !ok {
			return errors.New("must be a CEL expression, as a string")
		}
		if err := CheckExpression(expr); err != nil {
			return err
		}
		if s.Text == nil {
			s.Text = map[string]string{}
		}
		s.Text[name] = expr
	}
	return nil
}

// listEntry checks and normalises one entry of a list parameter of kind.
func listEntry(kind, e string) (string, error) {
	e = strings.TrimSpace(e)
	switch kind {
	case kindDomains:
		e = strings.ToLower(e)
		if !validDomain(e) {
			return "", fmt.Errorf("%q is not a domain name", e)
		}
	case kindCountries:
		e = strings.ToUpper(e)
		if len(e) != 2 || e[0] < 'A' || e[0] > 'Z' || e[1] < 'A' || e[1] > 'Z' {
			return "", fmt.Errorf("%q is not an ISO 3166-1 alpha-2 country code", e)
		}
	case kindPatterns:
		e = strings.ToLower(e)
		if !validDomain(strings.TrimPrefix(e, "*.")) {
			return "", fmt.Errorf("%q is not a domain name, or \"*.\" and one", e)
		}
	case kindClickIDs:
		e = strings.ToLower(e)
		if !slices.Contains(PaidAdsParams, e) {
			return "", fmt.Errorf("%q is not a paid-ads click id; known: %s", e, strings.Join(PaidAdsParams, ", "))
		}
	}
	return e, nil
}

func (s Setting) clone() Setting {
	c := s
	if s.Seconds != nil {
		c.Seconds = make(map[string]int64, len(s.Seconds))
		for k, v := range s.Seconds {
			c.Seconds[k] = v
		}
	}
	c.Domains, c.Lists, c.Text = cloneLists(s.Domains), cloneLists(s.Lists), maps.Clone(s.Text)
	return c
}

func cloneLists(m map[string][]string) map[string][]string {
	if m == nil {
		return nil
	}
	out := make(map[string][]string, len(m))
	for k, v := range m {
		out[k] = slices.Clone(v)
	}
	return out
}

// validDomain accepts a lower-case host name of labels of letters, digits and '-', with a dot.
func validDomain(d string) bool {
	if len(d) < 3 || len(d) > 253 || !strings.Contains(d, ".") {
		return false
	}
	for _, label := range strings.Split(d, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
				return false
			}
		}
	}
	return true
}

// Finding is one rule that fired on a commission.
type Finding struct {
	Code   string `json:"code"`
	Action string `json:"action"`
	// Observed is the value that made the rule fire (seconds from click to conversion, the
	// earlier conversion, which of the affiliate's addresses matched): never a customer's
	// e-mail address.
	Observed  string    `json:"observed"`
	Shadow    bool      `json:"shadow"`
	Stage     string    `json:"stage"`
	DecidedAt time.Time `json:"decided_at"`
}

// Verdict is a commission's risk: every finding, and whether the commission is on hold.
type Verdict struct {
	Findings []Finding
	// HeldAt is when the commission was put on hold; nil when it is not held.
	HeldAt *time.Time
}

// Acting are the findings that act (not shadow).
func (v Verdict) Acting() []Finding {
	var out []Finding
	for _, f := range v.Findings {
		if !f.Shadow {
			out = append(out, f)
		}
	}
	return out
}

// Holds reports whether any acting finding holds the commission.
func Holds(fs []Finding) bool {
	return slices.ContainsFunc(fs, func(f Finding) bool { return !f.Shadow && f.Action == ActionHold })
}
