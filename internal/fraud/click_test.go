package fraud_test

import (
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/fraud"
)

// settings returns the defaults with changes applied, failing the test on a refusal.
func settings(t *testing.T, changes map[string]fraud.Change) fraud.Settings {
	t.Helper()
	s, err := fraud.Apply(fraud.Defaults(), changes)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func on(params map[string]any) fraud.Change {
	yes := true
	return fraud.Change{Enabled: &yes, Params: params}
}

func TestEachClickRuleFiresAtItsBoundary(t *testing.T) {
	now := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	s := settings(t, map[string]fraud.Change{
		fraud.CountryNotAllowed: on(map[string]any{"countries": []string{"de", "AT"}}),
		fraud.ClickVelocity:     on(map[string]any{"max_clicks": int64(5)}),
		fraud.PaidAdsClick:      on(map[string]any{"allowed": []string{"gclid"}}),
		fraud.BannedReferrer:    on(map[string]any{"patterns": []string{"*.spam.example", "coupons.example"}}),
		fraud.CustomRule:        on(map[string]any{"expression": `amount >= 500.0 && device == "mobile" && seconds_to_conversion < 60`}),
	})
	conv := fraud.Conversion{Amount: 50000, Currency: "EUR", OccurredAt: now}
	click := fraud.Click{At: now.Add(-time.Hour), Country: "DE", DeviceType: "desktop"}
	cases := []struct {
		name  string
		edit  func(k *fraud.Click, c *fraud.Conversion)
		code  string // "" fires nothing
		value string
	}{
		{"an honest click fires nothing", func(*fraud.Click, *fraud.Conversion) {}, "", ""},
		{"a click from a hosting network is flagged with its AS", func(k *fraud.Click, _ *fraud.Conversion) { k.Hosting, k.ASN = true, 16509 }, fraud.HostingNetwork, "AS16509"},
		{"an AS not on the hosting list is not", func(k *fraud.Click, _ *fraud.Conversion) { k.ASN = 3320 }, "", ""},
		{"a country outside the list fires", func(k *fraud.Click, _ *fraud.Conversion) { k.Country = "FR" }, fraud.CountryNotAllowed, "FR"},
		{"a country on the list does not", func(k *fraud.Click, _ *fraud.Conversion) { k.Country = "AT" }, "", ""},
		{"an unknown country does not", func(k *fraud.Click, _ *fraud.Conversion) { k.Country = "" }, "", ""},
		{"one click more than the maximum fires", func(k *fraud.Click, _ *fraud.Conversion) { k.RecentClicks = 6 }, fraud.ClickVelocity, "6"},
		{"exactly the maximum does not", func(k *fraud.Click, _ *fraud.Conversion) { k.RecentClicks = 5 }, "", ""},
		{"a paid-ads id the program does not allow fires", func(k *fraud.Click, _ *fraud.Conversion) { k.PaidAds = []string{"gclid", "fbclid"} }, fraud.PaidAdsClick, "fbclid"},
		{"an allowed paid-ads id does not", func(k *fraud.Click, _ *fraud.Conversion) { k.PaidAds = []string{"gclid"} }, "", ""},
		{"a referrer under a wildcard pattern fires", func(k *fraud.Click, _ *fraud.Conversion) { k.ReferrerDomain = "deals.spam.example" }, fraud.BannedReferrer, "deals.spam.example"},
		{"the wildcard's own domain fires", func(k *fraud.Click, _ *fraud.Conversion) { k.ReferrerDomain = "spam.example" }, fraud.BannedReferrer, "spam.example"},
		{"an exact pattern does not cover its subdomains", func(k *fraud.Click, _ *fraud.Conversion) { k.ReferrerDomain = "x.coupons.example" }, "", ""},
		{"a domain that only ends alike does not", func(k *fraud.Click, _ *fraud.Conversion) { k.ReferrerDomain = "notspam.example" }, "", ""},
		{"the custom rule fires when its expression is true", func(k *fraud.Click, c *fraud.Conversion) {
			k.DeviceType, k.At = "mobile", now.Add(-59*time.Second)
		}, fraud.CustomRule, "true"},
		{"and not a second later", func(k *fraud.Click, c *fraud.Conversion) { k.DeviceType, k.At = "mobile", now.Add(-60*time.Second) }, "", ""},
		{"nor a cent below its amount", func(k *fraud.Click, c *fraud.Conversion) {
			k.DeviceType, k.At, c.Amount = "mobile", now.Add(-time.Second), 49999
		}, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k, cv := click, conv
			c.edit(&k, &cv)
			fs := fraud.DecideClick(s, nil, k, cv, now)
			if c.code == "" {
				if len(fs) != 0 {
					t.Fatalf("fired %+v", fs)
				}
				return
			}
			if len(fs) != 1 || fs[0].Code != c.code || fs[0].Observed != c.value || fs[0].Stage != fraud.StageClick {
				t.Fatalf("findings %+v, want %s %s", fs, c.code, c.value)
			}
			// Switched off for the partnership, it does not fire.
			if fs := fraud.DecideClick(s, []string{c.code}, k, cv, now); len(fs) != 0 {
				t.Fatalf("an exempt rule fired: %+v", fs)
			}
		})
	}
}

