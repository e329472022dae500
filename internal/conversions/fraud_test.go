package conversions_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/conversions"
	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/fraud"
	"github.com/partnerstream/partnerstream/internal/ids"
)

// fraudRules changes the program's fraud rules as its advertiser.
func (e *env) fraudRules(t testing.TB, program string, changes map[string]fraud.Change) {
	t.Helper()
	if _, err := fraud.New(e.db, e.clock.Now).Update(context.Background(), e.adv, program, changes); err != nil {
		t.Fatal(err)
	}
}

// programWithRules is a new program of the advertiser in EUR, approved by the hold days at
// once, with the affiliate approved in it and the rule changes made; it returns the program
// and the partnership.
func (e *env) programWithRules(t testing.TB, changes map[string]fraud.Change) (string, string) {
	t.Helper()
	zero := 0
	program := e.newProgram(t, e.adv, "EUR", "percent", 1000, &zero)
	ptn := e.partner(t, program, e.aff, "", 0)
	e.fraudRules(t, program, changes)
	return program, ptn
}

// registerAfter reports a sale in program through a click of affiliate made `after` before the
// conversion, with the customer's e-mail when given.
func (e *env) registerAfter(t testing.TB, program, affiliate string, after time.Duration, externalID, email string) conversions.Conversion {
	t.Helper()
	now := e.clock.Now()
	c, created, err := e.svc.Register(context.Background(), e.adv, conversions.NewConversion{
		ClickID: e.click(t, program, affiliate, now.Add(-after)), ExternalID: externalID, Amount: "100.00", OccurredAt: now,
		CustomerEmail: email})
	if err != nil || !created {
		t.Fatalf("Register: %v (created %v)", err, created)
	}
	return c
}

// codes are the acting reason codes of a conversion's verdict, and its shadow ones apart.
func codes(c conversions.Conversion) (acting, shadow []string) {
	for _, f := range c.Commission.Findings {
		if f.Shadow {
			shadow = append(shadow, f.Code)
		} else {
			acting = append(acting, f.Code)
		}
	}
	return acting, shadow
}

