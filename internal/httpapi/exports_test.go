package httpapi_test

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/conversions"
	"github.com/partnerstream/partnerstream/internal/httpapi"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/stats"
)

// exportsFixture is the conversions fixture with the exports mounted.
func newExportsFixture(t *testing.T) *conversionsFixture {
	t.Helper()
	f := newConversionsFixture(t)
	f.srv.MountExports(f.svc, stats.New(f.ch, f.chDB, stats.Options{}))
	return f
}

// csvOf reads a CSV answer, failing unless it is one.
func csvOf(t *testing.T, r response) [][]string {
	t.Helper()
	if r.status != 200 || r.header.Get("Content-Type") != "text/csv; charset=utf-8" ||
		!strings.HasPrefix(r.header.Get("Content-Disposition"), "attachment; filename=") {
		t.Fatalf("not a CSV file: %d %v %.300s", r.status, r.header, r.raw)
	}
	recs, err := csv.NewReader(strings.NewReader(r.raw)).ReadAll()
	if err != nil {
		t.Fatalf("%v in %q", err, r.raw)
	}
	return recs
}

// column returns the named column's cells, below the header.
func column(t *testing.T, recs [][]string, name string) []string {
	t.Helper()
	for i, h := range recs[0] {
		if h == name {
			var out []string
			for _, r := range recs[1:] {
				out = append(out, r[i])
			}
			return out
		}
	}
	t.Fatalf("no column %q in %v", name, recs[0])
	return nil
}

func TestConversionAndCommissionExportsCarryTheListsFiltersAndGuardFormulas(t *testing.T) {
	f := newExportsFixture(t)
	adv := apiKey(f.adv)
	first := f.register(t, "=HYPERLINK(\"https://evil.example\",\"x\")", "42.50")
	f.register(t, "order,\"2\"", "10.00")
	third := f.register(t, "-1+2", "0.05")
	if r := f.do(t, "POST", "/api/v1/conversions/"+third.ID+"/approve", adv, ""); r.status != 200 {
		t.Fatalf("approve: %d %s", r.status, r.raw)
	}

	recs := csvOf(t, f.do(t, "GET", "/api/v1/conversions.csv", adv, ""))
	if got := column(t, recs, "external_id"); strings.Join(got, "|") != `'-1+2|order,"2"|'=HYPERLINK("https://evil.example","x")` {
		t.Errorf("external ids, newest first: %q", got)
	}
	if got := column(t, recs, "amount"); strings.Join(got, "|") != "0.05|10.00|42.50" {
		t.Errorf("amounts: %q", got)
	}
	if got := column(t, recs, "commission_amount"); strings.Join(got, "|") != "0.01|1.00|4.25" {
		t.Errorf("commissions: %q", got)
	}
	if recs[3][0] != first.ID {
		t.Errorf("the oldest row is %q, want %v", recs[3][0], first.ID)
	}
	// The companies' names come last, after the ids the file always had.
	if n := len(recs[0]); recs[0][n-2] != "advertiser_name" || recs[0][n-1] != "affiliate_name" {
		t.Errorf("the last columns are %q, want advertiser_name, affiliate_name", recs[0][n-2:])
	}
	if got := column(t, recs, "affiliate_name"); got[0] == "" || got[0] != got[2] {
		t.Errorf("affiliate names %q, want the affiliate's name on every row", got)
	}

	// The list's filters, in the dashboard too.
	recs = csvOf(t, f.do(t, "GET", "/api/conversions.csv?status=approved", f.dashboardAs(t, identity.Advertiser, "owner"), ""))
	if got := column(t, recs, "id"); len(got) != 1 || got[0] != third.ID {
		t.Errorf("status=approved exported %q", got)
	}
	future := time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)
	if recs := csvOf(t, f.do(t, "GET", "/api/v1/conversions.csv?from="+future, adv, "")); len(recs) != 1 {
		t.Errorf("a range without conversions: %q, want the header alone", recs)
	}

	// Commissions from the partner API: the affiliate's own.
	recs = csvOf(t, f.do(t, "GET", "/api/partner-api/commissions.csv?status=pending", apiKey(f.aff), ""))
	if got := column(t, recs, "amount"); strings.Join(got, "|") != "1.00|4.25" {
		t.Errorf("the affiliate's pending commissions: %q", got)
	}
	if n := len(recs[0]); recs[0][n-2] != "advertiser_name" || recs[0][n-1] != "affiliate_name" {
		t.Errorf("the commissions' last columns are %q, want advertiser_name, affiliate_name", recs[0][n-2:])
	}
	if got := column(t, recs, "advertiser_name"); strings.Join(got, "|") != "advertiser co|advertiser co" {
		t.Errorf("the commissions' brand names: %q", got)
	}
	if got := column(t, recs, "affiliate_name"); strings.Join(got, "|") != "affiliate co|affiliate co" {
		t.Errorf("the commissions' affiliate names: %q", got)
	}

	// Bad filters are the list's problems, before any file.
	for _, path := range []string{"/api/v1/conversions.csv?status=won", "/api/v1/commissions.csv?program_id=nope", "/api/partner-api/commissions.csv?from=yesterday"} {
		key := adv
		if strings.Contains(path, "partner-api") {
			key = apiKey(f.aff)
		}
		r := f.do(t, "GET", path, key, "")
		if r.status != 400 || r.problem.Code != "validation_failed" || !strings.HasPrefix(r.header.Get("Content-Type"), "application/problem+json") {
			t.Errorf("%s: %d %s %s, want a 400 problem", path, r.status, r.header.Get("Content-Type"), r.raw)
		}
	}
}

