package httpapi_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/fraud"
	"github.com/partnerstream/partnerstream/internal/httpapi"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/ids"
)

func TestTheFraudRoutesAreDocumented(t *testing.T) {
	assertAreaDocumented(t, func(s *httpapi.Server) { s.MountFraud(nil) }, "openapi/26-fraud.yaml")
}

// fraudRulesAnswer is the answer of the fraud-rule routes, with what the tests read.
type fraudRulesAnswer struct {
	ProgramID string `json:"program_id"`
	Rules     []struct {
		Code    string         `json:"code"`
		Enabled bool           `json:"enabled"`
		Action  string         `json:"action"`
		Shadow  bool           `json:"shadow"`
		Params  map[string]any `json:"params"`
	} `json:"rules"`
	Exemptions map[string][]string `json:"exemptions"`
}

// riskAnswer is a conversion's risk as the API shows it.
type riskAnswer struct {
	Risk struct {
		Held    bool `json:"held"`
		Reasons []struct {
			Code   string `json:"code"`
			Action string `json:"action"`
			Value  string `json:"value"`
		} `json:"reasons"`
		Shadow []struct {
			Code string `json:"code"`
		} `json:"shadow"`
	} `json:"risk"`
}

func fields(p problem) []string {
	var out []string
	for _, e := range p.Errors {
		out = append(out, e.Field)
	}
	slices.Sort(out)
	return out
}

