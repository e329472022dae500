package conversions_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/conversions"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/money"
	"github.com/partnerstream/partnerstream/internal/page"
	"github.com/partnerstream/partnerstream/internal/rates"
)

// exchangeEnv is env with the rates service and the conversions' day.
type exchangeEnv struct {
	*env
	rates *rates.Service
	at    time.Time // when the conversions occur
	day   time.Time // its day
}

func newExchangeEnv(t *testing.T) *exchangeEnv {
	e := &exchangeEnv{env: newEnv(t)}
	e.rates = rates.New(e.db, nil)
	e.at = e.clock.Now().Add(-time.Hour)
	e.day = e.at.UTC().Truncate(24 * time.Hour)
	return e
}

// setRate keeps a rate of company on the day daysBefore the conversions' day.
func (e *exchangeEnv) setRate(t *testing.T, company, base, quote string, daysBefore int, rate string) {
	t.Helper()
	if _, err := e.rates.Set(context.Background(), company, rates.NewRate{Day: e.day.AddDate(0, 0, -daysBefore).Format(time.DateOnly),
		Base: base, Quote: quote, Rate: rate}); err != nil {
		t.Fatal(err)
	}
}

// sell registers a sale of amount in currency for program, an hour after a click.
func (e *exchangeEnv) sell(t *testing.T, program, amount, currency string) (conversions.Conversion, error) {
	t.Helper()
	clk := e.click(t, program, e.aff, e.at.Add(-time.Hour))
	c, _, err := e.svc.Register(context.Background(), e.adv, conversions.NewConversion{ClickID: clk, ExternalID: ids.New("ord"),
		Amount: amount, Currency: currency, OccurredAt: e.at})
	return c, err
}

func TestAConversionInAnotherCurrencyIsConvertedWithTheRateInForce(t *testing.T) {
	t.Parallel()
	e := newExchangeEnv(t)
	ctx := context.Background()
	e.setRate(t, e.adv, "USD", "EUR", 3, "0.9")
	e.setRate(t, e.adv, "USD", "EUR", 2, "0.917200") // the latest on or before the day
	e.setRate(t, e.adv, "USD", "EUR", -1, "5")       // the next day's: not in force yet
	c, err := e.sell(t, e.program, "100.01", "USD")
	if err != nil {
		t.Fatal(err)
	}
	// 100.01 * 0.9172 = 91.729172 -> 91.73 EUR; 10 % -> 9.17 (9.173 half up)
	want := &conversions.Exchange{OriginalAmount: 10001, OriginalCurrency: "USD", Rate: "0.9172", RateDate: e.day.AddDate(0, 0, -2), ConvertedAmount: 9173}
	if c.Currency != "EUR" || c.Amount != 9173 || c.Commission.Amount != 917 || *c.Exchange != *want || *c.Commission.Exchange != *want {
		t.Fatalf("registered %+v, exchange %+v, commission %+v", c, c.Exchange, c.Commission)
	}
	got, err := e.svc.Get(ctx, conversions.Viewer{CompanyID: e.aff, Affiliate: true}, c.ID)
	if err != nil || got.Exchange == nil || *got.Exchange != *want || *got.Commission.Exchange != *want {
		t.Fatalf("read back %+v, %v", got.Exchange, err)
	}
	list, _, err := e.svc.Commissions(ctx, conversions.Viewer{CompanyID: e.adv}, conversions.Filter{}, page.Request{Limit: 10})
	if err != nil || len(list) != 1 || list[0].Exchange == nil || *list[0].Exchange != *want {
		t.Fatalf("commission list %+v, %v", list, err)
	}
	for _, ev := range e.outboxFor(t, c.ID) {
		d := ev.data
		if d.Amount != "91.73" || d.Currency != "EUR" || d.OriginalAmount != "100.01" || d.OriginalCurrency != "USD" ||
			d.ExchangeRate != "0.9172" || d.RateDate != e.day.AddDate(0, 0, -2).Format(time.DateOnly) || d.CommissionAmount != "9.17" {
			t.Fatalf("event data %+v", d)
		}
	}
	// In the program currency nothing is converted, and the snapshot stays empty.
	same, err := e.sell(t, e.program, "10.00", "EUR")
	if err != nil || same.Exchange != nil || same.Commission.Exchange != nil || same.Amount != 1000 {
		t.Fatalf("same currency: %+v, %v", same, err)
	}
	if ev := e.outboxFor(t, same.ID); ev[0].data.OriginalCurrency != "" {
		t.Fatalf("same-currency event data %+v", ev[0].data)
	}
}

