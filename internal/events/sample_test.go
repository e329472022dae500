package events

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// Every sample is a well-formed event of its type with the company on the side asked, whose
// webhook body a receiver reads like a real one's.
func TestSamplesAreEventsOfTheCompany(t *testing.T) {
	now := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	if _, ok := Sample("click.created", "co_1", false, now); ok {
		t.Error("a type without a sample made one")
	}
	for _, typ := range SampleTypes {
		for _, affiliate := range []bool{false, true} {
			e, ok := Sample(typ, "co_me", affiliate, now)
			if !ok {
				t.Fatalf("%s has no sample", typ)
			}
			mine := e.AdvertiserID
			if affiliate {
				mine = e.AffiliateID
			}
			if e.Type != typ || mine != "co_me" || e.AdvertiserID == e.AffiliateID || !e.OccurredAt.Equal(now) || !strings.HasPrefix(e.ID, "evt_") {
				t.Errorf("%s (affiliate %v): envelope %+v", typ, affiliate, e)
			}
			var data struct {
				Status, Amount, Currency string
				AdvertiserID             string `json:"advertiser_id"`
				AffiliateID              string `json:"affiliate_id"`
			}
			body, err := WebhookBody(e)
			if err != nil || json.Unmarshal(e.Data, &data) != nil {
				t.Fatalf("%s: body %s, %v", typ, body, err)
			}
			if data.AdvertiserID != e.AdvertiserID || data.AffiliateID != e.AffiliateID || data.Status == "" || data.Currency != "USD" || data.Amount == "" {
				t.Errorf("%s: data %s", typ, e.Data)
			}
			if !strings.HasPrefix(string(body), `{"event":"`+typ+`","data":{"id":"`) {
				t.Errorf("%s: body %s", typ, body)
			}
		}
	}
}

// Webhooks and postbacks send the event data as it is: the attribution fields come after the
// fields receivers always had, which keep their names and meaning.
func TestTheWebhookBodyCarriesTheAttribution(t *testing.T) {
	data, _ := json.Marshal(ConversionData{ID: "cnv_1", Type: "renewal", Amount: "10.00", Status: "pending", Currency: "EUR",
		ExternalID: "inv-2", Attribution: "customer", CustomerID: "cus-1", Version: 1})
	body, err := WebhookBody(Envelope{ID: "evt_1", Type: ConversionCreated, Data: data})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Data map[string]any `json:"data"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	d := got.Data
	if d["id"] != "cnv_1" || d["type"] != "renewal" || d["amount"] != "10.00" || d["status"] != "pending" ||
		d["attribution"] != "customer" || d["customer_id"] != "cus-1" || d["coupon_code"] != nil || d["click_id"] != nil {
		t.Fatalf("data %s", body)
	}
}