func TestExportsHoldOnlyTheCallersRows(t *testing.T) {
	f := newExportsFixture(t)
	f.register(t, "mine", "10.00")
	otherID, otherKey := f.company(t, identity.Advertiser)
	otherProgram := f.newProgram(t, otherID, "EUR")
	clk := f.clicks(t, otherProgram, time.Now().Add(-time.Hour), 1)[0]
	if r := f.do(t, "POST", "/api/v1/conversions", apiKey(otherKey),
		fmt.Sprintf(`{"click_id": %q, "external_id": "theirs", "amount": "5.00"}`, clk)); r.status != 201 {
		t.Fatalf("the other advertiser's conversion: %d %s", r.status, r.raw)
	}
	_, strangerKey := f.company(t, identity.Affiliate)
	for _, c := range []struct {
		key, path, want string
	}{
		{f.adv, "/api/v1/conversions.csv", "mine"},
		{otherKey, "/api/v1/conversions.csv", "theirs"},
		{f.aff, "/api/partner-api/commissions.csv", "2 rows"},
		{strangerKey, "/api/partner-api/commissions.csv", "0 rows"},
		{f.adv, "/api/v1/commissions.csv", "1 rows"},
		{strangerKey, "/api/v1/payouts.csv", "0 rows"},
		{strangerKey, "/api/v1/stats.csv?group_by=program", "0 rows"},
	} {
		recs := csvOf(t, f.do(t, "GET", c.path, apiKey(c.key), ""))
		got := fmt.Sprintf("%d rows", len(recs)-1)
		if strings.HasSuffix(c.path, "conversions.csv") {
			got = strings.Join(column(t, recs, "external_id"), " ")
		}
		if got != c.want {
			t.Errorf("%s with key %.12s: %q, want %q", c.path, c.key, got, c.want)
		}
	}
}

