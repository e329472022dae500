package programs_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/page"
	"github.com/partnerstream/partnerstream/internal/programs"
	"github.com/partnerstream/partnerstream/internal/testenv"
	"github.com/partnerstream/partnerstream/internal/testenv/pgtest"
)

// env is a migrated database with two advertisers and two affiliates.
type env struct {
	db        *pgxpool.Pool
	svc       *programs.Service
	clock     *testenv.Clock
	start     time.Time      // the clock's first time
	adv, adv2 programs.Actor // owners
	aff, aff2 programs.Actor // API keys
	advMember programs.Actor
	affMember programs.Actor
	ctx       context.Context
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	_, db := pgtest.Migrated(t)
	e := &env{db: db, ctx: ctx, clock: testenv.NewClock()}
	e.start = e.clock.Now()
	e.svc = programs.NewService(db, programs.Options{Now: e.clock.Now})
	ids := identity.NewStore(db)
	company := func(kind, name string) string {
		co, _, err := ids.CreateCompany(ctx, identity.NewCompany{Kind: kind, Name: name, OwnerEmail: name + "@example.test"})
		if err != nil {
			t.Fatal(err)
		}
		return co.ID
	}
	adv, adv2 := company(identity.Advertiser, "adv"), company(identity.Advertiser, "adv2")
	aff, aff2 := company(identity.Affiliate, "aff"), company(identity.Affiliate, "aff2")
	e.adv = programs.Actor{CompanyID: adv, Kind: identity.Advertiser, Role: "owner"}
	e.adv2 = programs.Actor{CompanyID: adv2, Kind: identity.Advertiser, Role: "admin"}
	e.advMember = programs.Actor{CompanyID: adv, Kind: identity.Advertiser, Role: "member"}
	e.aff = programs.Actor{CompanyID: aff, Kind: identity.Affiliate}
	e.aff2 = programs.Actor{CompanyID: aff2, Kind: identity.Affiliate}
	e.affMember = programs.Actor{CompanyID: aff, Kind: identity.Affiliate, Role: "member"}
	return e
}

func ptr[T any](v T) *T { return &v }

func validInput() programs.ProgramInput {
	return programs.ProgramInput{
		Name: "Shoes", LandingURL: "https://shop.example.com/shoes?x=1", Currency: "EUR",
		Commission: &programs.RuleInput{Type: programs.Fixed, Amount: "5.00"},
	}
}

func (e *env) program(t *testing.T, a programs.Actor, visibility, status string) programs.Program {
	t.Helper()
	in := validInput()
	in.Visibility, in.Status = visibility, status
	p, err := e.svc.CreateProgram(e.ctx, a, in)
	if err != nil {
		t.Fatalf("create program: %v", err)
	}
	return p
}

func (e *env) apply(t *testing.T, a programs.Actor, programID string) programs.Partnership {
	t.Helper()
	p, _, err := e.svc.Apply(e.ctx, a, programs.ApplyInput{ProgramID: programID, Message: "hello"})
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	return p
}

