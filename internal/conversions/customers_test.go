package conversions_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/conversions"
	"github.com/partnerstream/partnerstream/internal/ids"
)

// set changes the program (or a partnership) directly: internal/programs owns the routes.
func (e *env) set(t testing.TB, sql string, args ...any) {
	t.Helper()
	if _, err := e.db.Exec(context.Background(), sql, args...); err != nil {
		t.Fatal(err)
	}
}

// coupon gives the affiliate's partnership of program a code.
func (e *env) coupon(t testing.TB, program, affiliate, code string) {
	t.Helper()
	e.set(t, `INSERT INTO coupon_codes (id, advertiser_id, program_id, partnership_id, affiliate_id, code, created_at)
		SELECT $1, advertiser_id, program_id, id, affiliate_id, $4, now() FROM partnerships WHERE program_id = $2 AND affiliate_id = $3`,
		ids.New(ids.CouponCode), program, affiliate, code)
}

// convert registers a conversion of the advertiser and fails the test on an error.
func (e *env) convert(t testing.TB, advertiser string, in conversions.NewConversion) conversions.Conversion {
	t.Helper()
	if in.Amount == "" {
		in.Amount = "42.50"
	}
	c, _, err := e.svc.Register(context.Background(), advertiser, in)
	if err != nil {
		t.Fatalf("Register %s: %v", in.ExternalID, err)
	}
	return c
}

// start is a month start long enough ago that 14 monthly renewals are all in the past, and
// not before the click ids' clock begins (2025).
func (e *env) start() time.Time {
	return time.Date(2025, 1, 15, 9, 0, 0, 0, time.UTC)
}

func TestARecurringRuleOfTwelveMonthsPaysTwelveMonthlyPayments(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.set(t, `UPDATE programs SET recurring_months = 12 WHERE id = $1`, e.program)
	t0 := e.start()
	first := e.convert(t, e.adv, conversions.NewConversion{ClickID: e.click(t, e.program, e.aff, t0.Add(-time.Hour)),
		CustomerID: "cus-1", ExternalID: "inv-0", OccurredAt: t0})
	if first.Attribution != conversions.AttributionClick || first.CustomerID != "cus-1" || first.Commission.Amount != 425 {
		t.Fatalf("first payment: %+v", first)
	}
	earning := 1
	for m := 1; m < 14; m++ {
		c := e.convert(t, e.adv, conversions.NewConversion{CustomerID: "cus-1", ExternalID: fmt.Sprintf("inv-%d", m),
			Type: conversions.TypeRenewal, OccurredAt: t0.AddDate(0, m, 0)})
		if c.Attribution != conversions.AttributionCustomer || c.AffiliateID != e.aff || c.PartnershipID != e.ptn || c.ClickID != "" {
			t.Fatalf("renewal %d: %+v", m, c)
		}
		want := int64(0)
		if m < 12 {
			want = 425
		}
		if c.Commission.Amount != want {
			t.Fatalf("renewal %d earns %d, want %d", m, c.Commission.Amount, want)
		}
		if c.Commission.Amount > 0 {
			earning++
		}
	}
	if earning != 12 {
		t.Fatalf("%d payments earned, want 12", earning)
	}
	// The period ends 12 months after the first conversion: the last second in it earns,
	// the first second after it (and the one after that) earns nothing.
	end := t0.AddDate(0, 12, 0)
	for _, c := range []struct {
		at   time.Time
		want int64
	}{{end.Add(-time.Second), 425}, {end, 0}, {end.Add(time.Second), 0}} {
		got := e.convert(t, e.adv, conversions.NewConversion{CustomerID: "cus-1", ExternalID: "edge-" + c.at.Format(time.RFC3339),
			Type: conversions.TypeRenewal, OccurredAt: c.at})
		if got.Commission.Amount != c.want {
			t.Fatalf("renewal at %s earns %d, want %d", c.at, got.Commission.Amount, c.want)
		}
	}
}