func TestARateOlderThanTheProgramsLimitIsNotUsed(t *testing.T) {
	t.Parallel()
	e := newExchangeEnv(t)
	e.setRate(t, e.adv, "GBP", "EUR", 8, "1.17")
	_, err := e.sell(t, e.program, "10.00", "GBP")
	var noRate *rates.NoRateError
	if !errors.Is(err, conversions.ErrNoExchangeRate) || !errors.As(err, &noRate) || noRate.Base != "GBP" || noRate.Quote != "EUR" ||
		!noRate.Day.Equal(e.day) || noRate.MaxAgeDays != 7 {
		t.Fatalf("a rate 8 days old: %v", err)
	}
	if n := e.count(t, `SELECT count(*) FROM conversions`); n != 0 {
		t.Fatalf("a refused conversion left %d rows", n)
	}
	e.setRate(t, e.adv, "GBP", "EUR", 7, "1.16") // exactly the limit
	if c, err := e.sell(t, e.program, "10.00", "GBP"); err != nil || c.Amount != 1160 {
		t.Fatalf("a rate 7 days old: %+v, %v", c, err)
	}
	// The program's own limit: 0 days takes the conversion's day only.
	if _, err := e.db.Exec(context.Background(), `UPDATE programs SET max_rate_age_days = 0 WHERE id = $1`, e.program); err != nil {
		t.Fatal(err)
	}
	if _, err := e.sell(t, e.program, "10.00", "GBP"); !errors.Is(err, conversions.ErrNoExchangeRate) {
		t.Fatalf("a 0-day limit took an older rate: %v", err)
	}
	// The inverse pair is never inverted.
	e.setRate(t, e.adv, "EUR", "CHF", 0, "0.95")
	if _, err := e.sell(t, e.program, "10.00", "CHF"); !errors.Is(err, conversions.ErrNoExchangeRate) {
		t.Fatalf("an inverse rate was used: %v", err)
	}
}

func TestALaterRateCorrectionLeavesTheSnapshotAlone(t *testing.T) {
	t.Parallel()
	e := newExchangeEnv(t)
	ctx := context.Background()
	e.setRate(t, e.adv, "USD", "EUR", 0, "0.92")
	first, err := e.sell(t, e.program, "50.00", "USD")
	if err != nil || first.Amount != 4600 {
		t.Fatalf("first: %+v, %v", first, err)
	}
	e.setRate(t, e.adv, "USD", "EUR", 0, "0.8") // the same day's rate, corrected
	if _, err := e.svc.ChangeStatus(ctx, e.adv, first.ID, conversions.Approved, ""); err != nil {
		t.Fatal(err)
	}
	got, err := e.svc.Get(ctx, conversions.Viewer{CompanyID: e.adv}, first.ID)
	if err != nil || got.Amount != 4600 || got.Commission.Amount != 460 || got.Exchange.Rate != "0.92" || got.Exchange.ConvertedAmount != 4600 {
		t.Fatalf("after the correction: %+v %+v, %v", got, got.Exchange, err)
	}
	if evs := e.outboxFor(t, first.ID); evs[len(evs)-1].data.ExchangeRate != "0.92" || evs[len(evs)-1].data.Status != conversions.Approved {
		t.Fatalf("the approval's event: %+v", evs[len(evs)-1].data)
	}
	if next, err := e.sell(t, e.program, "50.00", "USD"); err != nil || next.Amount != 4000 || next.Exchange.Rate != "0.8" {
		t.Fatalf("a new conversion: %+v, %v", next, err)
	}
}

// Each program currency rounds to its own minor unit, half up: JPY none, EUR two, KWD three.
func TestConvertedAmountsRoundToTheProgramCurrencysMinorUnit(t *testing.T) {
	t.Parallel()
	e := newExchangeEnv(t)
	cases := []struct {
		program, from, amount, rate, want string
	}{
		{"JPY", "USD", "10.01", "149.5", "1496"}, // 1496.495
		{"JPY", "USD", "0.05", "150", "8"},       // 7.5
		{"EUR", "USD", "10.01", "0.5", "5.01"},   // 5.005
		{"EUR", "JPY", "1234", "0.0061", "7.53"}, // 7.5274
		{"KWD", "EUR", "1.01", "0.3335", "0.337"},
		{"KWD", "USD", "0.10", "0.30705", "0.031"}, // 0.030705
	}
	for _, c := range cases {
		program := e.newProgram(t, e.adv, c.program, "percent", 1000, nil)
		e.partner(t, program, e.aff, "", 0)
		e.setRate(t, e.adv, c.from, c.program, 0, c.rate)
		got, err := e.sell(t, program, c.amount, c.from)
		if err != nil || money.Format(got.Amount, c.program) != c.want || got.Currency != c.program {
			t.Errorf("%s %s at %s into %s: %v %s, %v; want %s", c.amount, c.from, c.rate, c.program, money.Format(got.Amount, c.program), got.Currency, err, c.want)
		}
		// each case sets its own day's rate again, so reset it for the next one
		if _, err := e.db.Exec(context.Background(), `DELETE FROM exchange_rates`); err != nil {
			t.Fatal(err)
		}
	}
	// The amount must fit the currency it is reported in.
	if _, err := e.sell(t, e.program, "10.5", "JPY"); err == nil {
		t.Fatal("10.5 JPY was accepted")
	}
}

func TestOnlyTheAdvertisersOwnRatesAreUsed(t *testing.T) {
	t.Parallel()
	e := newExchangeEnv(t)
	other := e.company(t, "advertiser")
	e.setRate(t, other, "USD", "EUR", 0, "0.92")
	if _, err := e.sell(t, e.program, "10.00", "USD"); !errors.Is(err, conversions.ErrNoExchangeRate) {
		t.Fatalf("another advertiser's rate was used: %v", err)
	}
	list, _, err := e.rates.List(context.Background(), e.adv, rates.Filter{}, page.Request{Limit: 10})
	if err != nil || len(list) != 0 {
		t.Fatalf("the advertiser lists %v, %v", list, err)
	}
}