// programIDs lists the ids of the programs a sees through f, sorted.
func (e *env) programIDs(t *testing.T, a programs.Actor, f programs.ProgramFilter) []string {
	t.Helper()
	list, _, err := e.svc.ListPrograms(e.ctx, a, f, page.Request{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range list {
		out = append(out, p.ID)
	}
	slices.Sort(out)
	return out
}

// fields returns the fields named by a validation error, or fails.
func fields(t *testing.T, err error) []string {
	t.Helper()
	var v *programs.ValidationError
	if !errors.As(err, &v) {
		t.Fatalf("err = %v, want a validation error", err)
	}
	var out []string
	for _, f := range v.Fields {
		out = append(out, f.Field)
	}
	return out
}

func TestProgramInputIsValidated(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		name  string
		edit  func(in *programs.ProgramInput)
		field string // "" when valid
	}{
		{"a complete input with defaults is valid", func(*programs.ProgramInput) {}, ""},
		{"an ftp landing URL is refused", func(in *programs.ProgramInput) { in.LandingURL = "ftp://shop.example.com/" }, "landing_url"},
		{"a javascript landing URL is refused", func(in *programs.ProgramInput) { in.LandingURL = "javascript:alert(1)" }, "landing_url"},
		{"a landing URL without host is refused", func(in *programs.ProgramInput) { in.LandingURL = "https:///path" }, "landing_url"},
		{"a relative landing URL is refused", func(in *programs.ProgramInput) { in.LandingURL = "/shoes" }, "landing_url"},
		{"a landing URL with credentials is refused", func(in *programs.ProgramInput) { in.LandingURL = "https://u:p@shop.example.com/" }, "landing_url"},
		{"a landing URL over 2048 bytes is refused", func(in *programs.ProgramInput) {
			in.LandingURL = "https://shop.example.com/" + strings.Repeat("a", 2048)
		}, "landing_url"},
		{"an unknown currency is refused", func(in *programs.ProgramInput) { in.Currency = "EUX" }, "currency"},
		{"a lower-case currency is refused", func(in *programs.ProgramInput) { in.Currency = "eur" }, "currency"},
		{"a missing commission is refused", func(in *programs.ProgramInput) { in.Commission = nil }, "commission"},
		{"an unknown rule type is refused", func(in *programs.ProgramInput) { in.Commission.Type = "tiered" }, "commission.type"},
		{"a percent over 100 is refused", func(in *programs.ProgramInput) {
			in.Commission = &programs.RuleInput{Type: programs.Percent, Percent: "100.01"}
		}, "commission.percent"},
		{"a zero percent is refused", func(in *programs.ProgramInput) {
			in.Commission = &programs.RuleInput{Type: programs.Percent, Percent: "0"}
		}, "commission.percent"},
		{"a percent with 3 decimals is refused", func(in *programs.ProgramInput) {
			in.Commission = &programs.RuleInput{Type: programs.Percent, Percent: "12.345"}
		}, "commission.percent"},
		{"a negative percent is refused", func(in *programs.ProgramInput) {
			in.Commission = &programs.RuleInput{Type: programs.Percent, Percent: "-5"}
		}, "commission.percent"},
		{"a percent of exactly 100 is valid", func(in *programs.ProgramInput) {
			in.Commission = &programs.RuleInput{Type: programs.Percent, Percent: "100"}
		}, ""},
		{"a percent rule with an amount is refused", func(in *programs.ProgramInput) {
			in.Commission = &programs.RuleInput{Type: programs.Percent, Percent: "5", Amount: "1.00"}
		}, "commission.amount"},
		{"an EUR amount with 3 decimals is refused", func(in *programs.ProgramInput) { in.Commission.Amount = "5.001" }, "commission.amount"},
		{"a JPY amount with decimals is refused", func(in *programs.ProgramInput) {
			in.Currency, in.Commission.Amount = "JPY", "500.5"
		}, "commission.amount"},
		{"a JPY amount without decimals is valid", func(in *programs.ProgramInput) { in.Currency, in.Commission.Amount = "JPY", "500" }, ""},
		{"a KWD amount with 3 decimals is valid", func(in *programs.ProgramInput) { in.Currency, in.Commission.Amount = "KWD", "1.125" }, ""},
		{"a zero fixed amount is refused", func(in *programs.ProgramInput) { in.Commission.Amount = "0.00" }, "commission.amount"},
		{"a fixed rule without amount is refused", func(in *programs.ProgramInput) { in.Commission.Amount = "" }, "commission.amount"},
		{"a float-looking amount is refused", func(in *programs.ProgramInput) { in.Commission.Amount = "5e2" }, "commission.amount"},
		{"an attribution window of 0 days is refused", func(in *programs.ProgramInput) { in.AttributionWindowDays = ptr(0) }, "attribution_window_days"},
		{"an attribution window of 366 days is refused", func(in *programs.ProgramInput) { in.AttributionWindowDays = ptr(366) }, "attribution_window_days"},
		{"an attribution window of 365 days is valid", func(in *programs.ProgramInput) { in.AttributionWindowDays = ptr(365) }, ""},
		{"negative hold days are refused", func(in *programs.ProgramInput) { in.HoldDays = ptr(-1) }, "hold_days"},
		{"366 hold days are refused", func(in *programs.ProgramInput) { in.HoldDays = ptr(366) }, "hold_days"},
		{"zero hold days are valid", func(in *programs.ProgramInput) { in.HoldDays = ptr(0) }, ""},
		{"a negative rate age is refused", func(in *programs.ProgramInput) { in.MaxRateAgeDays = ptr(-1) }, "max_rate_age_days"},
		{"a rate age of 366 days is refused", func(in *programs.ProgramInput) { in.MaxRateAgeDays = ptr(366) }, "max_rate_age_days"},
		{"a rate age of 0 days is valid", func(in *programs.ProgramInput) { in.MaxRateAgeDays = ptr(0) }, ""},
		{"an unknown visibility is refused", func(in *programs.ProgramInput) { in.Visibility = "private" }, "visibility"},
		{"a new archived program is refused", func(in *programs.ProgramInput) { in.Status = programs.ProgramArchived }, "status"},
		{"a click parameter with a space is refused", func(in *programs.ProgramInput) { in.ClickParam = "click id" }, "click_param"},
		{"an empty name is refused", func(in *programs.ProgramInput) { in.Name = "   " }, "name"},
		{"a name with a newline is refused", func(in *programs.ProgramInput) { in.Name = "a\nb" }, "name"},
		{"a description over 5000 characters is refused", func(in *programs.ProgramInput) { in.Description = strings.Repeat("é", 5001) }, "description"},
		{"an unknown attribution rule is refused", func(in *programs.ProgramInput) { in.AttributionRule = "any_click" }, "attribution_rule"},
		{"a customer window of 0 days is refused", func(in *programs.ProgramInput) { in.CustomerWindowDays = ptr(0) }, "customer_window_days"},
		{"a customer window of 3651 days is refused", func(in *programs.ProgramInput) { in.CustomerWindowDays = ptr(3651) }, "customer_window_days"},
		{"a customer window of 365 days is valid", func(in *programs.ProgramInput) { in.CustomerWindowDays = ptr(365) }, ""},
		{"recurring for 0 months is refused", func(in *programs.ProgramInput) { in.Commission.Recurring = &programs.Recurring{} }, "commission.recurring.months"},
		{"recurring for 121 months is refused", func(in *programs.ProgramInput) { in.Commission.Recurring = &programs.Recurring{Months: 121} }, "commission.recurring.months"},
		{"recurring for months and life is refused", func(in *programs.ProgramInput) {
			in.Commission.Recurring = &programs.Recurring{Months: 12, Lifetime: true}
		}, "commission.recurring"},
		{"recurring for 12 months is valid", func(in *programs.ProgramInput) { in.Commission.Recurring = &programs.Recurring{Months: 12} }, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := validInput()
			c.edit(&in)
			p, err := e.svc.CreateProgram(e.ctx, e.adv, in)
			if c.field == "" {
				if err != nil {
					t.Fatalf("valid input refused: %v", err)
				}
				return
			}
			if got := fields(t, err); !slices.Contains(got, c.field) {
				t.Fatalf("invalid fields %v, want %s (program %+v)", got, c.field, p)
			}
		})
	}
}