func TestWithoutRecurringOnlyTheCustomersFirstConversionEarns(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	t0 := e.start()
	e.convert(t, e.adv, conversions.NewConversion{ClickID: e.click(t, e.program, e.aff, t0), CustomerID: "c", ExternalID: "o-1", OccurredAt: t0})
	again := e.convert(t, e.adv, conversions.NewConversion{CustomerID: "c", ExternalID: "o-2", OccurredAt: t0.Add(time.Hour)})
	if again.Attribution != conversions.AttributionCustomer || again.AffiliateID != e.aff || again.Commission.Amount != 0 {
		t.Fatalf("second conversion: %+v", again)
	}
	// Not even with a fresh click of the same affiliate: the customer is not new.
	clicked := e.convert(t, e.adv, conversions.NewConversion{ClickID: e.click(t, e.program, e.aff, t0.Add(2*time.Hour)), CustomerID: "c",
		ExternalID: "o-3", OccurredAt: t0.Add(2 * time.Hour)})
	if clicked.Attribution != conversions.AttributionClick || clicked.Commission.Amount != 0 {
		t.Fatalf("clicked second conversion: %+v", clicked)
	}
	// A conversion without a customer id is a first conversion, as always.
	if c := e.register(t, "o-4", "42.50"); c.Commission.Amount != 425 {
		t.Fatalf("without a customer: %+v", c)
	}
}

func TestALifetimeRuleOfThePartnershipPaysForYears(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// The partnership's own rule replaces the program's, its recurring part included.
	e.set(t, `UPDATE partnerships SET commission_type = 'fixed', commission_value = 300, recurring_lifetime = true WHERE id = $1`, e.ptn)
	t0 := e.start()
	e.convert(t, e.adv, conversions.NewConversion{ClickID: e.click(t, e.program, e.aff, t0), CustomerID: "c", ExternalID: "o-1", OccurredAt: t0})
	later := e.convert(t, e.adv, conversions.NewConversion{CustomerID: "c", ExternalID: "o-2", OccurredAt: e.clock.Now().Add(-time.Minute)})
	if later.Commission.Amount != 300 || later.Commission.RuleType != "fixed" {
		t.Fatalf("lifetime renewal: %+v", later.Commission)
	}
}

func TestTheCustomerWindowEndsTheBinding(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.set(t, `UPDATE programs SET customer_window_days = 30, recurring_lifetime = true WHERE id = $1`, e.program)
	t0 := e.start()
	e.convert(t, e.adv, conversions.NewConversion{ClickID: e.click(t, e.program, e.aff, t0), CustomerID: "c", ExternalID: "o-1", OccurredAt: t0})
	end := t0.AddDate(0, 0, 30)
	if c := e.convert(t, e.adv, conversions.NewConversion{CustomerID: "c", ExternalID: "o-2", OccurredAt: end.Add(-time.Second)}); c.Commission.Amount != 425 {
		t.Fatalf("inside the window: %+v", c)
	}
	_, _, err := e.svc.Register(context.Background(), e.adv, conversions.NewConversion{CustomerID: "c", ExternalID: "o-3", Amount: "1", OccurredAt: end})
	if !errors.Is(err, conversions.ErrCustomerExpired) {
		t.Fatalf("at the end of the window: %v, want ErrCustomerExpired", err)
	}
	// A new touch binds the customer again, from then on.
	other := e.company(t, "affiliate")
	e.partner(t, e.program, other, "", 0)
	c := e.convert(t, e.adv, conversions.NewConversion{ClickID: e.click(t, e.program, other, end), CustomerID: "c", ExternalID: "o-4", OccurredAt: end})
	if c.AffiliateID != other || c.Commission.Amount != 425 {
		t.Fatalf("rebound: %+v", c)
	}
	if c := e.convert(t, e.adv, conversions.NewConversion{CustomerID: "c", ExternalID: "o-5", OccurredAt: end.Add(time.Hour)}); c.AffiliateID != other {
		t.Fatalf("after rebinding: %+v", c)
	}
}

func TestAClickOfAnotherAffiliateStealsACustomerOnlyUnderLastClick(t *testing.T) {
	t.Parallel()
	for _, rule := range []string{"first_affiliate", "last_click"} {
		t.Run(rule, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.set(t, `UPDATE programs SET attribution_rule = $2 WHERE id = $1`, e.program, rule)
			other := e.company(t, "affiliate")
			e.partner(t, e.program, other, "", 0)
			t0 := e.start()
			e.convert(t, e.adv, conversions.NewConversion{ClickID: e.click(t, e.program, e.aff, t0), CustomerID: "c", ExternalID: "o-1", OccurredAt: t0})
			c := e.convert(t, e.adv, conversions.NewConversion{ClickID: e.click(t, e.program, other, t0.Add(time.Hour)), CustomerID: "c",
				ExternalID: "o-2", OccurredAt: t0.Add(time.Hour)})
			next := e.convert(t, e.adv, conversions.NewConversion{CustomerID: "c", ExternalID: "o-3", OccurredAt: t0.Add(2 * time.Hour)})
			if rule == "first_affiliate" {
				if c.AffiliateID != e.aff || c.Attribution != conversions.AttributionCustomer || c.ClickID != "" || c.Commission.Amount != 0 || next.AffiliateID != e.aff {
					t.Fatalf("first_affiliate: %+v then %+v", c, next)
				}
				return
			}
			// The new affiliate brought the customer anew: its first conversion earns.
			if c.AffiliateID != other || c.Attribution != conversions.AttributionClick || c.Commission.Amount != 425 || next.AffiliateID != other {
				t.Fatalf("last_click: %+v then %+v", c, next)
			}
		})
	}
}

