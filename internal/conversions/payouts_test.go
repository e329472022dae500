package conversions_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/conversions"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/page"
)

// approve registers a conversion of amount at occurred in program and approves it.
func (e *env) approve(t *testing.T, program, affiliate, amount string, occurred time.Time) conversions.Conversion {
	t.Helper()
	ctx := context.Background()
	c, _, err := e.svc.Register(ctx, e.adv, conversions.NewConversion{ClickID: e.click(t, program, affiliate, occurred.Add(-time.Minute)),
		ExternalID: ids.New("ord"), Amount: amount, OccurredAt: occurred})
	if err != nil {
		t.Fatal(err)
	}
	if c, err = e.svc.ChangeStatus(ctx, e.adv, c.ID, conversions.Approved, ""); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestAPayoutGathersExactlyTheApprovedCommissionsOfItsPeriod(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	now := e.clock.Now()
	start, end := now.Add(-10*24*time.Hour), now.Add(-24*time.Hour)
	usd := e.newProgram(t, e.adv, "USD", "percent", 1000, nil)
	e.partner(t, usd, e.aff, "", 0)
	other := e.company(t, "affiliate")
	e.partner(t, e.program, other, "", 0)

	// In: three approved EUR commissions in the period (0.01 + 3.33 + 1234.57 at 10 %).
	in := []conversions.Conversion{
		e.approve(t, e.program, e.aff, "0.10", start),
		e.approve(t, e.program, e.aff, "33.33", start.Add(time.Hour)),
		e.approve(t, e.program, e.aff, "12345.67", end.Add(-time.Second)),
	}
	// Out: at the period's end, before it, pending, in USD, of another affiliate.
	out := []conversions.Conversion{
		e.approve(t, e.program, e.aff, "1", end),
		e.approve(t, e.program, e.aff, "1", start.Add(-time.Second)),
		e.approve(t, usd, e.aff, "1", start.Add(time.Hour)),
		e.approve(t, e.program, other, "1", start.Add(time.Hour)),
	}
	pending, _, err := e.svc.Register(ctx, e.adv, conversions.NewConversion{ClickID: e.click(t, e.program, e.aff, start),
		ExternalID: "pending", Amount: "1", OccurredAt: start.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	out = append(out, pending)

	p, err := e.svc.CreatePayout(ctx, e.adv, conversions.NewPayout{AffiliateID: e.aff, Currency: "EUR", PeriodStart: start, PeriodEnd: end})
	if err != nil {
		t.Fatal(err)
	}
	if p.Amount != 1+333+123457 || p.CommissionCount != 3 || p.Status != conversions.PayoutPending || p.Currency != "EUR" {
		t.Fatalf("payout %+v, want 1237.91 EUR of 3 commissions", p)
	}
	gathered, _, err := e.svc.Commissions(ctx, conversions.Viewer{CompanyID: e.adv}, conversions.Filter{PayoutID: p.ID}, page.Request{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for _, m := range gathered {
		got = append(got, m.ConversionID)
	}
	for _, c := range in {
		want = append(want, c.ID)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("gathered %v, want %v", got, want)
	}
	for _, c := range out {
		stored, _ := e.svc.Get(ctx, conversions.Viewer{CompanyID: e.adv}, c.ID)
		if stored.Commission.PayoutID != "" {
			t.Fatalf("%s (%s, %s) was gathered", c.ID, stored.Commission.Status, stored.OccurredAt)
		}
	}
	// Nothing is left to gather twice.
	if _, err := e.svc.CreatePayout(ctx, e.adv, conversions.NewPayout{AffiliateID: e.aff, Currency: "EUR", PeriodStart: start, PeriodEnd: end}); !errors.Is(err, conversions.ErrNoCommissions) {
		t.Fatalf("a second payout of the period: %v, want ErrNoCommissions", err)
	}
}

func TestConcurrentPayoutsNeverGatherACommissionTwice(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	now := e.clock.Now()
	for range 20 {
		e.approve(t, e.program, e.aff, "1.00", now.Add(-time.Hour))
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	total, made := int64(0), 0
	for range 5 {
		wg.Go(func() {
			p, err := e.svc.CreatePayout(ctx, e.adv, conversions.NewPayout{AffiliateID: e.aff, Currency: "EUR",
				PeriodStart: now.Add(-24 * time.Hour), PeriodEnd: now})
			if err != nil && !errors.Is(err, conversions.ErrNoCommissions) {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				total += p.Amount
				made++
			}
		})
	}
	wg.Wait()
	if total != 20*10 || made != 1 {
		t.Fatalf("%d payouts of %d in all, want 1 of 2.00 EUR", made, total)
	}
}

func TestSettlingAPayout(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	now := e.clock.Now()
	a := e.approve(t, e.program, e.aff, "10.00", now.Add(-time.Hour))
	b := e.approve(t, e.program, e.aff, "20.00", now.Add(-time.Hour))

	t.Run("a commission in a pending payout cannot be reversed", func(t *testing.T) {
		p := e.payout(t, e.aff, "EUR")
		defer func() { _, _ = e.svc.SettlePayout(ctx, e.adv, p.ID, conversions.PayoutCanceled) }()
		if _, err := e.svc.ChangeStatus(ctx, e.adv, a.ID, conversions.Reversed, ""); !errors.Is(err, conversions.ErrInPayout) {
			t.Fatalf("reverse = %v, want ErrInPayout", err)
		}
	})
	for _, to := range []string{conversions.PayoutFailed, conversions.PayoutCanceled} {
		t.Run(to+" releases the commissions for another payout", func(t *testing.T) {
			p := e.payout(t, e.aff, "EUR")
			events := e.count(t, `SELECT count(*) FROM outbox`)
			got, err := e.svc.SettlePayout(ctx, e.adv, p.ID, to)
			if err != nil || got.Status != to || got.Amount != 300 {
				t.Fatalf("SettlePayout = %+v, %v", got, err)
			}
			for _, c := range []conversions.Conversion{a, b} {
				stored, _ := e.svc.Get(ctx, conversions.Viewer{CompanyID: e.adv}, c.ID)
				if stored.Commission.Status != conversions.Approved || stored.Commission.PayoutID != "" || stored.Commission.Version != 2 {
					t.Fatalf("after %s: %s payout %q v%d", to, stored.Commission.Status, stored.Commission.PayoutID, stored.Commission.Version)
				}
			}
			if n := e.count(t, `SELECT count(*) FROM outbox`); n != events {
				t.Fatalf("releasing wrote %d events; the commission status did not change", n-events)
			}
			for _, next := range []string{conversions.PayoutPaid, conversions.PayoutFailed, conversions.PayoutCanceled} {
				var te *conversions.TransitionError
				if _, err := e.svc.SettlePayout(ctx, e.adv, p.ID, next); !errors.As(err, &te) || len(te.Allowed) != 0 {
					t.Fatalf("%s -> %s: %v, want a TransitionError", to, next, err)
				}
			}
		})
	}
	t.Run("paid marks every commission paid with its event", func(t *testing.T) {
		p := e.payout(t, e.aff, "EUR")
		if _, err := e.svc.SettlePayout(ctx, e.company(t, "advertiser"), p.ID, conversions.PayoutPaid); !errors.Is(err, conversions.ErrNotFound) {
			t.Fatalf("another advertiser settled it: %v", err)
		}
		got, err := e.svc.SettlePayout(ctx, e.adv, p.ID, conversions.PayoutPaid)
		if err != nil || got.Status != conversions.PayoutPaid {
			t.Fatalf("SettlePayout = %+v, %v", got, err)
		}
		for _, c := range []conversions.Conversion{a, b} {
			stored, _ := e.svc.Get(ctx, conversions.Viewer{CompanyID: e.adv}, c.ID)
			if stored.Commission.Status != conversions.Paid || stored.Commission.PayoutID != p.ID || stored.Commission.Version != 3 {
				t.Fatalf("after paid: %+v", stored.Commission)
			}
			evs := e.outboxFor(t, c.ID)
			assertEvents(t, evs[len(evs)-1:], conversions.Approved, stored)
			if _, err := e.svc.ChangeStatus(ctx, e.adv, c.ID, conversions.Reversed, ""); err == nil {
				t.Fatal("a paid commission was reversed")
			}
		}
		if _, err := e.svc.SettlePayout(ctx, e.adv, p.ID, conversions.PayoutCanceled); err == nil {
			t.Fatal("a paid payout was canceled")
		}
	})
}

func TestEachCompanySeesOnlyItsOwn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	now := e.clock.Now()
	mine := e.approve(t, e.program, e.aff, "10", now.Add(-time.Hour))
	// Another advertiser with its own program, and another affiliate in ours.
	adv2 := e.company(t, "advertiser")
	prog2 := e.newProgram(t, adv2, "EUR", "fixed", 100, nil)
	e.partner(t, prog2, e.aff, "", 0)
	c2, _, err := e.svc.Register(ctx, adv2, conversions.NewConversion{ClickID: e.click(t, prog2, e.aff, now.Add(-time.Hour)), ExternalID: "x"})
	if err != nil {
		t.Fatal(err)
	}
	aff2 := e.company(t, "affiliate")
	e.partner(t, e.program, aff2, "", 0)
	theirs := e.approve(t, e.program, aff2, "10", now.Add(-time.Hour))
	p := e.payout(t, e.aff, "EUR")

	cases := []struct {
		name   string
		viewer conversions.Viewer
		see    []string // conversion ids, newest first
		payout bool
	}{
		{"the advertiser sees its programs' conversions", conversions.Viewer{CompanyID: e.adv}, []string{theirs.ID, mine.ID}, true},
		{"the other advertiser sees only its own", conversions.Viewer{CompanyID: adv2}, []string{c2.ID}, false},
		{"the affiliate sees its conversions with both advertisers", conversions.Viewer{CompanyID: e.aff, Affiliate: true}, []string{c2.ID, mine.ID}, true},
		{"the other affiliate sees only its own", conversions.Viewer{CompanyID: aff2, Affiliate: true}, []string{theirs.ID}, false},
		{"an advertiser id used as an affiliate sees nothing", conversions.Viewer{CompanyID: e.adv, Affiliate: true}, nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			list, _, err := e.svc.List(ctx, c.viewer, conversions.Filter{}, page.Request{Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, x := range list {
				got = append(got, x.ID)
			}
			if !slices.Equal(got, c.see) {
				t.Fatalf("List = %v, want %v", got, c.see)
			}
			coms, _, err := e.svc.Commissions(ctx, c.viewer, conversions.Filter{}, page.Request{Limit: 10})
			if err != nil || len(coms) != len(c.see) {
				t.Fatalf("Commissions = %d, %v; want %d", len(coms), err, len(c.see))
			}
			for _, id := range []string{mine.ID, c2.ID, theirs.ID} {
				_, err := e.svc.Get(ctx, c.viewer, id)
				if visible := slices.Contains(c.see, id); visible != (err == nil) || (!visible && !errors.Is(err, conversions.ErrNotFound)) {
					t.Fatalf("Get(%s) = %v, visible %v", id, err, visible)
				}
			}
			_, err = e.svc.Payout(ctx, c.viewer, p.ID)
			if c.payout != (err == nil) {
				t.Fatalf("Payout = %v, want visible %v", err, c.payout)
			}
			payouts, _, _ := e.svc.Payouts(ctx, c.viewer, conversions.PayoutFilter{}, page.Request{Limit: 10})
			if c.payout != (len(payouts) == 1) {
				t.Fatalf("Payouts = %d", len(payouts))
			}
		})
	}
}

func TestListsFilterAndPaginate(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	now := e.clock.Now()
	var all []string
	for i := range 5 {
		c := e.register(t, ids.New("ord"), "1")
		if i%2 == 0 {
			if _, err := e.svc.ChangeStatus(ctx, e.adv, c.ID, conversions.Approved, ""); err != nil {
				t.Fatal(err)
			}
		}
		all = append([]string{c.ID}, all...)
	}
	v := conversions.Viewer{CompanyID: e.adv}
	var got []string
	p := page.Request{Limit: 2}
	for {
		list, next, err := e.svc.List(ctx, v, conversions.Filter{ProgramID: e.program, AffiliateID: e.aff}, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range list {
			got = append(got, c.ID)
		}
		if next == "" {
			break
		}
		p, _ = page.Parse("2", next)
	}
	if !slices.Equal(got, all) {
		t.Fatalf("pages %v, want %v", got, all)
	}
	for _, c := range []struct {
		name string
		f    conversions.Filter
		want int
	}{
		{"approved", conversions.Filter{Status: conversions.Approved}, 3},
		{"pending", conversions.Filter{Status: conversions.Pending}, 2},
		{"occurred in the last two minutes", conversions.Filter{From: now.Add(-2 * time.Minute), To: now}, 5},
		{"occurred before that", conversions.Filter{To: now.Add(-2 * time.Minute)}, 0},
		{"another program", conversions.Filter{ProgramID: ids.New(ids.Program)}, 0},
	} {
		list, _, err := e.svc.List(ctx, v, c.f, page.Request{Limit: 50})
		coms, _, err2 := e.svc.Commissions(ctx, v, c.f, page.Request{Limit: 50})
		if err != nil || err2 != nil || len(list) != c.want || len(coms) != c.want {
			t.Errorf("%s: %d conversions, %d commissions (%v, %v); want %d", c.name, len(list), len(coms), err, err2, c.want)
		}
	}
}
