package httpapi_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/programs"
)

// couponCode is a coupon code answer.
type couponCode struct {
	Code          string `json:"code"`
	PartnershipID string `json:"partnership_id"`
}

// Coupon codes through both API families, and conversions attributed by a code and by a
// customer, checked against the OpenAPI document as every response of f.do is.
func TestCouponCodesAndCustomersOverHTTP(t *testing.T) {
	f := newConversionsFixture(t)
	f.srv.MountPartnerships(programs.NewService(f.db, programs.Options{}))
	ctx := context.Background()
	var ptn string
	if err := f.db.QueryRow(ctx, `SELECT id FROM partnerships WHERE program_id = $1`, f.program).Scan(&ptn); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.Exec(ctx, `UPDATE programs SET recurring_months = 12 WHERE id = $1`, f.program); err != nil {
		t.Fatal(err)
	}
	adv, aff := apiKey(f.adv), apiKey(f.aff)
	_, rivalKey := f.company(t, identity.Advertiser)
	rival := apiKey(rivalKey)

	codes := "/api/v1/partnerships/" + ptn + "/coupon-codes"
	if r := f.do(t, "POST", codes, adv, `{"code": "Pod-20"}`); r.status != 201 || decode[couponCode](t, r) != (couponCode{"Pod-20", ptn}) {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	for name, c := range map[string]struct {
		headers map[string]string
		path    string
		body    string
		status  int
		code    string
	}{
		"the same code in another case":    {adv, codes, `{"code": "POD-20"}`, 409, "code_taken"},
		"a code with a space":              {adv, codes, `{"code": "POD 20"}`, 400, "validation_failed"},
		"an affiliate key":                 {aff, codes, `{"code": "MINE"}`, 403, "forbidden"},
		"another advertiser's partnership": {rival, codes, `{"code": "MINE"}`, 404, "not_found"},
		"a dashboard member":               {f.dashboardAs(t, "advertiser", "member"), "/api/partnerships/" + ptn + "/coupon-codes", `{"code": "MINE"}`, 403, "forbidden"},
	} {
		if r := f.do(t, "POST", c.path, c.headers, c.body); r.status != c.status || r.problem.Code != c.code {
			t.Errorf("%s: %d %s, want %d %s", name, r.status, r.raw, c.status, c.code)
		}
	}
	if r := f.do(t, "POST", "/api/partnerships/"+ptn+"/coupon-codes", f.dashboardAs(t, "advertiser", "owner"), `{"code": "NEWS"}`); r.status != 201 {
		t.Fatalf("dashboard create: %d %s", r.status, r.raw)
	}
	for name, h := range map[string]map[string]string{"advertiser key": adv, "affiliate key": aff} {
		if r := f.do(t, "GET", codes, h, ""); r.status != 200 || len(decode[list[couponCode]](t, r).Data) != 2 {
			t.Errorf("%s lists %d %s", name, r.status, r.raw)
		}
	}
	if r := f.do(t, "GET", "/api/partnerships/"+ptn+"/coupon-codes", f.dashboardAs(t, "affiliate", "owner"), ""); r.status != 200 || len(decode[list[couponCode]](t, r).Data) != 2 {
		t.Errorf("the affiliate's dashboard lists %d %s", r.status, r.raw)
	}
	if r := f.do(t, "GET", codes, rival, ""); r.status != 404 {
		t.Errorf("another advertiser lists: %d %s", r.status, r.raw)
	}

	t0 := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	coupon := f.do(t, "POST", "/api/v1/conversions", adv, fmt.Sprintf(`{"coupon_code": "pod-20", "customer_id": "cus-1",
		"external_id": "sub-1", "amount": "10.00", "occurred_at": %q}`, t0.Format(time.RFC3339)))
	if c := decode[conversion](t, coupon); coupon.status != 201 || c.Attribution != "coupon" || c.CouponCode == nil || *c.CouponCode != "Pod-20" ||
		c.CustomerID != "cus-1" || c.ClickID != nil || c.ClickedAt != nil || c.Commission.Amount != "1.00" {
		t.Fatalf("coupon order: %d %s", coupon.status, coupon.raw)
	}
	renewal := f.do(t, "POST", "/api/v1/conversions", adv, fmt.Sprintf(`{"customer_id": "cus-1", "type": "renewal",
		"external_id": "sub-2", "amount": "10.00", "occurred_at": %q}`, t0.Add(time.Minute).Format(time.RFC3339)))
	renewed := decode[conversion](t, renewal)
	if renewal.status != 201 || renewed.Attribution != "customer" || renewed.CouponCode != nil ||
		renewed.AffiliateID != f.affID || renewed.Commission.Amount != "1.00" {
		t.Fatalf("renewal: %d %s", renewal.status, renewal.raw)
	}
	if r := f.do(t, "GET", "/api/v1/conversions/"+renewed.ID, aff, ""); r.status != 200 || decode[conversion](t, r).Attribution != "customer" {
		t.Fatalf("the affiliate reads: %d %s", r.status, r.raw)
	}
	for name, c := range map[string]struct {
		headers map[string]string
		body    string
		status  int
		code    string
	}{
		"another advertiser's code":        {rival, `{"coupon_code": "POD-20", "external_id": "r-1"}`, 422, "unknown_coupon"},
		"another advertiser's customer":    {rival, `{"customer_id": "cus-1", "external_id": "r-2"}`, 422, "unknown_customer"},
		"an unknown customer":              {adv, `{"customer_id": "nobody", "external_id": "r-3"}`, 422, "unknown_customer"},
		"neither click, code nor customer": {adv, `{"external_id": "r-4"}`, 400, "validation_failed"},
	} {
		if r := f.do(t, "POST", "/api/v1/conversions", c.headers, c.body); r.status != c.status || r.problem.Code != c.code {
			t.Errorf("%s: %d %s, want %d %s", name, r.status, r.raw, c.status, c.code)
		}
	}

	// The postback URL takes the code and the customer too.
	tok := f.do(t, "POST", "/api/programs/"+f.program+"/postback-token", f.dashboardAs(t, "advertiser", "owner"), "")
	r := f.do(t, "GET", "/postback?token="+decode[postbackToken](t, tok).Token+"&coupon_code=NEWS&customer_id=cus-2&external_id=pb-1&amount=5", nil, "")
	if a := decode[postbackAnswer](t, r); r.status != 200 || a.Attribution != "coupon" || !a.Created {
		t.Fatalf("postback with a code: %d %s", r.status, r.raw)
	}
}