func TestACouponOrderWithoutAClickIsTheCodesPartnershipsAndBindsTheCustomer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.coupon(t, e.program, e.aff, "Podcast20")
	t0 := e.start()
	c := e.convert(t, e.adv, conversions.NewConversion{CouponCode: "PODCAST20", CustomerID: "c", ExternalID: "o-1", OccurredAt: t0})
	if c.Attribution != conversions.AttributionCoupon || c.CouponCode != "Podcast20" || c.AffiliateID != e.aff || c.PartnershipID != e.ptn ||
		c.ClickID != "" || c.LinkID != "" || !c.ClickedAt.IsZero() || c.Commission.Amount != 425 {
		t.Fatalf("coupon order: %+v", c)
	}
	got, err := e.svc.Get(context.Background(), conversions.Viewer{CompanyID: e.adv}, c.ID)
	if err != nil || got.Attribution != conversions.AttributionCoupon || got.CouponCode != "Podcast20" || !got.ClickedAt.IsZero() {
		t.Fatalf("read back: %+v %v", got, err)
	}
	if again := e.convert(t, e.adv, conversions.NewConversion{CustomerID: "c", ExternalID: "o-2", OccurredAt: t0.Add(time.Hour)}); again.AffiliateID != e.aff {
		t.Fatalf("the code bound no customer: %+v", again)
	}
	data := e.outboxFor(t, c.ID)[0].data
	if data.Attribution != "coupon" || data.CouponCode != "Podcast20" || data.CustomerID != "c" || data.ClickID != "" {
		t.Fatalf("event data: %+v", data)
	}
}

func TestAClickAndACodeOfTwoAffiliatesOnOneOrder(t *testing.T) {
	t.Parallel()
	for rule, want := range map[string]string{"first_affiliate": conversions.AttributionClick, "last_click": conversions.AttributionCoupon} {
		t.Run(rule, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.set(t, `UPDATE programs SET attribution_rule = $2 WHERE id = $1`, e.program, rule)
			podcaster := e.company(t, "affiliate")
			e.partner(t, e.program, podcaster, "", 0)
			e.coupon(t, e.program, podcaster, "POD")
			t0 := e.start()
			c := e.convert(t, e.adv, conversions.NewConversion{ClickID: e.click(t, e.program, e.aff, t0), CouponCode: "pod", CustomerID: "c",
				ExternalID: "o-1", OccurredAt: t0})
			winner := map[string]string{conversions.AttributionClick: e.aff, conversions.AttributionCoupon: podcaster}[want]
			if c.Attribution != want || c.AffiliateID != winner || c.Commission.Amount != 425 {
				t.Fatalf("%s: %+v", rule, c)
			}
			if again := e.convert(t, e.adv, conversions.NewConversion{CustomerID: "c", ExternalID: "o-2", OccurredAt: t0.Add(time.Hour)}); again.AffiliateID != winner {
				t.Fatalf("bound to %s, want %s", again.AffiliateID, winner)
			}
		})
	}
}

func TestAnotherAdvertisersCodeAndCustomerMeanNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.coupon(t, e.program, e.aff, "MINE")
	t0 := e.start()
	e.convert(t, e.adv, conversions.NewConversion{CouponCode: "MINE", CustomerID: "shared", ExternalID: "o-1", OccurredAt: t0})

	adv2 := e.company(t, "advertiser")
	program2 := e.newProgram(t, adv2, "EUR", "percent", 1000, nil)
	aff2 := e.company(t, "affiliate")
	e.partner(t, program2, aff2, "", 0)
	ctx := context.Background()
	if _, _, err := e.svc.Register(ctx, adv2, conversions.NewConversion{CouponCode: "mine", ExternalID: "x-1", OccurredAt: t0}); !errors.Is(err, conversions.ErrUnknownCoupon) {
		t.Fatalf("another advertiser's code: %v, want ErrUnknownCoupon", err)
	}
	if _, _, err := e.svc.Register(ctx, adv2, conversions.NewConversion{CustomerID: "shared", ExternalID: "x-2", OccurredAt: t0}); !errors.Is(err, conversions.ErrUnknownCustomer) {
		t.Fatalf("another advertiser's customer: %v, want ErrUnknownCustomer", err)
	}
	// Naming the first advertiser's program does not help either.
	if _, _, err := e.svc.Register(ctx, adv2, conversions.NewConversion{CustomerID: "shared", ProgramID: e.program, ExternalID: "x-3", OccurredAt: t0}); !errors.Is(err, conversions.ErrUnknownCustomer) {
		t.Fatalf("another advertiser's program: %v, want ErrUnknownCustomer", err)
	}
	// The same code and customer id are the second advertiser's own, independent ones.
	e.coupon(t, program2, aff2, "mine")
	c := e.convert(t, adv2, conversions.NewConversion{CouponCode: "MINE", CustomerID: "shared", ExternalID: "x-4", OccurredAt: t0})
	if c.AffiliateID != aff2 || c.ProgramID != program2 || c.Commission.Amount != 425 {
		t.Fatalf("second advertiser's own code: %+v", c)
	}
	if n := e.count(t, `SELECT count(*) FROM customers WHERE customer_id = 'shared'`); n != 2 {
		t.Fatalf("%d bindings of 'shared', want one per advertiser", n)
	}
}

