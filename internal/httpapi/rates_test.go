package httpapi_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/partnerstream/partnerstream/internal/httpapi"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/rates"
)

// ratesFixture is newFixture with the rate routes, a second advertiser and an operator
// company (an affiliate-kind company named in RatesOptions.Operators).
type ratesFixture struct {
	*fixture
	otherAdv, operator string
}

func newRatesFixture(t testing.TB) *ratesFixture {
	t.Helper()
	f := &ratesFixture{fixture: newFixture(t)}
	for _, dst := range []*string{&f.otherAdv, &f.operator} {
		co, _, err := f.ids.CreateCompany(context.Background(), identity.NewCompany{Kind: identity.Advertiser, Name: "co",
			OwnerEmail: ids.New("usr") + "@example.test"})
		if err != nil {
			t.Fatal(err)
		}
		*dst = co.ID
	}
	f.srv.MountRates(rates.New(f.db, nil), httpapi.RatesOptions{Operators: []string{f.operator}})
	return f
}

// rate is an exchange rate answer.
type rate struct {
	Date      string `json:"date"`
	Base      string `json:"base"`
	Quote     string `json:"quote"`
	Rate      string `json:"rate"`
	CompanyID string `json:"company_id"`
}

// ratesOf returns the rates of a list answer, failing unless it is a 200.
func ratesOf(t *testing.T, r response) list[rate] {
	t.Helper()
	if r.status != 200 {
		t.Fatalf("list = %d %s", r.status, r.raw)
	}
	return decode[list[rate]](t, r)
}

func csvHeaders(h map[string]string) map[string]string {
	out := map[string]string{"Content-Type": "text/csv"}
	for k, v := range h {
		out[k] = v
	}
	return out
}

