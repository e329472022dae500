package httpapi_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	stripewebhook "github.com/stripe/stripe-go/v82/webhook"

	"github.com/partnerstream/partnerstream/internal/billing"
	"github.com/partnerstream/partnerstream/internal/clickid"
	"github.com/partnerstream/partnerstream/internal/conversions"
	"github.com/partnerstream/partnerstream/internal/identity"
	"github.com/partnerstream/partnerstream/internal/ids"
)

// A brand connects Stripe in the dashboard and Stripe posts to the URL it got: a signed
// event registers its conversion, a redelivery answers 200 and changes nothing, a bad
// signature 400 and a wrong token 401; disconnecting ends the URL.
func TestStripeIntegrationOverHTTP(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	keys, err := clickid.ParseKeys(clickid.GenerateKeySpec())
	if err != nil {
		t.Fatal(err)
	}
	conv := conversions.New(f.db, conversions.Options{ClickIDs: keys})
	f.srv.MountIntegrations(billing.New(f.db, conv, billing.Options{Log: quiet}))
	program, ptn, link := ids.New(ids.Program), ids.New(ids.Partnership), ids.New(ids.Link)
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`INSERT INTO programs (id, advertiser_id, name, landing_url, currency, commission_type, commission_value)
			VALUES ($1, $2, 'p', 'https://shop.example/', 'EUR', 'percent', 1000)`, []any{program, f.advID}},
		{`INSERT INTO partnerships (id, program_id, affiliate_id, advertiser_id, status) VALUES ($1, $2, $3, $4, 'approved')`,
			[]any{ptn, program, f.affID, f.advID}},
		{`INSERT INTO tracking_links (id, code, partnership_id, program_id, affiliate_id, advertiser_id) VALUES ($1, $2, $3, $4, $5, $6)`,
			[]any{link, strings.ToUpper(link[len(link)-12:]), ptn, program, f.affID, f.advID}},
	} {
		if _, err := f.db.Exec(ctx, q.sql, q.args...); err != nil {
			t.Fatal(err)
		}
	}
	path := "/api/programs/" + program + "/integrations/stripe"
	admin := f.dashboardAs(t, identity.Advertiser, "owner")
	const secret = "whsec_httpTestSecret"

	expect(t, f.do(t, "GET", path, admin, ""), 404, "not_found")
	expect(t, f.do(t, "PUT", path, f.dashboardAs(t, identity.Affiliate, "owner"), `{"endpoint_secret":"`+secret+`"}`), 403, "advertiser_only")
	expect(t, f.do(t, "PUT", path, f.dashboardAs(t, identity.Advertiser, "member"), `{"endpoint_secret":"`+secret+`"}`), 403, "forbidden")
	bad := f.do(t, "PUT", path, admin, `{"endpoint_secret":"sk_test_123"}`)
	expect(t, bad, 400, "validation_failed")
	if len(bad.problem.Errors) != 1 || bad.problem.Errors[0].Field != "endpoint_secret" {
		t.Fatalf("a secret key as endpoint secret: %s", bad.raw)
	}
	otherAdv, _ := f.company(t, identity.Advertiser)
	expect(t, f.do(t, "PUT", path, f.session(t, otherAdv, identity.Advertiser, "owner"), `{"endpoint_secret":"`+secret+`"}`), 404, "not_found")

	r := f.do(t, "PUT", path, admin, `{"endpoint_secret":"`+secret+`"}`)
	expect(t, r, 200, "")
	url := decode[struct {
		WebhookURL string `json:"webhook_url"`
	}](t, r).WebhookURL
	if !strings.HasPrefix(url, "/api/integrations/stripe/stp_") {
		t.Fatalf("webhook_url %q", url)
	}
	if strings.Contains(f.do(t, "GET", path, admin, "").raw, "stp_") {
		t.Fatal("the integration shows its token again")
	}

	clk, err := keys.Mint(link, time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	event := `{"id": "evt_1NG8Du2eZvKYlo2CUI79vXWy", "object": "event", "api_version": "2025-03-31.basil", "created": ` +
		strconv.FormatInt(time.Now().Unix(), 10) + `, "type": "checkout.session.completed", "data": {"object": {"id": "cs_test_1", "object": "checkout.session",
		"amount_total": 4250, "currency": "eur", "customer": "cus_1", "mode": "payment", "payment_intent": "pi_1",
		"payment_status": "paid", "client_reference_id": "` + clk + `", "metadata": {}}}}`
	sign := func(secret string) map[string]string {
		return map[string]string{"Stripe-Signature": stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: []byte(event), Secret: secret}).Header}
	}
	expect(t, f.do(t, "POST", url, sign("whsec_notTheSecret"), event), 400, "invalid_signature")
	expect(t, f.do(t, "POST", url, nil, event), 400, "invalid_signature")
	expect(t, f.do(t, "POST", strings.TrimSuffix(url, url[len(url)-1:])+"x", sign(secret), event), 401, "invalid_integration_token")

	type outcome struct {
		Outcome      string  `json:"outcome"`
		ConversionID *string `json:"conversion_id"`
	}
	first := f.do(t, "POST", url, sign(secret), event)
	expect(t, first, 200, "")
	got := decode[outcome](t, first)
	if got.Outcome != billing.OutcomeRegistered || got.ConversionID == nil {
		t.Fatalf("first delivery: %s", first.raw)
	}
	again := f.do(t, "POST", url, sign(secret), event)
	expect(t, again, 200, "")
	if decode[outcome](t, again).Outcome != billing.OutcomeDuplicate {
		t.Fatalf("redelivery: %s", again.raw)
	}
	c, err := conv.Get(ctx, conversions.Viewer{CompanyID: f.advID}, *got.ConversionID)
	if err != nil {
		t.Fatal(err)
	}
	if c.Amount != 4250 || c.ClickID != clk || c.ExternalID != "pi_1" {
		t.Fatalf("conversion %+v", c)
	}
	status := decode[struct {
		LastEventAt *time.Time `json:"last_event_at"`
	}](t, f.do(t, "GET", path, admin, ""))
	if status.LastEventAt == nil {
		t.Fatal("last_event_at is not set after an event")
	}

	expect(t, f.do(t, "DELETE", path, admin, ""), 204, "")
	expect(t, f.do(t, "POST", url, sign(secret), event), 401, "invalid_integration_token")
	expect(t, f.do(t, "DELETE", path, admin, ""), 404, "not_found")
}
