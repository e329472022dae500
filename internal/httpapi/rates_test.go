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

// session returns the headers of a dashboard session of company's owner, with role.
func (f *fixture) session(t *testing.T, companyID, kind, role string) map[string]string {
	t.Helper()
	var user string
	if err := f.db.QueryRow(context.Background(), `SELECT id FROM users WHERE company_id = $1 LIMIT 1`, companyID).Scan(&user); err != nil {
		t.Fatal(err)
	}
	return f.bearer(t, user, companyID, kind, role)
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
	if r.status != 200 || r.body["rate"] != "0.9172" || r.body["date"] != "2026-03-14" || r.body["company_id"] != f.advID {
		t.Fatalf("set: %d %s", r.status, r.raw)
	}
	// a correction replaces the day's rate
	if r := set(owner, "", `{"date": "2026-03-14", "base": "USD", "quote": "EUR", "rate": "0.9175"}`); r.status != 200 || r.body["rate"] != "0.9175" {
		t.Fatalf("correct: %d %s", r.status, r.raw)
	}
	if r := set(member, "", `{"date": "2026-03-14", "base": "USD", "quote": "EUR", "rate": "1"}`); r.status != 403 {
		t.Fatalf("a member set a rate: %d %s", r.status, r.raw)
	}
	r = set(owner, "", `{"date": "14.03.2026", "base": "usd", "quote": "XXX", "rate": "-1"}`)
	if r.status != 400 || r.body["code"] != "validation_failed" || len(r.body["errors"].([]any)) != 4 {
		t.Fatalf("invalid: %d %s", r.status, r.raw)
	}
	if r := set(owner, "", `{"date": "2026-03-14", "base": "USD", "quote": "EUR", "rate": 0.9}`); r.status != 400 {
		t.Fatalf("a JSON number as the rate: %d %s", r.status, r.raw)
	}

	// an upload with invalid lines stores nothing and names every line
	bad := "date,base,quote,rate\n2026-03-15,USD,EUR,0.918\n2026-03-16,USD,EUR,abc\n2026-03-17,GBP\n2026-03-15,USD,EUR,0.919\n"
	r = f.do(t, "POST", "/api/rates/import", csvHeaders(owner), bad)
	if r.status != 422 || r.body["code"] != "invalid_rates" {
		t.Fatalf("bad upload: %d %s", r.status, r.raw)
	}
	var lines []string
	for _, l := range r.body["lines"].([]any) {
		e := l.(map[string]any)
		lines = append(lines, fmt.Sprintf("%v:%v", e["line"], e["errors"].([]any)[0].(map[string]any)["field"]))
	}
	if got := strings.Join(lines, " "); got != "3:rate 4:line 5:date" {
		t.Fatalf("line errors %q", got)
	}
	if r := f.do(t, "GET", "/api/rates?from=2026-03-15", member, ""); len(r.body["data"].([]any)) != 0 {
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
	if r := f.do(t, "POST", "/api/rates/import", csvHeaders(owner), good.String()); r.status != 200 || r.body["imported"] != float64(20) {
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
		for _, x := range r.body["data"].([]any) {
			m := x.(map[string]any)
			seen = append(seen, fmt.Sprintf("%s %s%s", m["date"], m["base"], m["quote"]))
		}
		if cursor = r.body["next_cursor"].(string); cursor == "" {
			break
		}
	}
	if len(seen) != 21 || seen[0] != "2026-03-14 USDEUR" || seen[1] != "2026-03-10 EURJPY" || seen[2] != "2026-03-10 USDEUR" || seen[20] != "2026-03-01 USDEUR" {
		t.Fatalf("listed %v", seen)
	}
	r = f.do(t, "GET", "/api/rates?base=EUR&quote=JPY&from=2026-03-02&to=2026-03-03", member, "")
	if data := r.body["data"].([]any); len(data) != 2 || data[0].(map[string]any)["rate"] != "161.3" {
		t.Fatalf("filtered: %s", r.raw)
	}
	if r := f.do(t, "GET", "/api/rates?from=yesterday&base=eur", member, ""); r.status != 400 || len(r.body["errors"].([]any)) != 2 {
		t.Fatalf("bad filters: %d %s", r.status, r.raw)
	}

	// tenant isolation: another advertiser sees none of them and cannot name a company;
	// an affiliate keeps no rates; the operator keeps anyone's
	other := f.session(t, f.otherAdv, identity.Advertiser, "owner")
	if r := f.do(t, "GET", "/api/rates", other, ""); r.status != 200 || len(r.body["data"].([]any)) != 0 {
		t.Fatalf("another advertiser reads: %s", r.raw)
	}
	if r := f.do(t, "GET", "/api/rates?company_id="+f.advID, other, ""); r.status != 403 || r.body["code"] != "operator_only" {
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
	if r := f.do(t, "GET", "/api/rates", affCo, ""); r.status != 403 || r.body["code"] != "advertiser_only" {
		t.Fatalf("an affiliate: %d %s", r.status, r.raw)
	}
	op := f.session(t, f.operator, identity.Advertiser, "admin")
	if r := set(op, "?company_id="+f.advID, `{"date": "2026-03-14", "base": "GBP", "quote": "EUR", "rate": "1.17"}`); r.status != 200 || r.body["company_id"] != f.advID {
		t.Fatalf("the operator sets a rate: %d %s", r.status, r.raw)
	}
	if r := f.do(t, "GET", "/api/rates?base=GBP&company_id="+f.advID, op, ""); len(r.body["data"].([]any)) != 1 {
		t.Fatalf("the operator reads: %s", r.raw)
	}
	if r := f.do(t, "GET", "/api/rates?base=GBP", member, ""); len(r.body["data"].([]any)) != 1 {
		t.Fatalf("the advertiser sees the operator's rate: %s", r.raw)
	}
	if r := set(op, "?company_id="+ids.New(ids.Company), `{"date": "2026-03-14", "base": "GBP", "quote": "EUR", "rate": "1.17"}`); r.status != 404 {
		t.Fatalf("the operator names no company: %d %s", r.status, r.raw)
	}
}

func TestTheRateRoutesAreDocumented(t *testing.T) {
	assertAreaDocumented(t, newRatesFixture(t).fixture, "openapi/24-rates.yaml")
}
