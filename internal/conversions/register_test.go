package conversions_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/conversions"
	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/ids"
)

func TestAttributionByClickInsideTheProgramsWindow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	other := e.company(t, "advertiser")
	otherProgram := e.newProgram(t, other, "EUR", "fixed", 100, nil)
	e.partner(t, otherProgram, e.aff, "", 0)
	cases := []struct {
		name       string
		advertiser string
		clickAt    time.Duration // before now
		program    string
		occurred   time.Duration // before now
		currency   string
		want       error
	}{
		{"a conversion an hour after the click is attributed", e.adv, 2 * time.Hour, e.program, time.Hour, "EUR", nil},
		{"a conversion at the very time of the click is attributed", e.adv, time.Hour, e.program, time.Hour, "EUR", nil},
		{"a conversion 29 days after the click is attributed", e.adv, 30 * 24 * time.Hour, e.program, 24 * time.Hour, "EUR", nil},
		{"a conversion exactly 30 days after the click is attributed", e.adv, 31 * 24 * time.Hour, e.program, 24 * time.Hour, "", nil},
		{"a conversion 30 days and a second after the click is expired", e.adv, 31*24*time.Hour + time.Second, e.program, 24 * time.Hour, "EUR", conversions.ErrClickExpired},
		{"a conversion before the click is expired", e.adv, time.Hour, e.program, 2 * time.Hour, "EUR", conversions.ErrClickExpired},
		// Answered as a missing click, not forbidden.
		{"another advertiser's click is a missing one", other, time.Hour, e.program, time.Minute, "EUR", conversions.ErrUnknownClick},
		{"a click of another advertiser's program is a missing one to this one", e.adv, time.Hour, otherProgram, time.Minute, "EUR", conversions.ErrUnknownClick},
		{"another currency without a rate is refused", e.adv, time.Hour, e.program, time.Minute, "USD", conversions.ErrNoExchangeRate},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			now := e.clock.Now().Truncate(time.Second)
			clk := e.click(t, c.program, e.aff, now.Add(-c.clickAt))
			conv, created, err := e.svc.Register(ctx, c.advertiser, conversions.NewConversion{ClickID: clk,
				ExternalID: fmt.Sprint("order-", i), Amount: "10.00", Currency: c.currency, OccurredAt: now.Add(-c.occurred)})
			if c.want != nil {
				if !errors.Is(err, c.want) {
					t.Fatalf("Register = %v, want %v", err, c.want)
				}
				if n := e.count(t, `SELECT count(*) FROM conversions WHERE external_id = $1`, fmt.Sprint("order-", i)); n != 0 {
					t.Fatalf("a refused conversion left %d rows", n)
				}
				return
			}
			if err != nil || !created {
				t.Fatalf("Register = %v, created %v", err, created)
			}
			if conv.ProgramID != c.program || conv.AffiliateID != e.aff || conv.ClickID != clk || conv.PartnershipID != e.ptn ||
				conv.LinkID != e.links[c.program+"/"+e.aff] || conv.Sub1 != "" || conv.Currency != "EUR" || conv.Amount != 1000 {
				t.Fatalf("attributed to %+v", conv)
			}
		})
	}
}

// A click of another advertiser is answered exactly as a click id nobody made, and so is a
// plain id of the kind older versions made when they ran without a signing key: whatever
// their age, they are unknown, and never "not ready" (no answer waits for the click store).
func TestAnotherAdvertisersClickIsAnsweredAsAMissingOne(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	other := e.company(t, "advertiser")
	theirs := e.click(t, e.program, e.aff, e.clock.Now().Add(-time.Minute))
	forged := theirs[:len(theirs)-1] + map[bool]string{true: "0", false: "1"}[theirs[len(theirs)-1] != '0']
	for name, c := range map[string]struct {
		advertiser, clickID string
	}{
		"another advertiser's click":       {other, theirs},
		"a forged id":                      {e.adv, forged},
		"a plain id an older version made": {e.adv, ids.New(ids.Click)},
		"a made-up id of another":          {other, ids.New(ids.Click)},
	} {
		_, _, err := e.svc.Register(context.Background(), c.advertiser, conversions.NewConversion{ClickID: c.clickID, ExternalID: "o", OccurredAt: e.clock.Now()})
		if !errors.Is(err, conversions.ErrUnknownClick) {
			t.Errorf("%s: %v, want ErrUnknownClick", name, err)
		}
	}
}