func (e *env) get(t testing.TB, id string) conversions.Conversion {
	t.Helper()
	c, err := e.svc.Get(context.Background(), conversions.Viewer{CompanyID: e.adv}, id)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ptr[T any](v T) *T { return &v }

// Each registration-stage rule fires on one side of its boundary and not on the other, and
// what Register answers is what a later read finds.
func TestEachRuleFiresAtItsBoundary(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.fraudRules(t, e.program, map[string]fraud.Change{
		fraud.ConversionTooSlow: {Enabled: ptr(true), Params: map[string]any{"max_seconds": int64(3600)}},
		fraud.DisposableEmail:   {Params: map[string]any{"extra_domains": []string{"temp-shop.example"}}},
	})
	// A user of the affiliate with a Gmail address, beside its owner at example.test.
	if _, err := e.db.Exec(ctx, `INSERT INTO users (id, company_id, email, role) VALUES ($1, $2, 'jane.doe@gmail.com', 'member')`,
		ids.New(ids.User), e.aff); err != nil {
		t.Fatal(err)
	}
	other := e.company(t, "affiliate")
	cases := []struct {
		name      string
		affiliate string
		after     time.Duration
		email     string
		order     string
		want      []string
		value     string // the observed value of the first finding
	}{
		{"9 seconds: too fast", e.aff, 9 * time.Second, "", "", []string{fraud.ConversionTooFast}, "9s"},
		{"10 seconds: not too fast", e.aff, 10 * time.Second, "", "", nil, ""},
		{"an hour: not too slow", e.aff, time.Hour, "", "", nil, ""},
		{"an hour and a second: too slow", e.aff, time.Hour + time.Second, "", "", []string{fraud.ConversionTooSlow}, "3601s"},
		{"the affiliate's user, written otherwise", e.aff, time.Minute, "Jane.Doe+shop@googlemail.com", "", []string{fraud.SelfReferral}, fraud.MatchedUser},
		{"another Gmail user", e.aff, time.Minute, "john.doe@gmail.com", "", nil, ""},
		{"the affiliate's company domain", e.aff, time.Minute, "someone@EXAMPLE.test", "", []string{fraud.SelfReferral}, fraud.MatchedDomain},
		{"a disposable domain", e.aff, time.Minute, "x@mailinator.com", "", []string{fraud.DisposableEmail}, "mailinator.com"},
		{"under a disposable domain", e.aff, time.Minute, "x@in.mailinator.com", "", []string{fraud.DisposableEmail}, "in.mailinator.com"},
		{"the program's own disposable domain", e.aff, time.Minute, "x@temp-shop.example", "", []string{fraud.DisposableEmail}, "temp-shop.example"},
		{"an ordinary domain", e.aff, time.Minute, "x@shop-customer.example", "", nil, ""},
		{"first order of an id", e.aff, time.Minute, "", "Order-77", nil, ""},
		{"the same order id, another case, same affiliate", e.aff, time.Minute, "", "ORDER-77", nil, ""},
		{"the same order id, another affiliate", other, time.Minute, "", "order-77", []string{fraud.DuplicateOrder}, ""},
		{"a customer's first conversion", e.aff, time.Minute, "buyer@customer.example", "", nil, ""},
		{"the same customer, the same affiliate", e.aff, time.Minute, "Buyer+2@customer.example", "", nil, ""},
		{"the same customer, another affiliate", other, time.Minute, "buyer@customer.example", "", []string{fraud.DuplicateCustomer}, ""},
	}
	var firstOrder, firstCustomer string
	for _, tc := range cases {
		order := tc.order
		if order == "" {
			order = ids.New("ord")
		}
		c := e.registerAfter(t, e.program, tc.affiliate, tc.after, order, tc.email)
		switch tc.name {
		case "first order of an id":
			firstOrder = c.ID
		case "a customer's first conversion":
			firstCustomer = c.ID
		}
		acting, shadow := codes(c)
		if !slices.Equal(acting, tc.want) || shadow != nil {
			t.Errorf("%s: fired %v (shadow %v), want %v", tc.name, acting, shadow, tc.want)
			continue
		}
		if got := e.get(t, c.ID); !slices.Equal(codesOf(got), tc.want) {
			t.Errorf("%s: read back %v, want %v", tc.name, codesOf(got), tc.want)
		}
		if len(tc.want) == 0 {
			continue
		}
		value := tc.value
		switch tc.want[0] {
		case fraud.DuplicateOrder:
			value = firstOrder
		case fraud.DuplicateCustomer:
			value = firstCustomer
		}
		f := c.Commission.Findings[0]
		if f.Observed != value || f.Stage != fraud.StageRegistration {
			t.Errorf("%s: observed %q at stage %s, want %q", tc.name, f.Observed, f.Stage, value)
		}
		// Self-referral holds by default; the others flag.
		if held := c.Commission.HeldAt != nil; held != (tc.want[0] == fraud.SelfReferral) {
			t.Errorf("%s: held %v", tc.name, held)
		}
	}
	// A coupon conversion has no click: the time rules do not apply.
	code := "FAST10"
	if _, err := e.db.Exec(ctx, `INSERT INTO coupon_codes (id, advertiser_id, program_id, partnership_id, affiliate_id, code, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, now())`, ids.New(ids.CouponCode), e.adv, e.program, e.ptn, e.aff, code); err != nil {
		t.Fatal(err)
	}
	c, _, err := e.svc.Register(ctx, e.adv, conversions.NewConversion{CouponCode: code, ExternalID: ids.New("ord")})
	if err != nil {
		t.Fatal(err)
	}
	if acting, _ := codes(c); acting != nil {
		t.Errorf("a conversion without a click fired %v", acting)
	}
}

func codesOf(c conversions.Conversion) []string {
	acting, _ := codes(c)
	return acting
}

// The customer's e-mail is stored only as its keyed hash: nothing in the conversion's row
// holds the address, and the same person's addresses give the same hash.
func TestTheCustomerEmailIsKeptOnlyAsAKeyedHash(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := e.registerAfter(t, e.program, e.aff, time.Minute, ids.New("ord"), "Ada.Lovelace+promo@gmail.com")
	b := e.registerAfter(t, e.program, e.aff, time.Minute, ids.New("ord"), "adalovelace@googlemail.com")
	var row string
	var hashA, hashB []byte
	if err := e.db.QueryRow(context.Background(), `SELECT row_to_json(v)::text, v.customer_email_hash,
		(SELECT customer_email_hash FROM conversions WHERE id = $2) FROM conversions v WHERE v.id = $1`, a.ID, b.ID).Scan(&row, &hashA, &hashB); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.ToLower(row), "lovelace") {
		t.Errorf("the conversion's row holds the address: %s", row)
	}
	if len(hashA) != 32 || string(hashA) != string(hashB) {
		t.Errorf("hashes %x and %x, want the same 32 bytes", hashA, hashB)
	}
	if _, _, err := e.svc.Register(context.Background(), e.adv, conversions.NewConversion{ClickID: e.click(t, e.program, e.aff, e.clock.Now().Add(-time.Hour)),
		ExternalID: ids.New("ord"), CustomerEmail: "not an address"}); !isInvalid(err, "customer_email") {
		t.Errorf("a malformed customer_email: %v, want invalid customer_email", err)
	}
}

