package httpapi_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/partnerstream/partnerstream/internal/programs"
)

// listed is a program of the listing, with the fields affiliates read.
type listed struct {
	ID             string              `json:"id"`
	AdvertiserName string              `json:"advertiser_name"`
	Website        string              `json:"website"`
	Terms          string              `json:"terms"`
	Categories     []string            `json:"categories"`
	Questions      []programs.Question `json:"questions"`
}

func TestListingRoutes(t *testing.T) {
	f := newProgramsFixture(t)
	r := f.do(t, "POST", "/api/programs", f.advOwner, `{"name":"Trail shoes","description":"Running gear for mountains","landing_url":"https://shop.example.com/",
		"currency":"EUR","commission":{"type":"percent","percent":"10"},"visibility":"public","hold_days":14,
		"website":"https://shop.example.com","terms":"No brand bidding.","categories":["fashion","health"],
		"questions":[{"text":"Where will you promote us?","required":true},{"text":"Audience size?"}]}`)
	expect(t, r, 201, "")
	p := decode[listed](t, r)
	if p.AdvertiserName == "" || p.Website != "https://shop.example.com" || p.Terms != "No brand bidding." ||
		!slices.Equal(p.Categories, []string{"fashion", "health"}) || len(p.Questions) != 2 || !p.Questions[0].Required {
		t.Fatalf("created %s", r.raw)
	}
	other := f.createProgram(t, "public").ID

	t.Run("bad listing fields are listed", func(t *testing.T) {
		r := f.do(t, "PATCH", "/api/programs/"+p.ID, f.advOwner, `{"website":"javascript:alert(1)","categories":["pets","fashion","fashion"],
			"questions":[{"text":""},{"text":"a"},{"text":"b"},{"text":"c"}]}`)
		expect(t, r, 400, "validation_failed")
		var got []string
		for _, e := range r.problem.Errors {
			got = append(got, e.Field)
		}
		want := []string{"website", "categories[0]", "categories[2]", "questions", "questions[0].text"}
		if !slices.Equal(got, want) {
			t.Fatalf("fields %v, want %v", got, want)
		}
	})
	t.Run("the affiliate searches by text and category", func(t *testing.T) {
		for _, c := range []struct {
			query string
			want  []string
		}{
			{"q=MOUNTAIN", []string{p.ID}},
			{"q=" + "trail", []string{p.ID}},
			{"category=health", []string{p.ID}},
			{"category=travel", nil},
			{"q=shoes", []string{p.ID, other}},
		} {
			got := idsOf(t, f.do(t, "GET", "/api/v1/programs?"+c.query, apiKey(f.aff), ""))
			slices.Sort(got)
			want := slices.Clone(c.want)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("%s: %v, want %v", c.query, got, want)
			}
		}
		expect(t, f.do(t, "GET", "/api/programs?category=pets", f.affOwner, ""), 400, "validation_failed")
	})
	t.Run("a required answer is enforced and answers reach the brand", func(t *testing.T) {
		r := f.do(t, "POST", "/api/partnerships", f.affOwner, fmt.Sprintf(`{"program_id":%q,"answers":["","10k"]}`, p.ID))
		expect(t, r, 400, "validation_failed")
		if len(r.problem.Errors) != 1 || r.problem.Errors[0].Field != "answers[0]" {
			t.Fatalf("problem %s", r.raw)
		}
		expect(t, f.do(t, "POST", "/api/partnerships", f.affOwner, fmt.Sprintf(`{"program_id":%q,"answers":["a","b","c"]}`, p.ID)), 400, "validation_failed")
		r = f.do(t, "POST", "/api/v1/partnerships", apiKey(f.aff), fmt.Sprintf(`{"program_id":%q,"answers":["My running blog"]}`, p.ID))
		expect(t, r, 201, "")
		r = f.do(t, "GET", "/api/partnerships?program_id="+p.ID, f.advMember, "")
		expect(t, r, 200, "")
		got := decode[list[struct {
			Answers []programs.Answer `json:"answers"`
		}]](t, r)
		want := []programs.Answer{{Question: "Where will you promote us?", Answer: "My running blog"}, {Question: "Audience size?", Answer: ""}}
		if len(got.Data) != 1 || !slices.Equal(got.Data[0].Answers, want) {
			t.Fatalf("the brand sees %s", r.raw)
		}
		if n := len(idsOf(t, f.do(t, "GET", "/api/v1/partnerships", apiKey(f.adv2), ""))); n != 0 {
			t.Fatalf("another brand sees %d partnerships", n)
		}
	})
}

