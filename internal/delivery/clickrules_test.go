package delivery

import (
	"context"
	"encoding/json"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/clickid"
	"github.com/partnerstream/partnerstream/internal/conversions"
	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/fraud"
	"github.com/partnerstream/partnerstream/internal/testenv/chtest"
)

// A click-stage rule holds a commission once the click loop reads the click from ClickHouse:
// commission.held reaches the affiliate's webhook and postback URL signed as the Standard
// Webhooks library verifies, with the reason code and the click's country and device (the
// postback also in {reason_codes}, {country} and {device}).
func TestAClickRuleHoldReachesReceiversWithTheClicksCountryAndDevice(t *testing.T) {
	t.Parallel()
	db, cos := newDB(t, 1)
	adv := cos[0]
	ctx := context.Background()
	aff, program, link := seedProgram(t, db, adv, "CLICKRULE1")
	if _, err := fraud.New(db, nil).Update(ctx, adv, program, map[string]fraud.Change{fraud.HostingNetwork: {Action: ptrTo(fraud.ActionHold)}}); err != nil {
		t.Fatal(err)
	}
	keys, err := clickid.ParseKeys(clickid.GenerateKeySpec())
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	click, err := keys.Mint(link, at)
	if err != nil {
		t.Fatal(err)
	}
	_, chdb, ch := chtest.Migrated(t)
	batch, err := ch.PrepareBatch(ctx, `INSERT INTO `+chdb+`.clicks (click_id, occurred_at, link_id, program_id, affiliate_id, advertiser_id,
		ip, country, asn, hosting, device_type)`)
	if err != nil {
		t.Fatal(err)
	}
	if err := batch.Append(click, at, link, program, aff, adv, "203.0.113.0", "SG", uint32(14061), uint8(1), "desktop"); err != nil {
		t.Fatal(err)
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
	cnv := conversions.New(db, conversions.Options{ClickIDs: keys, Clicks: fraud.NewClickStore(ch, chdb)})
	c, _, err := cnv.Register(ctx, adv, conversions.NewConversion{ClickID: click, ExternalID: "order-1", Amount: "80.00"})
	if err != nil || c.Commission.HeldAt != nil {
		t.Fatalf("Register: %v, held %v", err, c.Commission.HeldAt)
	}
	if n, err := cnv.DecideClicks(ctx); err != nil || n != 1 {
		t.Fatalf("DecideClicks: %d, %v", n, err)
	}

	rc := newReceiver(t, nil)
	sub, pb := newSubs(), newPostbacks()
	_, affSecret := sub.add(aff, rc.URL+"/aff", events.CommissionHeld)
	affPostback := pb.set(aff, rc.URL+"/aff-postback?codes={reason_codes}&c={country}&d={device}")
	s := newService(t, db, Options{Subscriptions: sub, Postbacks: pb})
	deliverOutbox(t, s, db, c.ID)

	secrets := map[string]string{"/aff": affSecret, "/aff-postback": affPostback}
	held := map[string]bool{}
	for _, r := range rc.requests() {
		path := r.header.Get(pathHeader)
		if err := verify(t, r, secrets[path], true); err != nil {
			t.Errorf("%s: the Standard Webhooks library refuses the delivery: %v", path, err)
		}
		var body struct {
			Event string                `json:"event"`
			Data  events.ConversionData `json:"data"`
		}
		if err := json.Unmarshal(r.body, &body); err != nil {
			t.Fatal(err)
		}
		if body.Event != events.CommissionHeld {
			continue
		}
		held[path] = true
		if !slices.Equal(body.Data.Risk.ReasonCodes(), []string{fraud.HostingNetwork}) || body.Data.Country != "SG" || body.Data.DeviceType != "desktop" ||
			body.Data.Risk.Reasons[0].Value != "AS14061" {
			t.Errorf("%s: %s", path, r.body)
		}
		if path == "/aff-postback" {
			q, _ := url.ParseQuery(r.header.Get(queryHeader))
			if q.Get("codes") != fraud.HostingNetwork || q.Get("c") != "SG" || q.Get("d") != "desktop" {
				t.Errorf("postback query %s", r.header.Get(queryHeader))
			}
		}
	}
	if !held["/aff"] || !held["/aff-postback"] {
		t.Fatalf("commission.held reached %v", held)
	}
}

func ptrTo[T any](v T) *T { return &v }