func TestFraudRulesHoldsAndVerdictsOverHTTP(t *testing.T) {
	f := newConversionsFixture(t)
	f.srv.MountFraud(fraud.New(f.db, nil))
	member, owner := f.dashboardAs(t, "advertiser", "member"), f.dashboardAs(t, "advertiser", "owner")
	affiliate := f.dashboardAs(t, "affiliate", "owner")
	rules := "/api/programs/" + f.program + "/fraud-rules"

	r := f.do(t, "GET", rules, member, "")
	if r.status != 200 {
		t.Fatalf("GET rules: %d %s", r.status, r.raw)
	}
	if got := decode[fraudRulesAnswer](t, r); len(got.Rules) != len(fraud.Catalogue) || got.Rules[0].Code != fraud.ConversionTooFast ||
		got.Rules[0].Params["min_seconds"] != float64(10) {
		t.Fatalf("default rules %+v", got)
	}
	for _, tc := range []struct {
		name    string
		headers map[string]string
		status  int
	}{
		{"a member cannot change the rules", member, 403},
		{"an affiliate cannot", affiliate, 403},
	} {
		if r := f.do(t, "PATCH", rules, tc.headers, `{"rules": {"self_referral": {"enabled": false}}}`); r.status != tc.status {
			t.Errorf("%s: %d %s", tc.name, r.status, r.raw)
		}
	}

	// Bad input: 400 naming every field, and nothing changes.
	long := make([]string, fraud.MaxListDomains+1)
	for i := range long {
		long[i] = fmt.Sprintf("d%d.example", i)
	}
	for _, tc := range []struct {
		name, body string
		fields     []string
	}{
		{"unknown reason code", `{"rules": {"click_bot": {"enabled": true}}}`, []string{"rules.click_bot"}},
		{"window out of range", `{"rules": {"conversion_too_fast": {"params": {"min_seconds": 0}}, "conversion_too_slow": {"params": {"max_seconds": 99999999}}}}`,
			[]string{"rules.conversion_too_fast.params.min_seconds", "rules.conversion_too_slow.params.max_seconds"}},
		{"oversized list", fmt.Sprintf(`{"rules": {"disposable_email": {"params": {"extra_domains": %q}}}}`, long), nil},
		{"not a number", `{"rules": {"conversion_too_fast": {"params": {"min_seconds": "ten"}}}}`, []string{"rules.conversion_too_fast.params.min_seconds"}},
		{"unknown action", `{"rules": {"self_referral": {"action": "block"}}}`, []string{"rules.self_referral.action"}},
		{"unknown parameter", `{"rules": {"self_referral": {"params": {"limit": 3}}}}`, []string{"rules.self_referral.params.limit"}},
		{"no rules", `{"rules": {}}`, []string{"rules"}},
		{"an expression that does not compile", `{"rules": {"custom_rule": {"enabled": true, "params": {"expression": "country =="}}}}`,
			[]string{"rules.custom_rule.params.expression"}},
		{"an expression of another type", `{"rules": {"custom_rule": {"params": {"expression": "amount + 1.0"}}}}`,
			[]string{"rules.custom_rule.params.expression"}},
		{"the custom rule on without an expression", `{"rules": {"custom_rule": {"enabled": true}}}`, []string{"rules.custom_rule.params.expression"}},
		{"a country that is not a code, a window over a day", `{"rules": {"country_not_allowed": {"params": {"countries": ["Spain"]}},
			"click_velocity": {"params": {"window_seconds": 86401}}}}`,
			[]string{"rules.click_velocity.params.window_seconds", "rules.country_not_allowed.params.countries"}},
	} {
		body := tc.body
		if tc.name == "oversized list" {
			// %q of a []string is not JSON: write the list out.
			body = `{"rules": {"disposable_email": {"params": {"extra_domains": ["` + strings.Join(long, `","`) + `"]}}}}`
			tc.fields = []string{"rules.disposable_email.params.extra_domains"}
		}
		r := f.do(t, "PATCH", rules, owner, body)
		if r.status != 400 || !slices.Equal(fields(r.problem), tc.fields) {
			t.Errorf("%s: %d %s, want 400 naming %v", tc.name, r.status, r.raw, tc.fields)
		}
	}

	// The compiler's own message reaches the advertiser, naming the place of the error.
	if r := f.do(t, "PATCH", rules, owner, `{"rules": {"custom_rule": {"params": {"expression": "countri == 'DE'"}}}}`); r.status != 400 ||
		!strings.Contains(r.raw, "undeclared reference to 'countri'") {
		t.Errorf("an unknown variable: %d %s", r.status, r.raw)
	}
	if r := f.do(t, "PATCH", rules, owner, `{"rules": {"custom_rule": {"enabled": true, "params": {"expression": "hosting && amount > 100.0"}}}}`); r.status != 200 ||
		!strings.Contains(r.raw, `"expression":"hosting \u0026\u0026 amount \u003e 100.0"`) && !strings.Contains(r.raw, `"expression":"hosting && amount > 100.0"`) {
		t.Errorf("a valid expression: %d %s", r.status, r.raw)
	}
	r = f.do(t, "PATCH", rules, owner, `{"rules": {"conversion_too_fast": {"action": "hold", "params": {"min_seconds": 30}},
		"disposable_email": {"shadow": true, "params": {"extra_domains": ["Temp-Shop.example"]}}}}`)
	if r.status != 200 {
		t.Fatalf("PATCH rules: %d %s", r.status, r.raw)
	}
	got := decode[fraudRulesAnswer](t, r)
	if got.Rules[0].Action != "hold" || got.Rules[0].Params["min_seconds"] != float64(30) || !got.Rules[3].Shadow ||
		fmt.Sprint(got.Rules[3].Params["extra_domains"]) != "[temp-shop.example]" || !got.Rules[2].Enabled {
		t.Fatalf("rules after the change %+v", got.Rules)
	}

	// Another advertiser sees none of it and changes none of it.
	other, _ := f.company(t, identity.Advertiser)
	intruder := f.session(t, other, identity.Advertiser, "owner")
	var ptn string
	if err := f.db.QueryRow(t.Context(), `SELECT id FROM partnerships WHERE program_id = $1`, f.program).Scan(&ptn); err != nil {
		t.Fatal(err)
	}
	for _, req := range [][3]string{{"GET", rules, ""}, {"PATCH", rules, `{"rules": {"self_referral": {"enabled": false}}}`},
		{"PUT", "/api/partnerships/" + ptn + "/fraud-exemptions", `{"codes": ["self_referral"]}`}} {
		if r := f.do(t, req[0], req[1], intruder, req[2]); r.status != 404 {
			t.Errorf("another advertiser's %s %s: %d %s", req[0], req[1], r.status, r.raw)
		}
	}
	if r := f.do(t, "PUT", "/api/partnerships/"+ptn+"/fraud-exemptions", owner, `{"codes": ["self_referral", "click_bot"]}`); r.status != 400 ||
		!slices.Equal(fields(r.problem), []string{"codes[1]"}) {
		t.Errorf("an unknown exemption: %d %s", r.status, r.raw)
	}

	// A conversion 2 seconds after its click is held; its customer e-mail is never shown; the
	// shadow rule shows to the advertiser only.
	fast := f.clicks(t, f.program, time.Now().Add(-2*time.Second), 1)[0]
	r = f.do(t, "POST", "/api/v1/conversions", apiKey(f.adv), fmt.Sprintf(`{"click_id": %q, "external_id": "fast-1", "amount": "50.00",
		"customer_email": "Someone@Temp-Shop.example"}`, fast))
	if r.status != 201 {
		t.Fatalf("register: %d %s", r.status, r.raw)
	}
	if strings.Contains(strings.ToLower(r.raw), "someone") {
		t.Errorf("the answer shows the customer e-mail: %s", r.raw)
	}
	held := decode[conversion](t, r).ID
	for _, tc := range []struct {
		name    string
		headers map[string]string
		shadow  int
	}{{"advertiser", member, 1}, {"affiliate", affiliate, 0}} {
		r := f.do(t, "GET", "/api/conversions/"+held, tc.headers, "")
		risk := decode[riskAnswer](t, r).Risk
		if r.status != 200 || !risk.Held || len(risk.Reasons) != 1 || risk.Reasons[0].Code != fraud.ConversionTooFast ||
			risk.Reasons[0].Action != "hold" || len(risk.Shadow) != tc.shadow {
			t.Errorf("%s reads risk %+v (%d)", tc.name, risk, r.status)
		}
	}
	if r := f.do(t, "POST", "/api/v1/conversions", apiKey(f.adv), fmt.Sprintf(`{"click_id": %q, "external_id": "bad-mail",
		"customer_email": "two@a.example, three@b.example"}`, f.click(t))); r.status != 400 || !slices.Equal(fields(r.problem), []string{"customer_email"}) {
		t.Errorf("a malformed customer_email: %d %s", r.status, r.raw)
	}

	// Held: approval is refused until the release; the release is all or nothing.
	if r := f.do(t, "POST", "/api/conversions/"+held+"/approve", member, ""); r.status != 409 || r.problem.Code != "commission_held" {
		t.Errorf("approving a held commission: %d %s", r.status, r.raw)
	}
	honest := f.register(t, "honest-1", "10.00").ID
	if r := f.do(t, "POST", "/api/conversions/release", member, fmt.Sprintf(`{"ids": [%q, %q]}`, held, honest)); r.status != 409 ||
		r.problem.Code != "bulk_release_failed" || len(r.problem.Failures) != 1 || r.problem.Failures[0].Code != "not_held" {
		t.Errorf("a release with a commission that is not held: %d %s", r.status, r.raw)
	}
	tooMany := make([]string, 101)
	for i := range tooMany {
		tooMany[i] = `"` + ids.New(ids.Conversion) + `"`
	}
	if r := f.do(t, "POST", "/api/conversions/release", member, `{"ids": [`+strings.Join(tooMany, ",")+`]}`); r.status != 400 ||
		!slices.Equal(fields(r.problem), []string{"ids"}) {
		t.Errorf("a release of 101: %d %s", r.status, r.raw)
	}
	if r := f.do(t, "POST", "/api/conversions/release", affiliate, fmt.Sprintf(`{"ids": [%q]}`, held)); r.status != 403 {
		t.Errorf("an affiliate released: %d %s", r.status, r.raw)
	}
	if r := f.do(t, "POST", "/api/conversions/release", member, fmt.Sprintf(`{"ids": [%q]}`, held)); r.status != 200 {
		t.Fatalf("release: %d %s", r.status, r.raw)
	}
	if r := f.do(t, "POST", "/api/conversions/"+held+"/approve", member, ""); r.status != 200 {
		t.Errorf("approving the released commission: %d %s", r.status, r.raw)
	}
}
