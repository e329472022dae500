package programs_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/partnerstream/partnerstream/internal/page"
	"github.com/partnerstream/partnerstream/internal/programs"
)

func listingInput(name, visibility string, categories ...string) programs.ProgramInput {
	in := validInput()
	in.Name, in.Visibility, in.Categories = name, visibility, categories
	in.Description = name + " for people who care"
	return in
}

func TestListingSearchKeepsEachCompanysScope(t *testing.T) {
	e := newEnv(t)
	create := func(a programs.Actor, in programs.ProgramInput) programs.Program {
		t.Helper()
		p, err := e.svc.CreateProgram(e.ctx, a, in)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	shoes := create(e.adv, listingInput("Shoes", programs.Public, "fashion"))
	hidden := create(e.adv2, listingInput("Secret shoes", programs.Approval, "fashion"))
	travel := create(e.adv2, listingInput("Trips", programs.Public, "travel"))
	if shoes.AdvertiserName != "adv" {
		t.Fatalf("brand name %q", shoes.AdvertiserName)
	}
	for _, c := range []struct {
		name string
		a    programs.Actor
		f    programs.ProgramFilter
		want []string
	}{
		{"an unlisted program stays unlisted in a search", e.aff, programs.ProgramFilter{Query: "shoes"}, []string{shoes.ID}},
		{"by category", e.aff, programs.ProgramFilter{Category: "fashion"}, []string{shoes.ID}},
		{"by brand name, any case", e.aff, programs.ProgramFilter{Query: "ADV2"}, []string{travel.ID}},
		{"a brand searches only its own", e.adv2, programs.ProgramFilter{Query: "shoes"}, []string{hidden.ID}},
		{"text and category together", e.adv2, programs.ProgramFilter{Query: "trips", Category: "fashion"}, nil},
		{"the pattern characters are plain text", e.aff, programs.ProgramFilter{Query: "%"}, nil},
	} {
		if got := e.programIDs(t, c.a, c.f); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	_, _, err := e.svc.ListPrograms(e.ctx, e.aff, programs.ProgramFilter{Category: "pets"}, page.Request{Limit: 50})
	var invalid *programs.ValidationError
	if !errors.As(err, &invalid) {
		t.Fatalf("unknown category: %v", err)
	}
}

func TestListingFieldsAreValidatedAndPatched(t *testing.T) {
	e := newEnv(t)
	in := listingInput("Shoes", programs.Public, "fashion", "health")
	in.Website, in.Terms = "https://shoes.example", "No coupon sites."
	in.Questions = []programs.Question{{Text: "  Your site?  ", Required: true}}
	p, err := e.svc.CreateProgram(e.ctx, e.adv, in)
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.svc.Program(e.ctx, e.aff, p.ID)
	if err != nil || got.Website != in.Website || got.Terms != in.Terms || !slices.Equal(got.Categories, in.Categories) ||
		len(got.Questions) != 1 || got.Questions[0] != (programs.Question{Text: "Your site?", Required: true}) {
		t.Fatalf("read %+v %v", got, err)
	}
	var patch programs.ProgramPatch
	if err := json.Unmarshal([]byte(`{"categories":[],"questions":[],"website":""}`), &patch); err != nil {
		t.Fatal(err)
	}
	cleared, err := e.svc.UpdateProgram(e.ctx, e.adv, p.ID, patch)
	if err != nil || len(cleared.Categories) != 0 || len(cleared.Questions) != 0 || cleared.Website != "" || cleared.Terms != in.Terms || cleared.AdvertiserName != "adv" {
		t.Fatalf("cleared %+v %v", cleared, err)
	}
	for body, field := range map[string]string{
		`{"categories":null}`:                    "categories",
		`{"website":"https://u:p@x.example"}`:    "website",
		`{"categories":["a","b","c","d"]}`:       "categories",
		`{"questions":[{"text":"q\u0007"}]}`:     "questions[0].text",
		`{"terms":"` + longText(10001) + `"}`:    "terms",
		`{"website":"https://x.example/ a b c"}`: "website",
	} {
		var pp programs.ProgramPatch
		if err := json.Unmarshal([]byte(body), &pp); err != nil {
			t.Fatal(err)
		}
		_, err := e.svc.UpdateProgram(e.ctx, e.adv, p.ID, pp)
		var invalid *programs.ValidationError
		if !errors.As(err, &invalid) || !slices.ContainsFunc(invalid.Fields, func(f programs.FieldError) bool { return f.Field == field }) {
			t.Errorf("%s: %v, want an error on %s", body, err, field)
		}
	}
}

func longText(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'x'
	}
	return string(b)
}

func TestOnboardingFollowsTheBrandsSteps(t *testing.T) {
	e := newEnv(t)
	o, err := e.svc.Onboarding(e.ctx, e.adv)
	if err != nil || o.Program != nil || o.Steps != (programs.OnboardingSteps{}) || o.Done || o.Dismissed {
		t.Fatalf("new brand %+v %v", o, err)
	}
	in := validInput()
	in.Visibility, in.Commission = programs.Public, &programs.RuleInput{Type: programs.Percent, Percent: "12.5"}
	p, err := e.svc.CreateProgram(e.ctx, e.adv, in)
	if err != nil {
		t.Fatal(err)
	}
	tc, err := e.svc.RegisterTestConversion(e.ctx, e.adv, programs.TestFromDashboard, programs.TestConversionInput{ProgramID: p.ID, ExternalID: "t-1", Amount: "10.01"})
	if err != nil || !tc.Test || tc.Commission != "1.25" || tc.Amount != "10.01" || tc.Currency != "EUR" {
		t.Fatalf("test conversion %+v %v", tc, err)
	}
	o, _ = e.svc.Onboarding(e.ctx, e.adv)
	if !o.Steps.Program || !o.Steps.TestConversion || o.Steps.Tracking || o.LastTest == nil || o.LastTest.ID != tc.ID {
		t.Fatalf("after a dashboard test %+v", o)
	}
	if _, err := e.svc.RegisterTestConversion(e.ctx, e.adv2, programs.TestFromAPI, programs.TestConversionInput{ProgramID: p.ID, ExternalID: "t-2"}); !errors.Is(err, programs.ErrNotFound) {
		t.Fatalf("another brand's program: %v", err)
	}
	if _, err := e.svc.RegisterTestConversion(e.ctx, e.adv, programs.TestFromAPI, programs.TestConversionInput{ProgramID: p.ID, ExternalID: "t-2"}); err != nil {
		t.Fatal(err)
	}
	e.apply(t, e.aff, p.ID)
	o, _ = e.svc.Onboarding(e.ctx, e.adv)
	if !o.Done || o.Dismissed {
		t.Fatalf("every step done %+v", o)
	}
	// The other brand's onboarding sees none of it.
	if o2, _ := e.svc.Onboarding(e.ctx, e.adv2); o2.Steps != (programs.OnboardingSteps{}) || o2.LastTest != nil {
		t.Fatalf("another brand's onboarding %+v", o2)
	}
	if _, err := e.svc.DismissOnboarding(e.ctx, e.advMember); err == nil {
		t.Fatal("a member dismissed the company's onboarding")
	}
	if o, err := e.svc.DismissOnboarding(e.ctx, e.adv); err != nil || !o.Dismissed {
		t.Fatalf("dismiss %+v %v", o, err)
	}
	if _, err := e.svc.Onboarding(e.ctx, e.aff); err == nil {
		t.Fatal("an affiliate has a brand's onboarding")
	}
}

func TestApplicationAnswers(t *testing.T) {
	e := newEnv(t)
	in := validInput()
	in.Questions = []programs.Question{{Text: "Where?", Required: true}, {Text: "How many?"}}
	p, err := e.svc.CreateProgram(e.ctx, e.adv, in)
	if err != nil {
		t.Fatal(err)
	}
	for _, answers := range [][]string{nil, {"  "}, {"a", "b", "c"}, {"a", longText(2001)}} {
		if _, _, err := e.svc.Apply(e.ctx, e.aff, programs.ApplyInput{ProgramID: p.ID, Answers: answers}); err == nil {
			t.Errorf("answers %q accepted", answers)
		}
	}
	ps, created, err := e.svc.Apply(e.ctx, e.aff, programs.ApplyInput{ProgramID: p.ID, Answers: []string{" My blog "}})
	want := []programs.Answer{{Question: "Where?", Answer: "My blog"}, {Question: "How many?", Answer: ""}}
	if err != nil || !created || !slices.Equal(ps.Answers, want) {
		t.Fatalf("apply %+v %v %v", ps, created, err)
	}
	// A later edit of the questions leaves the answers as they were asked.
	var patch programs.ProgramPatch
	_ = json.Unmarshal([]byte(`{"questions":[{"text":"Something else?"}]}`), &patch)
	if _, err := e.svc.UpdateProgram(e.ctx, e.adv, p.ID, patch); err != nil {
		t.Fatal(err)
	}
	list, _, err := e.svc.ListPartnerships(e.ctx, e.adv, programs.PartnershipFilter{ProgramID: p.ID}, page.Request{Limit: 10})
	if err != nil || len(list) != 1 || !slices.Equal(list[0].Answers, want) {
		t.Fatalf("the brand reads %+v %v", list, err)
	}
	other, _, _ := e.svc.ListPartnerships(e.ctx, e.adv2, programs.PartnershipFilter{}, page.Request{Limit: 10})
	if len(other) != 0 {
		t.Fatalf("another brand reads %+v", other)
	}
}

func TestListedApprovalPrograms(t *testing.T) {
	e := newEnv(t)
	unlisted := e.program(t, e.adv, programs.Approval, "")
	if unlisted.Listed {
		t.Fatal("a new approval program is listed by default")
	}
	in := listingInput("Listed shoes", programs.Approval, "fashion")
	in.Listed = ptr(true)
	listed, err := e.svc.CreateProgram(e.ctx, e.adv, in)
	if err != nil || !listed.Listed {
		t.Fatalf("create listed %+v %v", listed, err)
	}
	pub := e.program(t, e.adv2, programs.Public, "")
	if !pub.Listed {
		t.Fatal("a public program is not listed")
	}
	in = listingInput("Public", programs.Public)
	in.Listed = ptr(false)
	if got := fields(t, errOf(e.svc.CreateProgram(e.ctx, e.adv, in))); !slices.Equal(got, []string{"listed"}) {
		t.Fatalf("an unlisted public program: %v", got)
	}
	ids := func(a programs.Actor, f programs.ProgramFilter) []string { return e.programIDs(t, a, f) }
	sorted := func(s ...string) []string { slices.Sort(s); return s }
	if got := ids(e.aff, programs.ProgramFilter{}); !slices.Equal(got, sorted(listed.ID, pub.ID)) {
		t.Fatalf("the listing %v, want the listed approval program and the public one", got)
	}
	if got := ids(e.aff, programs.ProgramFilter{Query: "listed", Category: "fashion"}); !slices.Equal(got, []string{listed.ID}) {
		t.Fatalf("a search %v", got)
	}
	if _, err := e.svc.Program(e.ctx, e.aff, unlisted.ID); err != nil {
		t.Fatalf("an unlisted program stays readable by id: %v", err)
	}
	// Applying to a listed approval program waits for the brand, as by id.
	if ps := e.apply(t, e.aff, listed.ID); ps.Status != programs.Pending {
		t.Fatalf("applied %+v", ps)
	}
	// A paused listed program leaves the listing of those who have no partnership.
	setStatus(t, e, listed.ID, programs.ProgramPaused)
	if got := ids(e.aff2, programs.ProgramFilter{}); !slices.Equal(got, []string{pub.ID}) {
		t.Fatalf("paused: %v", got)
	}
	setStatus(t, e, listed.ID, programs.ProgramActive)

	patchJSON := func(id, body string) (programs.Program, error) {
		var pp programs.ProgramPatch
		if err := json.Unmarshal([]byte(body), &pp); err != nil {
			t.Fatal(err)
		}
		return e.svc.UpdateProgram(e.ctx, e.adv, id, pp)
	}
	for _, c := range []struct {
		id, body string
		listed   bool
	}{
		{unlisted.ID, `{"listed":true}`, true},
		{unlisted.ID, `{"name":"Renamed"}`, true},
		{unlisted.ID, `{"listed":false}`, false},
		{unlisted.ID, `{"visibility":"public"}`, true},
		// Made approval again, it leaves the listing unless the patch keeps it there.
		{unlisted.ID, `{"visibility":"approval"}`, false},
		{unlisted.ID, `{"visibility":"public","listed":true}`, true},
		{unlisted.ID, `{"visibility":"approval","listed":true}`, true},
	} {
		p, err := patchJSON(c.id, c.body)
		if err != nil || p.Listed != c.listed {
			t.Fatalf("%s: listed %v %v, want %v", c.body, p.Listed, err, c.listed)
		}
		if got, _ := e.svc.Program(e.ctx, e.adv, c.id); got.Listed != c.listed {
			t.Fatalf("%s: read back listed %v", c.body, got.Listed)
		}
	}
	for body, field := range map[string]string{
		`{"listed":null}`:                        "listed",
		`{"visibility":"public","listed":false}`: "listed",
	} {
		_, err := patchJSON(listed.ID, body)
		if got := fields(t, err); !slices.Contains(got, field) {
			t.Errorf("%s: %v, want %s", body, got, field)
		}
	}
}

// errOf keeps the error of a call.
func errOf[T any](_ T, err error) error { return err }