// A backtest reads only the columns of clicks that the running rules read (ClickColumns):
// each rule still fires on a click whose other facts are empty.
func TestEachClickRuleReadsOnlyTheColumnsItNames(t *testing.T) {
	now := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	// What each column of clicks fills in a Click, emptied.
	columns := map[string]func(k *fraud.Click){
		"link_id": func(k *fraud.Click) { k.LinkID = "" }, "country": func(k *fraud.Click) { k.Country = "" },
		"asn": func(k *fraud.Click) { k.ASN = 0 }, "hosting": func(k *fraud.Click) { k.Hosting = false },
		"device_type": func(k *fraud.Click) { k.DeviceType = "" }, "browser": func(k *fraud.Click) { k.Browser = "" },
		"os": func(k *fraud.Click) { k.OS = "" }, "referrer_domain": func(k *fraud.Click) { k.ReferrerDomain = "" },
		"utm_source": func(k *fraud.Click) { k.UTMSource = "" }, "utm_medium": func(k *fraud.Click) { k.UTMMedium = "" },
		"utm_campaign": func(k *fraud.Click) { k.UTMCampaign = "" }, "paid_ads": func(k *fraud.Click) { k.PaidAds = nil },
	}
	full := fraud.Click{ID: "clk_1", LinkID: "lnk_1", At: now.Add(-time.Second), Country: "FR", ASN: 16509, Hosting: true,
		DeviceType: "mobile", Browser: "Chrome", OS: "Android", ReferrerDomain: "deals.spam.example", UTMSource: "s",
		UTMMedium: "m", UTMCampaign: "c", PaidAds: []string{"fbclid"}, RecentClicks: 20}
	conv := fraud.Conversion{Amount: 50000, Currency: "EUR", OccurredAt: now}
	params := map[string]map[string]any{
		fraud.CountryNotAllowed: {"countries": []string{"DE"}},
		fraud.BannedReferrer:    {"patterns": []string{"*.spam.example"}},
		fraud.CustomRule:        {"expression": `link_id == "lnk_1" && browser == "Chrome" && os == "Android" && utm_medium == "m"`},
	}
	off := map[string]fraud.Change{}
	for _, r := range fraud.Catalogue {
		if r.Stage == fraud.StageClick {
			no := false
			off[r.Code] = fraud.Change{Enabled: &no}
		}
	}
	readsNothing := func(what string, read func(string) bool) {
		t.Helper()
		for c := range columns {
			if read(c) {
				t.Errorf("%s: reads %s", what, c)
			}
		}
	}
	readsNothing("no click rule", fraud.ClickColumns(settings(t, off), nil))
	for _, r := range fraud.Catalogue {
		if r.Stage != fraud.StageClick {
			continue
		}
		changes := maps.Clone(off)
		changes[r.Code] = on(params[r.Code])
		s := settings(t, changes)
		read := fraud.ClickColumns(s, nil)
		k := full
		for c, empty := range columns {
			if !read(c) {
				empty(&k)
			}
		}
		if fs := fraud.DecideClick(s, nil, k, conv, now); len(fs) != 1 || fs[0].Code != r.Code {
			t.Errorf("%s on a click of the columns it names: findings %+v", r.Code, fs)
		}
		readsNothing(r.Code+" exempt", fraud.ClickColumns(s, []string{r.Code}))
	}
}

