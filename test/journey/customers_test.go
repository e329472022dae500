package journey

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/clickid"
	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/kafka"
)

// attributed is a registered conversion with what attributed it.
type attributed struct {
	ID          string  `json:"id"`
	AffiliateID string  `json:"affiliate_id"`
	Attribution string  `json:"attribution"`
	ClickID     *string `json:"click_id"`
	CouponCode  *string `json:"coupon_code"`
	Commission  struct {
		Amount string `json:"amount"`
	} `json:"commission"`
}

// TestJourneyCustomersAndCoupons plays the two ways affiliate revenue comes without a click
// on every order, with every component in its own process: a subscription customer brought
// by a click and renewing monthly for 14 months under a 12-month recurring rule, a podcaster's
// coupon code on an order without a click, and one order with a click and a code of two
// affiliates.
func TestJourneyCustomersAndCoupons(t *testing.T) {
	s := newStack(t)
	w := setUp(t, s)
	s.call(apiCall{method: "PATCH", path: "/api/programs/" + w.programID, as: w.adv, auth: "session", body: map[string]any{
		"commission": map[string]any{"type": "percent", "percent": "10", "recurring": map[string]int{"months": 12}}}}, nil, http.StatusOK)

	// A podcaster joins and gets a code, which it can read through its own key.
	pod, ptnID := w.join(t, "Journey Podcast")
	s.call(apiCall{method: "POST", path: "/api/v1/partnerships/" + ptnID + "/coupon-codes", as: w.adv, auth: "key",
		body: map[string]string{"code": "SHOES-POD"}}, nil, http.StatusCreated)
	var codes struct {
		Data []struct {
			Code string `json:"code"`
		} `json:"data"`
	}
	s.call(apiCall{method: "GET", path: "/api/v1/partnerships/" + ptnID + "/coupon-codes", as: pod, auth: "key"}, &codes, http.StatusOK)
	if len(codes.Data) != 1 || codes.Data[0].Code != "SHOES-POD" {
		t.Fatalf("journey: the podcaster's codes: %+v", codes.Data)
	}

	t.Run("a subscription brought by a click earns 12 of its 14 monthly payments", func(t *testing.T) {
		// The customer clicked 14 months ago: the click reaches the clicks topic as the
		// redirect wrote it then, and ingest stores it.
		start := time.Now().UTC().AddDate(0, -14, 0).Truncate(time.Second)
		clickID := w.pastClick(t, start.Add(-time.Hour))
		var earning, nothing int
		for m := range 14 {
			body := map[string]string{"customer_id": "journey-sub-1", "external_id": fmt.Sprintf("sub-invoice-%d", m), "amount": "20.00",
				"type": "renewal", "occurred_at": start.AddDate(0, m, 0).Format(time.RFC3339)}
			want := "customer"
			if m == 0 {
				body["click_id"], body["type"], want = clickID, "sale", "click"
			}
			c := w.register(t, body)
			if c.Attribution != want || c.AffiliateID != w.aff.ID {
				t.Fatalf("journey: payment %d attributed by %q to %s, want %s to the blog", m, c.Attribution, c.AffiliateID, want)
			}
			switch c.Commission.Amount {
			case "2.00":
				earning++
			case "0.00":
				nothing++
			default:
				t.Fatalf("journey: payment %d earns %s", m, c.Commission.Amount)
			}
		}
		if earning != 12 || nothing != 2 {
			t.Fatalf("journey: %d payments earned and %d did not, want 12 and 2", earning, nothing)
		}
	})

	t.Run("a coupon order without a click is the podcaster's", func(t *testing.T) {
		c := w.register(t, map[string]string{"coupon_code": "shoes-pod", "customer_id": "journey-listener-1", "external_id": "pod-order-1", "amount": "50.00"})
		if c.Attribution != "coupon" || c.AffiliateID != pod.ID || c.CouponCode == nil || *c.CouponCode != "SHOES-POD" || c.ClickID != nil || c.Commission.Amount != "5.00" {
			t.Fatalf("journey: coupon order: %+v", c)
		}
		// The listener's next order, without the code, is the podcaster's too.
		if again := w.register(t, map[string]string{"customer_id": "journey-listener-1", "external_id": "pod-order-2", "amount": "50.00"}); again.AffiliateID != pod.ID || again.Attribution != "customer" {
			t.Fatalf("journey: the listener's next order: %+v", again)
		}
		// Another advertiser's order cannot use the code: it is unknown to it.
		other := s.signUp("advertiser", "Journey Other Shop")
		status, body, err := s.try(apiCall{method: "POST", path: "/api/v1/conversions", as: other, auth: "key",
			body: map[string]string{"coupon_code": "SHOES-POD", "external_id": "steal-1", "amount": "50.00"}})
		if err != nil || status != http.StatusUnprocessableEntity || !jsonHasCode(body, "unknown_coupon") {
			t.Fatalf("journey: another advertiser's order with the code: %d %v %s", status, err, body)
		}
		// The podcaster's postback says what attributed the order.
		w.awaitReceipt(t, w.postbacks[pod.ID], func(d receiptData) bool {
			return d.ID == c.ID && d.Attribution == "coupon" && d.CouponCode == "SHOES-POD" && d.CustomerID == "journey-listener-1"
		})
		w.awaitReceipt(t, w.webhooks[w.adv.ID], func(d receiptData) bool { return d.ID == c.ID && d.Attribution == "coupon" })
	})

	t.Run("a click and a code of two affiliates on one order: the click came first", func(t *testing.T) {
		clickID, err := newVisitor(99).click(s.baseURL, w.linkCode)
		if err != nil {
			t.Fatal(err)
		}
		c := w.register(t, map[string]string{"click_id": clickID, "coupon_code": "SHOES-POD", "external_id": "both-1", "amount": "30.00"})
		if c.Attribution != "click" || c.AffiliateID != w.aff.ID || c.Commission.Amount != "3.00" {
			t.Fatalf("journey: click and code: %+v", c)
		}
	})

	t.Run("the statistics group the conversions by attribution", func(t *testing.T) {
		// The longest range the API takes (400 days) starts after the subscription's first,
		// clicked, payment 14 months ago; the other click is the two-affiliate order.
		want := map[string]int{"click": 1, "customer": 14, "coupon": 1}
		deadline := time.Now().Add(60 * time.Second)
		for {
			var report struct {
				Data []struct {
					Attribution string `json:"attribution"`
					Conversions struct {
						Total int `json:"total"`
					} `json:"conversions"`
				} `json:"data"`
			}
			from := time.Now().UTC().AddDate(0, 0, -399).Format(time.DateOnly)
			s.call(apiCall{method: "GET", path: "/api/v1/stats?group_by=attribution&from=" + from, as: w.adv, auth: "key"}, &report, http.StatusOK)
			got := map[string]int{}
			for _, r := range report.Data {
				got[r.Attribution] = r.Conversions.Total
			}
			if fmt.Sprint(got) == fmt.Sprint(want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("journey: conversions by attribution %v, want %v", got, want)
			}
			time.Sleep(500 * time.Millisecond)
		}
	})
}