func TestCommissionsAreExactInEveryCurrency(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	cases := []struct {
		name       string
		currency   string
		rule       string
		value      int64
		override   string
		overrideTo int64
		amount     string
		wantAmount int64
		commission int64
	}{
		{"10 % of 42.50 EUR is 4.25", "EUR", "percent", 1000, "", 0, "42.50", 4250, 425},
		{"12.5 % of 0.04 USD rounds half up to 0.01", "USD", "percent", 1250, "", 0, "0.04", 4, 1},
		{"12.5 % of 0.03 USD rounds down to 0.00", "USD", "percent", 1250, "", 0, "0.03", 3, 0},
		{"7.5 % of 1999.99 EUR is 150.00 (149.99925 half up)", "EUR", "percent", 750, "", 0, "1999.99", 199999, 15000},
		{"5 % of 1234 JPY is 62 yen (61.7)", "JPY", "percent", 500, "", 0, "1234", 1234, 62},
		{"a zero-decimal currency refuses decimals", "JPY", "percent", 500, "", 0, "12.5", 0, -1},
		{"2.5 % of 10.005 KWD is 0.250 (0.250125)", "KWD", "percent", 250, "", 0, "10.005", 10005, 250},
		{"a fixed 5.00 GBP per conversion ignores the amount", "GBP", "fixed", 500, "", 0, "99.99", 9999, 500},
		{"a fixed 300 KRW on a lead without amount", "KRW", "fixed", 300, "", 0, "", 0, 300},
		{"a partnership override to a fixed 7.77 EUR wins over 10 %", "EUR", "percent", 1000, "fixed", 777, "100", 10000, 777},
		{"a partnership override to 20 % wins over a fixed amount", "EUR", "fixed", 100, "percent", 2000, "19.99", 1999, 400},
		{"more decimals than the currency has is refused, never rounded", "EUR", "percent", 1000, "", 0, "1.001", 0, -1},
		{"a negative amount is refused", "EUR", "percent", 1000, "", 0, "-1.00", 0, -1},
		{"an amount whose percentage overflows is refused", "KWD", "percent", 10000, "", 0, "999999999999999.999", 0, -1},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			program := e.newProgram(t, e.adv, c.currency, c.rule, c.value, nil)
			e.partner(t, program, e.aff, c.override, c.overrideTo)
			now := e.clock.Now()
			clk := e.click(t, program, e.aff, now.Add(-time.Hour))
			conv, _, err := e.svc.Register(ctx, e.adv, conversions.NewConversion{ClickID: clk, ExternalID: fmt.Sprint(i),
				Amount: c.amount, Currency: c.currency, OccurredAt: now})
			if c.commission < 0 {
				var inv *conversions.InvalidError
				if !errors.As(err, &inv) || inv.Field != "amount" {
					t.Fatalf("Register = %v, want an invalid amount", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if conv.Amount != c.wantAmount || conv.Commission.Amount != c.commission || conv.Commission.Currency != c.currency {
				t.Fatalf("amount %d, commission %d %s; want %d, %d %s", conv.Amount, conv.Commission.Amount,
					conv.Commission.Currency, c.wantAmount, c.commission, c.currency)
			}
			// What is stored is what was answered.
			got, err := e.svc.Get(ctx, conversions.Viewer{CompanyID: e.adv}, conv.ID)
			if err != nil || got.Commission.Amount != c.commission || got.Amount != c.wantAmount {
				t.Fatalf("stored %+v, %v", got, err)
			}
		})
	}
}

func TestBadInputIsInvalidNeverAServerError(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	now := e.clock.Now()
	clk := e.click(t, e.program, e.aff, now.Add(-time.Hour))
	good := conversions.NewConversion{ClickID: clk, ExternalID: "o-1", Amount: "1", OccurredAt: now}
	cases := []struct {
		name  string
		edit  func(*conversions.NewConversion)
		field string
	}{
		{"a click id that is not one", func(n *conversions.NewConversion) { n.ClickID = "abc" }, "click_id"},
		{"an empty external id", func(n *conversions.NewConversion) { n.ExternalID = "" }, "external_id"},
		{"an external id over 255 characters", func(n *conversions.NewConversion) { n.ExternalID = strings.Repeat("x", 256) }, "external_id"},
		{"an unknown type", func(n *conversions.NewConversion) { n.Type = "purchase" }, "type"},
		{"a lower-case currency", func(n *conversions.NewConversion) { n.Currency = "eur" }, "currency"},
		{"occurred_at an hour ahead", func(n *conversions.NewConversion) { n.OccurredAt = now.Add(time.Hour) }, "occurred_at"},
		{"metadata that is an array", func(n *conversions.NewConversion) { n.Metadata = json.RawMessage(`[1]`) }, "metadata"},
		{"metadata over 16 KB", func(n *conversions.NewConversion) {
			n.Metadata = json.RawMessage(`{"a":"` + strings.Repeat("x", 16<<10) + `"}`)
		}, "metadata"},
		{"metadata Postgres cannot store (\\u0000)", func(n *conversions.NewConversion) { n.Metadata = json.RawMessage(`{"a":"\u0000"}`) }, "metadata"},
		{"metadata with a number beyond numeric", func(n *conversions.NewConversion) { n.Metadata = json.RawMessage(`{"a":1e1000000}`) }, "metadata"},
		{"an external id with a NUL", func(n *conversions.NewConversion) { n.ExternalID = "a\x00b" }, "external_id"},
		{"no click, code or customer", func(n *conversions.NewConversion) { n.ClickID = "" }, "click_id"},
		{"a coupon code with a space", func(n *conversions.NewConversion) { n.CouponCode = "SPRING 10" }, "coupon_code"},
		{"a coupon code over 64 characters", func(n *conversions.NewConversion) { n.CouponCode = strings.Repeat("C", 65) }, "coupon_code"},
		{"a customer id over 128 characters", func(n *conversions.NewConversion) { n.CustomerID = strings.Repeat("c", 129) }, "customer_id"},
		{"a customer id with a NUL", func(n *conversions.NewConversion) { n.CustomerID = "c\x00" }, "customer_id"},
		{"an external id with CR/LF", func(n *conversions.NewConversion) { n.ExternalID = "o-1\r\nforged" }, "external_id"},
		{"an external id with a tab", func(n *conversions.NewConversion) { n.ExternalID = "o\t1" }, "external_id"},
		{"an external id with an escape sequence", func(n *conversions.NewConversion) { n.ExternalID = "o-1\x1b[31m" }, "external_id"},
		{"a customer id with CR/LF", func(n *conversions.NewConversion) { n.CustomerID = "cus\r\n1" }, "customer_id"},
		{"occurred_at a second before 1970 (a coupon has no click to bound it)", func(n *conversions.NewConversion) {
			n.ClickID, n.CouponCode, n.OccurredAt = "", "SPRING", time.Date(1969, 12, 31, 23, 59, 59, 0, time.UTC)
		}, "occurred_at"},
		{"occurred_at in 1900 (a customer has no click to bound it)", func(n *conversions.NewConversion) {
			n.ClickID, n.CustomerID, n.OccurredAt = "", "cus-1", time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)
		}, "occurred_at"},
		{"a program id that is not one", func(n *conversions.NewConversion) { n.ProgramID = "p-1" }, "program_id"},
		{"a reason over 500 characters", nil, "reason"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			if c.edit == nil {
				_, err = e.svc.ChangeStatus(context.Background(), e.adv, ids.New(ids.Conversion), conversions.Rejected, strings.Repeat("r", 501))
			} else {
				in := good
				c.edit(&in)
				_, _, err = e.svc.Register(context.Background(), e.adv, in)
			}
			var inv *conversions.InvalidError
			if !errors.As(err, &inv) || inv.Field != c.field {
				t.Fatalf("error %v, want an invalid %s", err, c.field)
			}
		})
	}
	// Defaults: a sale, now, zero amount in the program currency, an empty object.
	in := good
	in.Amount, in.OccurredAt = "", time.Time{}
	conv, _, err := e.svc.Register(context.Background(), e.adv, in)
	if err != nil || conv.Type != "sale" || !conv.OccurredAt.Equal(now) || conv.Amount != 0 || conv.Currency != "EUR" ||
		string(conv.Metadata) != "{}" || conv.Source != "api" {
		t.Fatalf("defaults: %+v, %v", conv, err)
	}
}