func isInvalid(err error, field string) bool {
	var inv *conversions.InvalidError
	return errors.As(err, &inv) && inv.Field == field
}

// A held commission is never approved by the hold days nor by hand, and never paid, until it
// is released; a rejection ends the hold. Release is all or nothing, in bulk.
func TestHeldCommissionsWaitForTheAdvertiser(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	program, _ := e.programWithRules(t, map[string]fraud.Change{fraud.ConversionTooFast: {Action: ptr(fraud.ActionHold)}})
	fast := func() conversions.Conversion {
		return e.registerAfter(t, program, e.aff, 2*time.Second, ids.New("ord"), "")
	}
	held1, held2, held3 := fast(), fast(), fast()
	honest := e.registerAfter(t, program, e.aff, time.Hour, ids.New("ord"), "")
	for _, c := range []conversions.Conversion{held1, held2, held3} {
		if c.Commission.HeldAt == nil {
			t.Fatalf("%s is not held: %+v", c.ID, c.Commission.Findings)
		}
	}
	if honest.Commission.HeldAt != nil || honest.Commission.Findings != nil {
		t.Fatalf("the honest conversion has a verdict: %+v", honest.Commission.Findings)
	}

	// The hold days (0) approve only the honest one.
	if n, err := e.svc.ApproveDue(ctx, e.clock.Now().Add(time.Hour)); err != nil || n != 1 {
		t.Fatalf("ApproveDue approved %d (%v), want 1", n, err)
	}
	if _, err := e.svc.ChangeStatus(ctx, e.adv, held1.ID, conversions.Approved, ""); !errors.Is(err, conversions.ErrHeld) {
		t.Errorf("approving a held commission by hand: %v, want ErrHeld", err)
	}
	var bulk *conversions.BulkError
	if _, err := e.svc.ApproveMany(ctx, e.adv, []string{held1.ID}); !errors.As(err, &bulk) || bulk.Failures[0].Code != "held" {
		t.Errorf("approving a held commission in bulk: %v, want a failure held", err)
	}
	// A payout gathers the honest commission only.
	p, err := e.svc.CreatePayout(ctx, e.adv, conversions.NewPayout{AffiliateID: e.aff, Currency: "EUR",
		PeriodStart: e.clock.Now().Add(-24 * time.Hour), PeriodEnd: e.clock.Now().Add(time.Hour)})
	if err != nil || p.CommissionCount != 1 {
		t.Fatalf("payout of %d commissions (%v), want the honest one", p.CommissionCount, err)
	}

	// Releasing a batch with one that is not held, or not the advertiser's, changes nothing.
	other := newEnv(t)
	stranger := other.register(t, ids.New("ord"), "10.00")
	if _, err := e.svc.Release(ctx, e.adv, []string{held1.ID, honest.ID, stranger.ID}); !errors.As(err, &bulk) ||
		len(bulk.Failures) != 2 || bulk.Failures[0].Code != "not_held" || bulk.Failures[1].Code != "not_found" {
		t.Fatalf("release of a mixed batch: %v (%+v)", err, bulk)
	}
	if e.get(t, held1.ID).Commission.HeldAt == nil {
		t.Fatal("a failed release released a commission")
	}
	if _, err := e.svc.Release(ctx, e.adv, make([]string, conversions.MaxBulk+1)); !isInvalid(err, "ids") {
		t.Errorf("a release of %d ids: %v, want invalid ids", conversions.MaxBulk+1, err)
	}
	released, err := e.svc.Release(ctx, e.adv, []string{held1.ID, held2.ID})
	if err != nil || len(released) != 2 || released[0].Commission.HeldAt != nil {
		t.Fatalf("Release: %v", err)
	}
	// Rejecting the third ends its hold.
	rejected, err := e.svc.RejectMany(ctx, e.adv, []string{held3.ID}, "bot")
	if err != nil || rejected[0].Commission.HeldAt != nil || rejected[0].Commission.Status != conversions.Rejected {
		t.Fatalf("RejectMany: %v %+v", err, rejected)
	}
	// Released, they go back to the normal flow: the hold days approve them.
	if n, err := e.svc.ApproveDue(ctx, e.clock.Now().Add(time.Hour)); err != nil || n != 2 {
		t.Fatalf("ApproveDue after the release approved %d (%v), want 2", n, err)
	}

	// The events: registration adds commission.held, the release commission.released, each
	// carrying the verdict and its reason code.
	evs := e.outboxFor(t, held1.ID)
	var types []string
	for _, ev := range evs {
		types = append(types, ev.envelope.Type)
		if ev.data.Risk == nil || !slices.Equal(ev.data.Risk.ReasonCodes(), []string{fraud.ConversionTooFast}) {
			t.Errorf("%s carries risk %+v, want conversion_too_fast", ev.envelope.Type, ev.data.Risk)
		}
	}
	want := []string{events.ConversionCreated, events.CommissionStatusChanged, events.CommissionHeld, events.CommissionReleased,
		events.ConversionApproved, events.CommissionStatusChanged}
	if !slices.Equal(types, want) {
		t.Fatalf("events %v, want %v", types, want)
	}
	if !evs[2].data.Risk.Held || evs[3].data.Risk.Held || evs[2].data.Version != 1 || evs[3].data.Version != 2 {
		t.Errorf("held event %+v v%d, released event %+v v%d", evs[2].data.Risk, evs[2].data.Version, evs[3].data.Risk, evs[3].data.Version)
	}
	if n := e.count(t, `SELECT count(*) FROM outbox WHERE aggregate_id = $1`, honest.ID); n != 4 {
		t.Errorf("the honest conversion has %d events, want created, status changed, approved, status changed", n)
	}
}