func TestKeepingExchangeRates(t *testing.T) {
	f := newRatesFixture(t)
	owner := f.session(t, f.advID, identity.Advertiser, "owner")
	member := f.session(t, f.advID, identity.Advertiser, "member")
	set := func(h map[string]string, query, body string) response {
		return f.do(t, "PUT", "/api/rates"+query, h, body)
	}
	r := set(owner, "", `{"date": "2026-03-14", "base": "USD", "quote": "EUR", "rate": "0.917200"}`)
	if got := decode[rate](t, r); r.status != 200 || got.Rate != "0.9172" || got.Date != "2026-03-14" || got.CompanyID != f.advID {
		t.Fatalf("set: %d %s", r.status, r.raw)
	}
	// a correction replaces the day's rate
	if r := set(owner, "", `{"date": "2026-03-14", "base": "USD", "quote": "EUR", "rate": "0.9175"}`); r.status != 200 || decode[rate](t, r).Rate != "0.9175" {
		t.Fatalf("correct: %d %s", r.status, r.raw)
	}
	if r := set(member, "", `{"date": "2026-03-14", "base": "USD", "quote": "EUR", "rate": "1"}`); r.status != 403 {
		t.Fatalf("a member set a rate: %d %s", r.status, r.raw)
	}
	r = set(owner, "", `{"date": "14.03.2026", "base": "usd", "quote": "XXX", "rate": "-1"}`)
	if r.status != 400 || r.problem.Code != "validation_failed" || len(r.problem.Errors) != 4 {
		t.Fatalf("invalid: %d %s", r.status, r.raw)
	}
	if r := set(owner, "", `{"date": "2026-03-14", "base": "USD", "quote": "EUR", "rate": 0.9}`); r.status != 400 {
		t.Fatalf("a JSON number as the rate: %d %s", r.status, r.raw)
	}

	// an upload with invalid lines stores nothing and names every line
	bad := "date,base,quote,rate\n2026-03-15,USD,EUR,0.918\n2026-03-16,USD,EUR,abc\n2026-03-17,GBP\n2026-03-15,USD,EUR,0.919\n"
	r = f.do(t, "POST", "/api/rates/import", csvHeaders(owner), bad)
	if r.status != 422 || r.problem.Code != "invalid_rates" {
		t.Fatalf("bad upload: %d %s", r.status, r.raw)
	}
	var lines []string
	for _, l := range decode[struct {
		Lines []struct {
			Line   int          `json:"line"`
			Errors []fieldError `json:"errors"`
		} `json:"lines"`
	}](t, r).Lines {
		if len(l.Errors) == 0 {
			t.Fatalf("line %d without errors: %s", l.Line, r.raw)
		}
		lines = append(lines, fmt.Sprintf("%v:%v", l.Line, l.Errors[0].Field))
	}
	if got := strings.Join(lines, " "); got != "3:rate 4:line 5:date" {
		t.Fatalf("line errors %q", got)
	}
	if r := f.do(t, "GET", "/api/rates?from=2026-03-15", member, ""); len(ratesOf(t, r).Data) != 0 {
		t.Fatalf("a refused upload stored rates: %s", r.raw)
	}
	if r := f.do(t, "POST", "/api/rates/import", csvHeaders(owner), "day,from,to,rate\n2026-03-15,USD,EUR,1\n"); r.status != 422 {
		t.Fatalf("wrong header: %d %s", r.status, r.raw)
	}
	if r := f.do(t, "POST", "/api/rates/import", owner, `{"rates": []}`); r.status != 415 {
		t.Fatalf("JSON upload: %d %s", r.status, r.raw)
	}
	var good strings.Builder
	good.WriteString("\ufeffdate,base,quote,rate\r\n")
	for d := 1; d <= 10; d++ {
		fmt.Fprintf(&good, "2026-03-%02d,USD,EUR,0.91%02d\r\n2026-03-%02d,EUR,JPY,161.%d\r\n", d, d, d, d)
	}
	if r := f.do(t, "POST", "/api/rates/import", csvHeaders(owner), good.String()); r.status != 200 || decode[struct{ Imported int }](t, r).Imported != 20 {
		t.Fatalf("upload: %d %s", r.status, r.raw)
	}

	// list: newest day first, pages, filters
	var seen []string
	cursor := ""
	for page := 0; ; page++ {
		r := f.do(t, "GET", "/api/rates?limit=7&cursor="+cursor, member, "")
		if r.status != 200 || page > 5 {
			t.Fatalf("list: %d %s", r.status, r.raw)
		}
		p := ratesOf(t, r)
		for _, x := range p.Data {
			seen = append(seen, fmt.Sprintf("%s %s%s", x.Date, x.Base, x.Quote))
		}
		if cursor = p.NextCursor; cursor == "" {
			break
		}
	}
	if len(seen) != 21 || seen[0] != "2026-03-14 USDEUR" || seen[1] != "2026-03-10 EURJPY" || seen[2] != "2026-03-10 USDEUR" || seen[20] != "2026-03-01 USDEUR" {
		t.Fatalf("listed %v", seen)
	}
	r = f.do(t, "GET", "/api/rates?base=EUR&quote=JPY&from=2026-03-02&to=2026-03-03", member, "")
	if data := ratesOf(t, r).Data; len(data) != 2 || data[0].Rate != "161.3" {
		t.Fatalf("filtered: %s", r.raw)
	}
	if r := f.do(t, "GET", "/api/rates?from=yesterday&base=eur", member, ""); r.status != 400 || len(r.problem.Errors) != 2 {
		t.Fatalf("bad filters: %d %s", r.status, r.raw)
	}

	// tenant isolation: another advertiser sees none of them and cannot name a company;
	// an affiliate keeps no rates; the operator keeps anyone's
	other := f.session(t, f.otherAdv, identity.Advertiser, "owner")
	if r := f.do(t, "GET", "/api/rates", other, ""); len(ratesOf(t, r).Data) != 0 {
		t.Fatalf("another advertiser reads: %s", r.raw)
	}
	if r := f.do(t, "GET", "/api/rates?company_id="+f.advID, other, ""); r.status != 403 || r.problem.Code != "operator_only" {
		t.Fatalf("another advertiser names the company: %d %s", r.status, r.raw)
	}
	if r := set(other, "?company_id="+f.advID, `{"date": "2026-03-14", "base": "USD", "quote": "EUR", "rate": "9"}`); r.status != 403 {
		t.Fatalf("another advertiser set a rate of the company: %d %s", r.status, r.raw)
	}
	affUser, err := f.ids.UserByEmail(context.Background(), "affiliate@example.test")
	if err != nil {
		t.Fatal(err)
	}
	affCo := f.session(t, affUser.CompanyID, identity.Affiliate, "owner")
	if r := f.do(t, "GET", "/api/rates", affCo, ""); r.status != 403 || r.problem.Code != "advertiser_only" {
		t.Fatalf("an affiliate: %d %s", r.status, r.raw)
	}
	op := f.session(t, f.operator, identity.Advertiser, "admin")
	if r := set(op, "?company_id="+f.advID, `{"date": "2026-03-14", "base": "GBP", "quote": "EUR", "rate": "1.17"}`); r.status != 200 || decode[rate](t, r).CompanyID != f.advID {
		t.Fatalf("the operator sets a rate: %d %s", r.status, r.raw)
	}
	if r := f.do(t, "GET", "/api/rates?base=GBP&company_id="+f.advID, op, ""); len(ratesOf(t, r).Data) != 1 {
		t.Fatalf("the operator reads: %s", r.raw)
	}
	if r := f.do(t, "GET", "/api/rates?base=GBP", member, ""); len(ratesOf(t, r).Data) != 1 {
		t.Fatalf("the advertiser sees the operator's rate: %s", r.raw)
	}
	if r := set(op, "?company_id="+ids.New(ids.Company), `{"date": "2026-03-14", "base": "GBP", "quote": "EUR", "rate": "1.17"}`); r.status != 404 {
		t.Fatalf("the operator names no company: %d %s", r.status, r.raw)
	}
}

func TestTheRateRoutesAreDocumented(t *testing.T) {
	assertAreaDocumented(t, func(s *httpapi.Server) { s.MountRates(nil, httpapi.RatesOptions{}) }, "openapi/24-rates.yaml")
}