func TestARepeatedExternalIDReturnsTheFirstConversionEvenUnderConcurrency(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	now := e.clock.Now()
	clk := e.click(t, e.program, e.aff, now.Add(-time.Hour))
	in := conversions.NewConversion{ClickID: clk, ExternalID: "order-42", Amount: "42.50", Currency: "EUR", OccurredAt: now}

	const n = 20
	var wg sync.WaitGroup
	start := make(chan struct{})
	results := make([]conversions.Conversion, n)
	created := make([]bool, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			<-start
			results[i], created[i], errs[i] = e.svc.Register(ctx, e.adv, in)
		})
	}
	close(start)
	wg.Wait()
	firsts := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("request %d: %v", i, errs[i])
		}
		if created[i] {
			firsts++
		}
		if results[i].ID != results[0].ID || results[i].Commission.ID != results[0].Commission.ID {
			t.Fatalf("request %d got %s, request 0 got %s", i, results[i].ID, results[0].ID)
		}
	}
	if firsts != 1 {
		t.Fatalf("%d requests say they created the conversion, want 1", firsts)
	}
	if c := e.count(t, `SELECT count(*) FROM conversions`); c != 1 {
		t.Fatalf("%d conversions, want 1", c)
	}
	if c := e.count(t, `SELECT count(*) FROM commissions`); c != 1 {
		t.Fatalf("%d commissions, want 1", c)
	}
	if c := e.count(t, `SELECT count(*) FROM outbox`); c != 2 {
		t.Fatalf("%d outbox events, want 2 (conversion.created and commission.status_changed)", c)
	}

	// A later repeat with other details still answers with the first, even one that would
	// now be refused (another currency, another click, a time outside the window).
	other := e.click(t, e.program, e.aff, now.Add(-time.Minute))
	for _, repeat := range []conversions.NewConversion{
		{ClickID: clk, ExternalID: "order-42", Amount: "99", Currency: "EUR"},
		{ClickID: other, ExternalID: "order-42", Amount: "1", Currency: "USD"},
		{ClickID: clk, ExternalID: "order-42", OccurredAt: now.Add(-48 * time.Hour)},
	} {
		got, isNew, err := e.svc.Register(ctx, e.adv, repeat)
		if err != nil || isNew || got.ID != results[0].ID || got.Amount != 4250 {
			t.Fatalf("repeat %+v = %s new=%v amount=%d %v; want the first conversion", repeat, got.ID, isNew, got.Amount, err)
		}
	}
	// The same order id in another program is another conversion.
	second := e.newProgram(t, e.adv, "EUR", "percent", 1000, nil)
	e.partner(t, second, e.aff, "", 0)
	got, isNew, err := e.svc.Register(ctx, e.adv, conversions.NewConversion{ClickID: e.click(t, second, e.aff, now.Add(-time.Hour)),
		ExternalID: "order-42", Amount: "1"})
	if err != nil || !isNew || got.ID == results[0].ID {
		t.Fatalf("same order id in another program: %s new=%v %v", got.ID, isNew, err)
	}
}