func TestProgramDefaultsAndRuleFormats(t *testing.T) {
	e := newEnv(t)
	p := e.program(t, e.adv, "", "")
	if p.AttributionWindowDays != 30 || p.MaxRateAgeDays != 7 || p.HoldDays != nil || p.Visibility != programs.Approval || p.Status != programs.ProgramActive ||
		p.ClickParam != "ps_click_id" || !p.CreatedAt.Equal(e.start) {
		t.Fatalf("defaults: %+v", p)
	}
	in := validInput()
	in.Commission = &programs.RuleInput{Type: programs.Percent, Percent: "12.5"}
	pct, err := e.svc.CreateProgram(e.ctx, e.adv, in)
	if err != nil {
		t.Fatal(err)
	}
	if pct.Commission.Value != 1250 {
		t.Fatalf("12.5 %% stored as %d basis points, want 1250", pct.Commission.Value)
	}
	for _, c := range []struct {
		rule programs.Rule
		want string
	}{
		{p.Commission, `{"type":"fixed","amount":"5.00","currency":"EUR"}`},
		{pct.Commission, `{"type":"percent","percent":"12.50"}`},
		{programs.Rule{Type: programs.Fixed, Value: 500, Currency: "JPY"}, `{"type":"fixed","amount":"500","currency":"JPY"}`},
	} {
		b, _ := json.Marshal(c.rule)
		if string(b) != c.want {
			t.Errorf("rule JSON %s, want %s", b, c.want)
		}
	}
	got, err := e.svc.Program(e.ctx, e.adv, pct.ID)
	if err != nil || got.Commission != pct.Commission || !got.CreatedAt.Equal(pct.CreatedAt) {
		t.Fatalf("read back %+v %v, want %+v", got, err, pct)
	}
}

