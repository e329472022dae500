package httpapi_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/clickid"
	"github.com/partnerstream/partnerstream/internal/conversions"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/tracking"
)

// The redirect's signed click id converts at once, with no click store at all, on every
// route that registers conversions; every bad signed id gets one and the same 422.
func TestASignedClickIDConvertsRightAfterTheRedirectWithoutClickHouse(t *testing.T) {
	f := newTrackingFixture(t, tracking.ModeAck)
	ctx := context.Background()
	svc := conversions.New(f.db, conversions.Options{ClickIDs: f.clickIDs})
	f.srv.MountConversions(svc)
	f.srv.MountConversionPostback(svc)
	token, err := svc.RotatePostbackToken(ctx, f.advID, f.program)
	if err != nil {
		t.Fatal(err)
	}
	code := f.createLink(t, `{"program_id":"`+f.program+`"}`).Code
	click := func() string {
		t.Helper()
		r := f.do(t, "GET", "/c/"+code, nil, "")
		loc, err := url.Parse(r.header.Get("Location"))
		if r.status != 302 || err != nil || !clickid.Signed(loc.Query().Get("ps_click_id")) {
			t.Fatalf("redirect: %d to %q", r.status, r.header.Get("Location"))
		}
		return loc.Query().Get("ps_click_id")
	}
	adv := apiKey(f.adv)
	if r := f.do(t, "POST", "/api/v1/conversions", adv, `{"click_id":"`+click()+`","external_id":"api","amount":"10"}`); r.status != 201 {
		t.Fatalf("POST /api/v1/conversions right after the redirect: %d %s", r.status, r.raw)
	}
	if r := f.do(t, "POST", "/api/conversions", f.dashboardAs(t, identity.Advertiser, "admin"), `{"click_id":"`+click()+`","external_id":"dashboard","amount":"10"}`); r.status != 201 {
		t.Fatalf("POST /api/conversions right after the redirect: %d %s", r.status, r.raw)
	}
	if r := f.do(t, "GET", "/postback?token="+token+"&click_id="+click()+"&external_id=pb&amount=1", nil, ""); r.status != 200 || !decode[postbackAnswer](t, r).Created {
		t.Fatalf("GET /postback right after the redirect: %d %s", r.status, r.raw)
	}
	form := url.Values{"token": {token}, "click_id": {click()}, "external_id": {"pb-form"}, "amount": {"1"}}.Encode()
	if r := f.do(t, "POST", "/postback", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, form); r.status != 200 || !decode[postbackAnswer](t, r).Created {
		t.Fatalf("POST /postback right after the redirect: %d %s", r.status, r.raw)
	}

	_, rivalKey := f.company(t, identity.Advertiser)
	forger, err := clickid.ParseKeys(clickid.GenerateKeySpec())
	if err != nil {
		t.Fatal(err)
	}
	var linkID string
	if err := f.db.QueryRow(ctx, `SELECT id FROM tracking_links WHERE code = $1`, code).Scan(&linkID); err != nil {
		t.Fatal(err)
	}
	good := click()
	forged, _ := forger.Mint(linkID, timeOf(t, f.clickIDs, good))
	unknown, _ := f.clickIDs.Mint(ids.New(ids.Link), timeOf(t, f.clickIDs, good))
	altered := good[:30] + string(ids.Alphabet[(strings.IndexByte(ids.Alphabet, good[30])+1)%32]) + good[31:]
	var detail string
	for name, c := range map[string]struct{ key, id string }{
		"forged":               {f.adv, forged},
		"altered":              {f.adv, altered},
		"another advertiser's": {rivalKey, good},
		"of an unknown link":   {f.adv, unknown},
	} {
		r := f.do(t, "POST", "/api/v1/conversions", apiKey(c.key), `{"click_id":"`+c.id+`","external_id":"x"}`)
		if detail == "" {
			detail = r.problem.Detail
		}
		if r.status != 422 || r.problem.Code != "unknown_click" || r.problem.Detail != detail || r.header.Get("Retry-After") != "" {
			t.Errorf("%s click id: %d %s, want 422 unknown_click %q like the others", name, r.status, r.raw, detail)
		}
	}
}

func timeOf(t *testing.T, ks clickid.Keys, id string) time.Time {
	t.Helper()
	c, ok := ks.Verify(id)
	if !ok {
		t.Fatalf("%s does not verify", id)
	}
	return c.At
}