func TestRegisteringWritesTheCreationEventsInTheSameTransaction(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := e.register(t, "order-1", "42.50")
	got := e.outboxFor(t, c.ID)
	if len(got) != 2 || got[0].envelope.Type != events.ConversionCreated || got[1].envelope.Type != events.CommissionStatusChanged {
		t.Fatalf("outbox %+v, want conversion.created then commission.status_changed", got)
	}
	want := events.ConversionData{ID: c.ID, Type: "sale", Amount: "42.50", Status: "pending", Currency: "EUR",
		CommissionID: c.Commission.ID, CommissionAmount: "4.25", ProgramID: e.program, AffiliateID: e.aff, AdvertiserID: e.adv,
		LinkID: c.LinkID, ClickID: c.ClickID, ExternalID: "order-1", OccurredAt: c.OccurredAt, Version: 1, Attribution: "click"}
	for _, ev := range got {
		if ev.data != want {
			t.Fatalf("data %+v\nwant %+v", ev.data, want)
		}
		env := ev.envelope
		if !ids.Valid(ids.Event, env.ID) || env.AdvertiserID != e.adv || env.AffiliateID != e.aff || env.ProgramID != e.program ||
			!env.OccurredAt.Equal(e.clock.Now()) {
			t.Fatalf("envelope %+v", env)
		}
	}
	if got[0].envelope.ID == got[1].envelope.ID {
		t.Fatal("two events share an id")
	}
	// The previous status of a new commission is empty, so it is left out of the data.
	var raw map[string]any
	_ = json.Unmarshal(got[1].envelope.Data, &raw)
	if _, ok := raw["previous_status"]; ok {
		t.Fatalf("creation carries previous_status: %v", raw)
	}
}