// register posts a conversion with the advertiser's key, retrying while the click store has
// not got the click yet, and expects a new one.
func (w *world) register(t testing.TB, body map[string]string) attributed {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		status, raw, err := w.s.try(apiCall{method: "POST", path: "/api/v1/conversions", as: w.adv, auth: "key", body: body})
		if err == nil && status == http.StatusCreated {
			var c attributed
			if err := json.Unmarshal(raw, &c); err != nil {
				t.Fatalf("journey: conversion: %v", err)
			}
			return c
		}
		// A click produced a moment ago may not be stored yet: unknown (plain ids of the past)
		// or not ready.
		retry := err != nil || status == http.StatusServiceUnavailable || (status == http.StatusUnprocessableEntity && jsonHasCode(raw, "unknown_click"))
		if !retry || time.Now().After(deadline) {
			t.Fatalf("journey: conversion %s: status %d, %v: %s", body["external_id"], status, err, raw)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// pastClick produces a click on the blog's link at a past time to the clicks topic, as the
// redirect did then (signed with the api's key, the click time inside), and returns its id.
func (w *world) pastClick(t testing.TB, at time.Time) string {
	t.Helper()
	var links struct {
		Data []struct {
			ID   string `json:"id"`
			Code string `json:"code"`
		} `json:"data"`
	}
	w.s.call(apiCall{method: "GET", path: "/api/v1/tracking-links", as: w.aff, auth: "key"}, &links, http.StatusOK)
	linkID := ""
	for _, l := range links.Data {
		if l.Code == w.linkCode {
			linkID = l.ID
		}
	}
	keys, err := clickid.ParseKeys(w.s.clickIDKeys)
	if err != nil {
		t.Fatalf("journey: the api's click-id keys: %v", err)
	}
	clickID, err := keys.Mint(linkID, at) // the id the redirect made then
	if err != nil {
		t.Fatalf("journey: mint a past click id: %v", err)
	}
	click := events.Click{ClickID: clickID, OccurredAt: at, LinkID: linkID, ProgramID: w.programID,
		AffiliateID: w.aff.ID, AdvertiserID: w.adv.ID, Sub1: "journey", IP: "203.0.113.9",
		UserAgent: "Mozilla/5.0 (journey subscriber)", LandingURL: "https://shop.journey.example/landing"}
	value, _ := json.Marshal(click)
	p := kafka.NewProducer(kafka.Config{Brokers: []string{w.s.kafkaAddr}}, kafka.TopicClicks, kafka.ProducerOptions{})
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := kafka.FirstError(p.Produce(ctx, []kafka.Record{{Key: []byte(click.ClickID), Value: value}})); err != nil {
		t.Fatalf("journey: produce a past click: %v", err)
	}
	return click.ClickID
}

// awaitReceipt waits until the receiver took a verified delivery whose data matches.
func (w *world) awaitReceipt(t testing.TB, r *receiver, match func(receiptData) bool) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		accepted, _, _ := r.snapshot()
		for _, rc := range accepted {
			if match(rc.event.Data) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("journey: %s never got the delivery looked for", r.name)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func jsonHasCode(body []byte, code string) bool {
	var p struct {
		Code string `json:"code"`
	}
	return json.Unmarshal(body, &p) == nil && p.Code == code
}
