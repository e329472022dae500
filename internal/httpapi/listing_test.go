package httpapi_test

import (
	"context"
	"fmt"
	"slices"
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