// A rule in shadow decides and records, and changes nothing: no hold, nothing in the events,
// the hold days approve the commission. A rule switched off for a partnership does not run.
func TestShadowRulesAndExemptionsChangeNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	program, ptn := e.programWithRules(t, map[string]fraud.Change{fraud.ConversionTooFast: {Action: ptr(fraud.ActionHold), Shadow: ptr(true)}})
	c := e.registerAfter(t, program, e.aff, time.Second, ids.New("ord"), "")
	acting, shadow := codes(c)
	if acting != nil || !slices.Equal(shadow, []string{fraud.ConversionTooFast}) || c.Commission.HeldAt != nil {
		t.Fatalf("shadow: acting %v, shadow %v, held %v", acting, shadow, c.Commission.HeldAt)
	}
	for _, ev := range e.outboxFor(t, c.ID) {
		if ev.data.Risk != nil || ev.envelope.Type == events.CommissionHeld {
			t.Errorf("a shadow verdict reached event %s: %+v", ev.envelope.Type, ev.data.Risk)
		}
	}
	if n, err := e.svc.ApproveDue(ctx, e.clock.Now().Add(time.Minute)); err != nil || n != 1 {
		t.Fatalf("ApproveDue approved %d (%v), want the shadow-flagged one", n, err)
	}

	svc := fraud.New(e.db, e.clock.Now)
	if _, err := svc.SetExemptions(ctx, e.adv, ptn, []string{fraud.ConversionTooFast}); err != nil {
		t.Fatal(err)
	}
	if c := e.registerAfter(t, program, e.aff, time.Second, ids.New("ord"), ""); c.Commission.Findings != nil {
		t.Errorf("a rule switched off for the partnership fired: %+v", c.Commission.Findings)
	}
}