func TestClickRuleDefaults(t *testing.T) {
	d := fraud.Defaults()
	if !d[fraud.HostingNetwork].Enabled || d[fraud.CountryNotAllowed].Enabled || d[fraud.CustomRule].Enabled ||
		d[fraud.ClickVelocity].Seconds["max_clicks"] != 10 || d[fraud.ClickVelocity].Seconds["window_seconds"] != 3600 {
		t.Fatalf("defaults %+v", d)
	}
	// The defaults flag the affiliate's paid-ads clicks, and a velocity over 10.
	now := time.Now()
	fs := fraud.DecideClick(d, nil, fraud.Click{PaidAds: []string{"msclkid"}, RecentClicks: 11}, fraud.Conversion{}, now)
	if len(fs) != 2 || fs[0].Code != fraud.ClickVelocity || fs[1].Code != fraud.PaidAdsClick || fraud.Holds(fs) {
		t.Fatalf("findings %+v", fs)
	}
	if !fraud.ClickRulesActive(d, nil) {
		t.Error("the defaults run no click rule")
	}
	all := []string{fraud.HostingNetwork, fraud.ClickVelocity, fraud.PaidAdsClick, fraud.BannedReferrer}
	if fraud.ClickRulesActive(d, all) {
		t.Error("every click rule is exempt, yet some runs")
	}
}

func TestClickRuleParamsAreValidated(t *testing.T) {
	cases := []struct {
		name, code, param string
		value             any
		want              string
	}{
		{"a country that is not a code", fraud.CountryNotAllowed, "countries", []string{"DE", "Germany"}, `"GERMANY" is not an ISO 3166-1 alpha-2`},
		{"a count of zero", fraud.ClickVelocity, "max_clicks", int64(0), "from 1 to 10000"},
		{"a window over a day", fraud.ClickVelocity, "window_seconds", int64(86401), "from 1 to 86400"},
		{"an unknown click id", fraud.PaidAdsClick, "allowed", []string{"utm_source"}, `"utm_source" is not a paid-ads click id`},
		{"a pattern that is no domain", fraud.BannedReferrer, "patterns", []string{"*spam*"}, "is not a domain name"},
		{"an oversized pattern list", fraud.BannedReferrer, "patterns", make([]string, 501), "at most 500 entries, has 501"},
		{"an expression that does not parse", fraud.CustomRule, "expression", `country == `, "does not compile: ERROR: <input>:1:"},
		{"an unknown variable", fraud.CustomRule, "expression", `countri == "DE"`, "undeclared reference to 'countri'"},
		{"a type mismatch", fraud.CustomRule, "expression", `amount > "5"`, "no matching overload"},
		{"an expression that is not a bool", fraud.CustomRule, "expression", `amount * 2.0`, "must give a bool, gives double"},
		{"an expression not given as a string", fraud.CustomRule, "expression", int64(1), "must be a CEL expression, as a string"},
		{"an overlong expression", fraud.CustomRule, "expression", strings.Repeat("true && ", 300) + "true", "at most 2048 characters"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := fraud.Apply(fraud.Defaults(), map[string]fraud.Change{c.code: {Params: map[string]any{c.param: c.value}}})
			var v *fraud.ValidationError
			if !errors.As(err, &v) || len(v.Fields) != 1 || v.Fields[0].Field != "rules."+c.code+".params."+c.param ||
				!strings.Contains(v.Fields[0].Message, c.want) {
				t.Fatalf("err %v, want %s naming %s", err, c.want, c.param)
			}
		})
	}
	// Enabling the custom rule needs an expression.
	_, err := fraud.Apply(fraud.Defaults(), map[string]fraud.Change{fraud.CustomRule: on(nil)})
	if err == nil || !strings.Contains(err.Error(), "rules.custom_rule.params.expression: is required") {
		t.Fatalf("enabled without an expression: %v", err)
	}
}

func TestTheCustomRuleIsCostLimited(t *testing.T) {
	// Each comprehension over the list multiplies: the check at save time allows it, the run
	// stops at the cost limit and the rule does not fire.
	expr := `paid_ads.all(a, paid_ads.all(b, paid_ads.all(c, a + b + c != "")))`
	s := settings(t, map[string]fraud.Change{fraud.CustomRule: on(map[string]any{"expression": expr})})
	many := make([]string, 100)
	for i := range many {
		many[i] = "x"
	}
	fs := fraud.DecideClick(s, []string{fraud.PaidAdsClick}, fraud.Click{PaidAds: many}, fraud.Conversion{}, time.Now())
	if len(fs) != 0 {
		t.Fatalf("a run over its cost fired: %+v", fs)
	}
	fs = fraud.DecideClick(s, []string{fraud.PaidAdsClick}, fraud.Click{PaidAds: many[:3]}, fraud.Conversion{}, time.Now())
	if len(fs) != 1 || fs[0].Code != fraud.CustomRule {
		t.Fatalf("a cheap run did not fire: %+v", fs)
	}
}