func TestOnboardingRoutes(t *testing.T) {
	f := newProgramsFixture(t)
	r := f.do(t, "GET", "/api/onboarding", f.advMember, "")
	expect(t, r, 200, "")
	type onboarding struct {
		Steps     map[string]bool `json:"steps"`
		Done      bool            `json:"done"`
		Dismissed bool            `json:"dismissed"`
		Program   *resource       `json:"program"`
	}
	if o := decode[onboarding](t, r); o.Steps["program"] || o.Program != nil || o.Done {
		t.Fatalf("a new brand's onboarding %s", r.raw)
	}
	expect(t, f.do(t, "GET", "/api/onboarding", f.affOwner, ""), 403, "forbidden")
	p := f.createProgram(t, "public")

	r = f.do(t, "POST", "/api/v1/conversions/test", apiKey(f.adv), fmt.Sprintf(`{"program_id":%q,"external_id":"test-1","amount":"42.50"}`, p.ID))
	expect(t, r, 201, "")
	tc := decode[struct {
		ID         string `json:"id"`
		Test       bool   `json:"test"`
		Commission string `json:"commission"`
		Source     string `json:"source"`
	}](t, r)
	if !tc.Test || tc.Commission != "5.00" || tc.Source != "api" {
		t.Fatalf("test conversion %s", r.raw)
	}
	for _, c := range []struct {
		name    string
		path    string
		headers map[string]string
		body    string
		status  int
		code    string
	}{
		{"an affiliate key", "/api/v1/conversions/test", apiKey(f.aff), fmt.Sprintf(`{"program_id":%q,"external_id":"x"}`, p.ID), 403, "forbidden"},
		{"another brand's program", "/api/v1/conversions/test", apiKey(f.adv2), fmt.Sprintf(`{"program_id":%q,"external_id":"x"}`, p.ID), 404, "not_found"},
		{"a bad amount", "/api/onboarding/test-conversion", f.advOwner, fmt.Sprintf(`{"program_id":%q,"external_id":"x","amount":"1.234"}`, p.ID), 400, "validation_failed"},
		{"a huge amount", "/api/onboarding/test-conversion", f.advOwner, fmt.Sprintf(`{"program_id":%q,"external_id":"x","amount":"999999999999999"}`, p.ID), 400, "validation_failed"},
		{"no external id", "/api/onboarding/test-conversion", f.advOwner, fmt.Sprintf(`{"program_id":%q}`, p.ID), 400, "validation_failed"},
		{"a malformed program id", "/api/onboarding/test-conversion", f.advOwner, `{"program_id":"nope","external_id":"x"}`, 400, "validation_failed"},
		{"an API key on the dashboard route", "/api/onboarding/test-conversion", apiKey(f.adv), `{}`, 401, "api_key_not_allowed"},
		{"a member may not dismiss", "/api/onboarding/dismiss", f.advMember, "", 403, "forbidden"},
		{"a member may not send a test", "/api/onboarding/test-conversion", f.advMember, fmt.Sprintf(`{"program_id":%q,"external_id":"x"}`, p.ID), 403, "forbidden"},
	} {
		t.Run(c.name, func(t *testing.T) { expect(t, f.do(t, "POST", c.path, c.headers, c.body), c.status, c.code) })
	}
	// The test conversion is no conversion: nothing pays it, counts it or announces it.
	var conversions, commissions, events int
	if err := f.db.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM conversions), (SELECT count(*) FROM commissions),
		(SELECT count(*) FROM outbox WHERE type LIKE 'conversion.%' OR type LIKE 'commission.%')`).Scan(&conversions, &commissions, &events); err != nil {
		t.Fatal(err)
	}
	if conversions+commissions+events != 0 {
		t.Fatalf("a test conversion made %d conversions, %d commissions, %d events", conversions, commissions, events)
	}
	r = f.do(t, "GET", "/api/onboarding", f.advOwner, "")
	if o := decode[onboarding](t, r); !o.Steps["program"] || !o.Steps["tracking"] || !o.Steps["test_conversion"] || o.Steps["partner"] || o.Program == nil || o.Program.ID != p.ID {
		t.Fatalf("onboarding after a test %s", r.raw)
	}
	r = f.do(t, "POST", "/api/onboarding/dismiss", f.advOwner, "")
	expect(t, r, 200, "")
	if !decode[onboarding](t, r).Dismissed {
		t.Fatalf("dismissed %s", r.raw)
	}
}

func TestListedApprovalProgramsInTheListing(t *testing.T) {
	f := newProgramsFixture(t)
	create := func(body string) map[string]any {
		t.Helper()
		r := f.do(t, "POST", "/api/programs", f.advOwner, `{"name":"Trail shoes","landing_url":"https://shop.example.com/",
			"currency":"EUR","commission":{"type":"percent","percent":"10"},`+body+`}`)
		expect(t, r, 201, "")
		return decode[map[string]any](t, r)
	}
	listed := create(`"visibility":"approval","listed":true,"questions":[{"text":"Where will you promote us?","required":true}]`)
	unlisted := create(`"visibility":"approval"`)
	public := create(`"visibility":"public"`)
	if listed["listed"] != true || unlisted["listed"] != false || public["listed"] != true {
		t.Fatalf("listed: %v %v %v", listed["listed"], unlisted["listed"], public["listed"])
	}
	r := f.do(t, "POST", "/api/programs", f.advOwner, `{"name":"x","landing_url":"https://shop.example.com/","currency":"EUR",
		"commission":{"type":"percent","percent":"10"},"visibility":"public","listed":false}`)
	expect(t, r, 400, "validation_failed")
	if len(r.problem.Errors) != 1 || r.problem.Errors[0].Field != "listed" {
		t.Fatalf("an unlisted public program: %s", r.raw)
	}
	expect(t, f.do(t, "PATCH", "/api/programs/"+unlisted["id"].(string), f.advOwner, `{"listed":null}`), 400, "validation_failed")

	// The first affiliate applies with an answer and a message the brand alone may read.
	const secret = "my private pitch to the brand"
	r = f.do(t, "POST", "/api/v1/partnerships", apiKey(f.aff), fmt.Sprintf(`{"program_id":%q,"message":%q,"answers":[%q]}`, listed["id"], secret, secret))
	expect(t, r, 201, "")
	if decode[partnership](t, r).Status != programs.Pending {
		t.Fatalf("applied to a listed approval program: %s", r.raw)
	}
	otherAff, otherKey := f.company(t, "affiliate")
	for _, c := range []struct {
		path    string
		headers map[string]string
	}{
		{"/api/v1/programs", apiKey(otherKey)},
		{"/api/v1/programs?q=trail", apiKey(otherKey)},
		{"/api/programs", f.affOwner},
	} {
		r := f.do(t, "GET", c.path, c.headers, "")
		expect(t, r, 200, "")
		got := idsOf(t, r)
		if !slices.Contains(got, listed["id"].(string)) || !slices.Contains(got, public["id"].(string)) || slices.Contains(got, unlisted["id"].(string)) {
			t.Fatalf("%s lists %v; want the listed and public programs, not %s", c.path, got, unlisted["id"])
		}
		// Another company reads the program's listing, never what an affiliate told the brand.
		for _, private := range []string{secret, f.affID, "affiliate@example.test", "advertiser@example.test"} {
			if strings.Contains(r.raw, private) {
				t.Fatalf("%s shows %q: %s", c.path, private, r.raw)
			}
		}
	}
	// A listed approval program has the fields of a public one, no more.
	r = f.do(t, "GET", "/api/v1/programs/"+listed["id"].(string), apiKey(otherKey), "")
	expect(t, r, 200, "")
	read, pub := decode[map[string]any](t, r), decode[map[string]any](t, f.do(t, "GET", "/api/v1/programs/"+public["id"].(string), apiKey(otherKey), ""))
	if !slices.Equal(slices.Sorted(maps.Keys(read)), slices.Sorted(maps.Keys(pub))) {
		t.Fatalf("listed approval fields %v, public fields %v", slices.Sorted(maps.Keys(read)), slices.Sorted(maps.Keys(pub)))
	}
	// The unlisted program stays readable by id, and an affiliate's own programs are its partnerships only.
	expect(t, f.do(t, "GET", "/api/v1/programs/"+unlisted["id"].(string), apiKey(otherKey), ""), 200, "")
	if got := idsOf(t, f.do(t, "GET", "/api/partner-api/programs", apiKey(otherKey), "")); len(got) != 0 {
		t.Fatalf("%s has no partnership but its own programs are %v", otherAff, got)
	}
	expect(t, f.do(t, "GET", "/api/v1/partnerships?program_id="+listed["id"].(string), apiKey(otherKey), ""), 200, "")
	if got := idsOf(t, f.do(t, "GET", "/api/v1/partnerships?program_id="+listed["id"].(string), apiKey(otherKey), "")); len(got) != 0 {
		t.Fatalf("another affiliate reads the partnerships %v", got)
	}
}