// A company never reads or changes another's rules, exemptions or verdicts.
func TestFraudRulesAreTheAdvertisersOwn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	svc := fraud.New(e.db, e.clock.Now)
	intruder := e.company(t, "advertiser")
	if _, err := svc.Get(ctx, intruder, e.program); !errors.Is(err, fraud.ErrNotFound) {
		t.Errorf("another advertiser read the rules: %v", err)
	}
	if _, err := svc.Update(ctx, intruder, e.program, map[string]fraud.Change{fraud.SelfReferral: {Enabled: ptr(false)}}); !errors.Is(err, fraud.ErrNotFound) {
		t.Errorf("another advertiser changed the rules: %v", err)
	}
	if _, err := svc.SetExemptions(ctx, intruder, e.ptn, []string{fraud.SelfReferral}); !errors.Is(err, fraud.ErrNotFound) {
		t.Errorf("another advertiser switched a rule off: %v", err)
	}
	p, err := svc.Get(ctx, e.adv, e.program)
	if err != nil || p.UpdatedAt != nil || len(p.Exemptions) != 0 || !p.Settings[fraud.SelfReferral].Enabled {
		t.Fatalf("the owner's rules changed: %+v, %v", p, err)
	}
	c := e.registerAfter(t, e.program, e.aff, time.Second, ids.New("ord"), "")
	if _, err := e.svc.Get(ctx, conversions.Viewer{CompanyID: intruder}, c.ID); !errors.Is(err, conversions.ErrNotFound) {
		t.Errorf("another advertiser read the verdict: %v", err)
	}
	if _, err := e.svc.Release(ctx, intruder, []string{c.ID}); err == nil {
		t.Error("another advertiser released a commission")
	}
	// Invalid changes name the field and change nothing.
	_, err = svc.Update(ctx, e.adv, e.program, map[string]fraud.Change{
		"no_such_rule":          {Enabled: ptr(true)},
		fraud.ConversionTooFast: {Params: map[string]any{"min_seconds": int64(0)}},
		fraud.ConversionTooSlow: {Params: map[string]any{"max_seconds": int64(fraud.MaxMaxSeconds + 1)}},
		fraud.DisposableEmail:   {Params: map[string]any{"extra_domains": make([]string, fraud.MaxListDomains+1)}},
		fraud.SelfReferral:      {Action: ptr("block")},
	})
	var v *fraud.ValidationError
	if !errors.As(err, &v) {
		t.Fatalf("invalid changes: %v", err)
	}
	var fields []string
	for _, f := range v.Fields {
		fields = append(fields, f.Field)
	}
	want := []string{"rules.conversion_too_fast.params.min_seconds", "rules.conversion_too_slow.params.max_seconds",
		"rules.disposable_email.params.extra_domains", "rules.no_such_rule", "rules.self_referral.action"}
	if !slices.Equal(fields, want) {
		t.Errorf("invalid fields %v, want %v", fields, want)
	}
	if p, _ := svc.Get(ctx, e.adv, e.program); p.UpdatedAt != nil {
		t.Error("an invalid change was stored")
	}
}