func TestThePayoutExportIsOneMassPaymentRowPerAffiliateAndCurrency(t *testing.T) {
	f := newExportsFixture(t)
	ctx := context.Background()
	for i, amount := range []string{"100.00", "20.00", "3.00"} {
		c := f.register(t, fmt.Sprintf("order-%d", i), amount)
		if _, err := f.svc.ChangeStatus(ctx, f.advID, c.ID, conversions.Approved, ""); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			// The first payout gathers the first commission alone.
			if _, err := f.svc.CreatePayout(ctx, f.advID, conversions.NewPayout{AffiliateID: f.affID, Currency: "EUR",
				PeriodStart: time.Now().Add(-48 * time.Hour), PeriodEnd: time.Now().Add(time.Minute)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := f.svc.CreatePayout(ctx, f.advID, conversions.NewPayout{AffiliateID: f.affID, Currency: "EUR",
		PeriodStart: time.Now().Add(-48 * time.Hour), PeriodEnd: time.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	// A payee name someone typed as a formula.
	if _, err := f.db.Exec(ctx, `UPDATE companies SET name = '@SUM(1+1)' WHERE id = $1`, f.affID); err != nil {
		t.Fatal(err)
	}
	recs := csvOf(t, f.do(t, "GET", "/api/payouts.csv?status=pending", f.dashboardAs(t, identity.Advertiser, "owner"), ""))
	if strings.Join(recs[0][:5], ",") != "payee_email,amount,currency,reference,payee_name" || len(recs) != 2 {
		t.Fatalf("file: %q", recs)
	}
	row := recs[1]
	ids := strings.Fields(column(t, recs, "payout_ids")[0])
	if row[0] != "affiliate@example.test" || row[1] != "12.30" || row[2] != "EUR" || row[3] != ids[0] || row[4] != "'@SUM(1+1)" ||
		len(ids) != 2 || column(t, recs, "payout_count")[0] != "2" || column(t, recs, "commission_count")[0] != "3" {
		t.Errorf("row %q", row)
	}
	// Both companies are named in the last two columns, guarded like every text.
	if n := len(row); strings.Join(recs[0][n-2:], ",") != "advertiser_name,affiliate_name" || row[n-2] != "advertiser co" || row[n-1] != "'@SUM(1+1)" {
		t.Errorf("the names %q of %q", row[n-2:], recs[0][n-2:])
	}
	// The affiliate reads its own totals from the partner API.
	recs = csvOf(t, f.do(t, "GET", "/api/partner-api/payouts.csv", apiKey(f.aff), ""))
	if len(recs) != 2 || recs[1][1] != "12.30" {
		t.Errorf("the affiliate's totals: %q", recs)
	}
	// The payout e-mail of the affiliate's partner profile is where the money goes.
	if _, err := f.db.Exec(ctx, `INSERT INTO partner_profiles (company_id, payout_email) VALUES ($1, 'pay@aff.example')`, f.affID); err != nil {
		t.Fatal(err)
	}
	if recs := csvOf(t, f.do(t, "GET", "/api/v1/payouts.csv", apiKey(f.adv), "")); len(recs) != 2 || recs[1][0] != "pay@aff.example" {
		t.Errorf("the payee of a profile with a payout e-mail: %q", recs)
	}
	if recs := csvOf(t, f.do(t, "GET", "/api/v1/payouts.csv?status=paid", apiKey(f.adv), "")); len(recs) != 1 {
		t.Errorf("no paid payout: %q", recs)
	}
	if r := f.do(t, "GET", "/api/v1/payouts.csv?status=due", apiKey(f.adv), ""); r.status != 400 {
		t.Errorf("a bad status: %d %s", r.status, r.raw)
	}
}

func TestTheStatsExportTakesEveryGrouping(t *testing.T) {
	f := newExportsFixture(t)
	yesterday := time.Now().UTC().AddDate(0, 0, -1)
	f.clicks(t, f.program, yesterday, 3)
	adv := apiKey(f.adv)
	day := yesterday.Format(time.DateOnly)
	recs := csvOf(t, f.do(t, "GET", "/api/v1/stats.csv?from="+day, adv, ""))
	if strings.Join(recs[0], ",") != "day,currency,clicks,unique_clicks,conversions,pending,approved,rejected,paid,reversed,sale_amount,commission,epc,conversion_rate" ||
		len(recs) != 3 || recs[1][0] != day || recs[1][2] != "3" || recs[2][2] != "0" {
		t.Errorf("by day: %q", recs)
	}
	names := map[string]string{"program": "program_name:p", "affiliate": "affiliate_name:affiliate co", "link": "program_name:p,affiliate_name:affiliate co"}
	for g, header := range map[string]string{"program": "program_id", "affiliate": "affiliate_id", "link": "link_id,program_id,affiliate_id", "sub1": "sub1", "attribution": "attribution"} {
		recs := csvOf(t, f.do(t, "GET", "/api/stats.csv?group_by="+g+"&from="+day, f.dashboardAs(t, identity.Advertiser, "owner"), ""))
		// The names of the keys come after the figures: header then value, for each.
		var got []string
		for i := slices.Index(recs[0], "conversion_rate") + 1; i < len(recs[0]) && len(recs) > 1; i++ {
			got = append(got, recs[0][i]+":"+recs[1][i])
		}
		if strings.Join(got, ",") != names[g] {
			t.Errorf("by %s, the names %q, want %q", g, got, names[g])
		}
		rows := 1
		switch g {
		case "link":
			rows = 1 // the fixture's clicks of one call share a link
		case "attribution":
			rows = 0 // clicks only, and a click has no attribution
		}
		if !strings.HasPrefix(strings.Join(recs[0], ","), header+",currency,clicks,") || len(recs) != rows+1 {
			t.Errorf("by %s: %q", g, recs)
		}
	}
	if recs := csvOf(t, f.do(t, "GET", "/api/partner-api/stats.csv?group_by=program&from="+day, apiKey(f.aff), "")); len(recs) != 2 || recs[1][0] != f.program ||
		column(t, recs, "program_name")[0] != "p" {
		t.Errorf("the affiliate's programs: %q", recs)
	}
	for _, q := range []string{"group_by=week", "from=2026-13-01", "currency=eur", "from=9999-12-01&to=9999-12-31", "from=1969-12-31&to=1970-01-31"} {
		if r := f.do(t, "GET", "/api/v1/stats.csv?"+q, adv, ""); r.status != 400 || r.problem.Code != "validation_failed" {
			t.Errorf("%s: %d %s, want a 400 problem", q, r.status, r.raw)
		}
	}
}

// downExporter is a conversion store that is down.
type downExporter struct{ httpapi.ConversionExporter }

func (downExporter) ConversionRows(context.Context, conversions.Viewer, conversions.Filter) (*conversions.Rows[conversions.Conversion], error) {
	return nil, errors.New("closed pool")
}

func TestAnExportWhoseStoreFailsIsAProblemNotAFile(t *testing.T) {
	f := newFakeFixture(t)
	f.srv.MountExports(downExporter{}, nil)
	// Not f.do: the document lists no 500s.
	req := httptest.NewRequest("GET", "/api/v1/conversions.csv", nil)
	req.Header.Set("x-api-key", f.adv)
	resp, err := f.srv.App().Test(req, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 500 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
		t.Errorf("a closed store: %d %s %s, want a 500 problem", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
}