func TestProgramUpdates(t *testing.T) {
	e := newEnv(t)
	p := e.program(t, e.adv, programs.Public, "")
	later := e.start.Add(time.Hour)
	e.clock.Set(later)

	var patch programs.ProgramPatch
	mustJSON(t, `{"name":"Boots","hold_days":14,"max_rate_age_days":3,"commission":{"type":"percent","percent":"7"}}`, &patch)
	up, err := e.svc.UpdateProgram(e.ctx, e.adv, p.ID, patch)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := e.svc.Program(e.ctx, e.adv, p.ID); err != nil || got.MaxRateAgeDays != 3 {
		t.Fatalf("rate age read back %+v, %v", got, err)
	}
	if up.Name != "Boots" || *up.HoldDays != 14 || up.MaxRateAgeDays != 3 || up.Commission.Value != 700 || up.LandingURL != p.LandingURL || !up.UpdatedAt.Equal(later) || !up.CreatedAt.Equal(p.CreatedAt) {
		t.Fatalf("updated %+v", up)
	}
	mustJSON(t, `{"hold_days":null}`, &patch)
	if up, err = e.svc.UpdateProgram(e.ctx, e.adv, p.ID, patch); err != nil || up.HoldDays != nil || up.Name != "Boots" {
		t.Fatalf("clear hold days: %+v %v", up, err)
	}

	cases := []struct {
		name  string
		body  string
		field string
	}{
		{"the currency cannot change", `{"currency":"USD"}`, "currency"},
		{"a required field cannot be null", `{"name":null}`, "name"},
		{"the commission cannot be null", `{"commission":null}`, "commission"},
		{"a patched landing URL is validated", `{"landing_url":"data:text/html,hi"}`, "landing_url"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var patch programs.ProgramPatch
			mustJSON(t, c.body, &patch)
			_, err := e.svc.UpdateProgram(e.ctx, e.adv, p.ID, patch)
			if got := fields(t, err); !slices.Contains(got, c.field) {
				t.Fatalf("fields %v, want %s", got, c.field)
			}
		})
	}
	t.Run("the same currency is accepted", func(t *testing.T) {
		var patch programs.ProgramPatch
		mustJSON(t, `{"currency":"EUR"}`, &patch)
		if _, err := e.svc.UpdateProgram(e.ctx, e.adv, p.ID, patch); err != nil {
			t.Fatal(err)
		}
	})
}

func TestProgramStatusTransitions(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		from, to string
		allowed  []string // nil when the move is legal
	}{
		{programs.ProgramActive, programs.ProgramPaused, nil},
		{programs.ProgramActive, programs.ProgramArchived, nil},
		{programs.ProgramPaused, programs.ProgramActive, nil},
		{programs.ProgramPaused, programs.ProgramArchived, nil},
		{programs.ProgramArchived, programs.ProgramActive, []string{}},
		{programs.ProgramArchived, programs.ProgramPaused, []string{}},
	}
	for _, c := range cases {
		t.Run(c.from+" to "+c.to, func(t *testing.T) {
			p := e.program(t, e.adv, "", programs.ProgramActive)
			if c.from != programs.ProgramActive {
				setStatus(t, e, p.ID, c.from)
			}
			var patch programs.ProgramPatch
			mustJSON(t, `{"status":"`+c.to+`"}`, &patch)
			up, err := e.svc.UpdateProgram(e.ctx, e.adv, p.ID, patch)
			if c.allowed == nil {
				if err != nil || up.Status != c.to {
					t.Fatalf("%s -> %s: %v", c.from, c.to, err)
				}
				return
			}
			var te *programs.TransitionError
			if !errors.As(err, &te) || !slices.Equal(te.Allowed, c.allowed) || te.Allowed == nil {
				t.Fatalf("%s -> %s: %v, want a transition error allowing %v", c.from, c.to, err, c.allowed)
			}
		})
	}
}

func setStatus(t *testing.T, e *env, id, status string) {
	t.Helper()
	var patch programs.ProgramPatch
	mustJSON(t, `{"status":"`+status+`"}`, &patch)
	if _, err := e.svc.UpdateProgram(e.ctx, e.adv, id, patch); err != nil {
		t.Fatalf("set status %s: %v", status, err)
	}
}

func mustJSON(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
}

func TestOnlyAdvertiserOwnersAndAdminsWritePrograms(t *testing.T) {
	e := newEnv(t)
	p := e.program(t, e.adv, "", "")
	var patch programs.ProgramPatch
	mustJSON(t, `{"name":"x"}`, &patch)
	var forbidden *programs.ForbiddenError
	for name, err := range map[string]error{
		"an affiliate creating":  second(e.svc.CreateProgram(e.ctx, e.aff, validInput())),
		"a member creating":      second(e.svc.CreateProgram(e.ctx, e.advMember, validInput())),
		"a member updating":      second(e.svc.UpdateProgram(e.ctx, e.advMember, p.ID, patch)),
		"an affiliate updating":  second(e.svc.UpdateProgram(e.ctx, e.aff, p.ID, patch)),
		"a member adding promos": second(e.svc.CreatePromotion(e.ctx, e.advMember, p.ID, programs.PromotionInput{Title: "x"})),
	} {
		if !errors.As(err, &forbidden) {
			t.Errorf("%s: %v, want forbidden", name, err)
		}
	}
	if _, err := e.svc.Program(e.ctx, e.advMember, p.ID); err != nil {
		t.Errorf("a member cannot read: %v", err)
	}
	if _, err := e.svc.UpdateProgram(e.ctx, e.adv2, p.ID, patch); !errors.Is(err, programs.ErrNotFound) {
		t.Errorf("another advertiser updating: %v, want not found", err)
	}
}