func TestACustomerOfSeveralProgramsNeedsTheProgram(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	second := e.newProgram(t, e.adv, "EUR", "percent", 1000, nil)
	e.partner(t, second, e.aff, "", 0)
	t0 := e.start()
	for _, p := range []string{e.program, second} {
		e.convert(t, e.adv, conversions.NewConversion{ClickID: e.click(t, p, e.aff, t0), CustomerID: "c", ExternalID: "o-" + p, OccurredAt: t0})
	}
	_, _, err := e.svc.Register(context.Background(), e.adv, conversions.NewConversion{CustomerID: "c", ExternalID: "r", OccurredAt: t0.Add(time.Hour)})
	var inv *conversions.InvalidError
	if !errors.As(err, &inv) || inv.Field != "program_id" {
		t.Fatalf("ambiguous customer: %v", err)
	}
	if c := e.convert(t, e.adv, conversions.NewConversion{CustomerID: "c", ProgramID: second, ExternalID: "r", OccurredAt: t0.Add(time.Hour)}); c.ProgramID != second {
		t.Fatalf("named program: %+v", c)
	}
}

func TestConcurrentFirstConversionsOfOneCustomerBindItOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	other := e.company(t, "affiliate")
	e.partner(t, e.program, other, "", 0)
	t0 := e.start()
	const n = 12
	clicks := make([]string, n)
	for i := range clicks {
		aff := e.aff
		if i%2 == 1 {
			aff = other
		}
		clicks[i] = e.click(t, e.program, aff, t0)
	}
	var wg sync.WaitGroup
	results := make([]conversions.Conversion, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], _, errs[i] = e.svc.Register(context.Background(), e.adv, conversions.NewConversion{ClickID: clicks[i], CustomerID: "race",
				ExternalID: fmt.Sprintf("o-%d", i), Amount: "42.50", OccurredAt: t0.Add(time.Minute)})
		}()
	}
	wg.Wait()
	var bound string
	if err := e.db.QueryRow(context.Background(), `SELECT affiliate_id FROM customers WHERE customer_id = 'race'`).Scan(&bound); err != nil {
		t.Fatal(err)
	}
	earning := 0
	for i, c := range results {
		if errs[i] != nil {
			t.Fatalf("conversion %d: %v", i, errs[i])
		}
		if c.AffiliateID != bound {
			t.Fatalf("conversion %d went to %s, the customer is bound to %s (first_affiliate)", i, c.AffiliateID, bound)
		}
		if c.Commission.Amount > 0 {
			earning++
		}
	}
	if earning != 1 {
		t.Fatalf("%d conversions earned, want exactly the first one", earning)
	}
}

func TestARepeatedOrderBindsNoCustomer(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.coupon(t, e.program, e.aff, "CODE")
	t0 := e.start()
	first := e.convert(t, e.adv, conversions.NewConversion{ClickID: e.click(t, e.program, e.aff, t0), ExternalID: "o-1", OccurredAt: t0})
	again, created, err := e.svc.Register(context.Background(), e.adv, conversions.NewConversion{CouponCode: "CODE", CustomerID: "c", ExternalID: "o-1", Amount: "1", OccurredAt: t0})
	if err != nil || created || again.ID != first.ID {
		t.Fatalf("repeat: %+v created=%v %v", again, created, err)
	}
	if n := e.count(t, `SELECT count(*) FROM customers WHERE program_id = $1`, e.program); n != 0 {
		t.Fatalf("a repeat bound %d customers", n)
	}
}