// A later stage adds its verdicts to an existing commission and holds it then, even once
// approved (a payout then skips it); a rule decided twice keeps its first verdict, and a
// commission in a payout or decided for good is recorded but not held.
func TestALaterStageAddsVerdictsAndHolds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	now := e.clock.Now()
	finding := func(code, action, observed string, shadow bool) fraud.Finding {
		return fraud.Finding{Code: code, Action: action, Observed: observed, Shadow: shadow, Stage: fraud.StageClick, DecidedAt: now}
	}
	c := e.registerAfter(t, e.program, e.aff, time.Hour, ids.New("ord"), "")
	if _, err := e.svc.ChangeStatus(ctx, e.adv, c.ID, conversions.Approved, ""); err != nil {
		t.Fatal(err)
	}
	got, err := e.svc.AddVerdicts(ctx, c.ID, []fraud.Finding{finding("hosting_network", fraud.ActionHold, "AS16509", false),
		finding("click_velocity", fraud.ActionHold, "12 clicks", true)})
	if err != nil {
		t.Fatal(err)
	}
	acting, shadow := codes(got)
	if got.Commission.HeldAt == nil || got.Commission.Version != 3 || !slices.Equal(acting, []string{"hosting_network"}) ||
		!slices.Equal(shadow, []string{"click_velocity"}) {
		t.Fatalf("after the click stage: held %v, version %d, acting %v, shadow %v", got.Commission.HeldAt, got.Commission.Version, acting, shadow)
	}
	if _, err := e.svc.CreatePayout(ctx, e.adv, conversions.NewPayout{AffiliateID: e.aff, Currency: "EUR",
		PeriodStart: now.Add(-24 * time.Hour), PeriodEnd: now.Add(time.Hour)}); !errors.Is(err, conversions.ErrNoCommissions) {
		t.Errorf("a payout of a held approved commission: %v, want ErrNoCommissions", err)
	}
	// Decided again: nothing new, no second event.
	again, err := e.svc.AddVerdicts(ctx, c.ID, []fraud.Finding{finding("hosting_network", fraud.ActionHold, "AS0", false)})
	if i := slices.IndexFunc(again.Commission.Findings, func(f fraud.Finding) bool { return f.Code == "hosting_network" }); err != nil ||
		again.Commission.Version != 3 || len(again.Commission.Findings) != 2 || again.Commission.Findings[i].Observed != "AS16509" {
		t.Fatalf("decided again: %v, %+v", err, again.Commission)
	}
	evs := e.outboxFor(t, c.ID)
	last := evs[len(evs)-1]
	if len(evs) != 5 || last.envelope.Type != events.CommissionHeld || last.data.Version != 3 || !last.data.Risk.Held ||
		!slices.Equal(last.data.Risk.ReasonCodes(), []string{"hosting_network"}) {
		t.Fatalf("%d events, the last %s %+v", len(evs), last.envelope.Type, last.data)
	}
	// Rejected for good: recorded, not held.
	r := e.registerAfter(t, e.program, e.aff, time.Hour, ids.New("ord"), "")
	if _, err := e.svc.ChangeStatus(ctx, e.adv, r.ID, conversions.Rejected, ""); err != nil {
		t.Fatal(err)
	}
	if got, err := e.svc.AddVerdicts(ctx, r.ID, []fraud.Finding{finding("hosting_network", fraud.ActionHold, "AS1", false)}); err != nil ||
		got.Commission.HeldAt != nil || len(got.Commission.Findings) != 1 {
		t.Errorf("a rejected commission: %v, %+v", err, got.Commission)
	}
}