func second[T any](_ T, err error) error { return err }

func TestVisibilityAndTenantIsolation(t *testing.T) {
	e := newEnv(t)
	pub := e.program(t, e.adv, programs.Public, "")
	unlisted := e.program(t, e.adv, programs.Approval, "")
	paused := e.program(t, e.adv, programs.Public, programs.ProgramPaused)
	partneredPaused := e.program(t, e.adv, programs.Approval, "")
	rejected := e.program(t, e.adv, programs.Approval, "")
	otherPub := e.program(t, e.adv2, programs.Public, "")
	otherPrivate := e.program(t, e.adv2, programs.Approval, "")

	// aff: pending on partneredPaused (then paused), rejected on rejected.
	e.apply(t, e.aff, partneredPaused.ID)
	setStatus(t, e, partneredPaused.ID, programs.ProgramPaused)
	r := e.apply(t, e.aff, rejected.ID)
	if _, err := e.svc.SetPartnershipStatus(e.ctx, e.adv, r.ID, programs.Rejected); err != nil {
		t.Fatal(err)
	}

	listed := func(a programs.Actor) []string { return e.programIDs(t, a, programs.ProgramFilter{}) }
	sorted := func(s ...string) []string { slices.Sort(s); return s }
	cases := []struct {
		name string
		who  programs.Actor
		want []string
	}{
		{"an advertiser lists all its programs and no other's", e.adv, sorted(pub.ID, unlisted.ID, paused.ID, partneredPaused.ID, rejected.ID)},
		{"the other advertiser lists only its own", e.adv2, sorted(otherPub.ID, otherPrivate.ID)},
		{"an affiliate lists active public programs and its non-rejected partnerships' programs", e.aff, sorted(pub.ID, otherPub.ID, partneredPaused.ID)},
		{"an affiliate without partnerships lists active public programs", e.aff2, sorted(pub.ID, otherPub.ID)},
		{"an unknown company kind lists nothing", programs.Actor{CompanyID: e.aff.CompanyID, Kind: "robot"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := listed(c.who); !slices.Equal(got, c.want) {
				t.Fatalf("listed %v, want %v", got, c.want)
			}
		})
	}

	byID := []struct {
		name    string
		who     programs.Actor
		id      string
		visible bool
	}{
		{"an advertiser reads its own program", e.adv, paused.ID, true},
		{"an advertiser never reads another advertiser's public program", e.adv, otherPub.ID, false},
		{"an advertiser never reads another advertiser's approval program", e.adv, otherPrivate.ID, false},
		{"an affiliate reads an active approval program by id (unlisted)", e.aff2, otherPrivate.ID, true},
		{"an affiliate does not read a paused program without partnership", e.aff2, paused.ID, false},
		{"an affiliate reads a paused program it partners", e.aff, partneredPaused.ID, true},
		{"an unknown id is not found", e.adv, "prg_00000000000000000000000000", false},
		{"a malformed id is not found", e.adv, "../etc", false},
	}
	for _, c := range byID {
		t.Run(c.name, func(t *testing.T) {
			_, err := e.svc.Program(e.ctx, c.who, c.id)
			if c.visible && err != nil || !c.visible && !errors.Is(err, programs.ErrNotFound) {
				t.Fatalf("read = %v, visible %v", err, c.visible)
			}
		})
	}
}

func TestProgramListPagesNewestFirst(t *testing.T) {
	e := newEnv(t)
	var want []string
	for range 5 {
		want = append([]string{e.program(t, e.adv, "", "").ID}, want...)
	}
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		pr, err := page.Parse("2", cursor)
		if err != nil {
			t.Fatal(err)
		}
		list, next, err := e.svc.ListPrograms(e.ctx, e.adv, programs.ProgramFilter{}, pr)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range list {
			got = append(got, p.ID)
		}
		if next == "" {
			break
		}
		cursor = next
		if pages > 5 {
			t.Fatal("pagination does not end")
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("pages %v, want %v", got, want)
	}
	if _, _, err := e.svc.ListPrograms(e.ctx, e.adv, programs.ProgramFilter{Status: "gone"}, page.Request{Limit: 5}); fields(t, err)[0] != "status" {
		t.Fatal("an unknown status filter is not refused")
	}
}
