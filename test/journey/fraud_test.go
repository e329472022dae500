package journey

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/clickid"
	"github.com/partnerstream/partnerstream/internal/enrich/enrichtest"
	"github.com/partnerstream/partnerstream/internal/events"
)

// risk is a conversion's fraud verdict as the API and the deliveries carry it.
type risk struct {
	Held    bool `json:"held"`
	Reasons []struct {
		Code   string `json:"code"`
		Action string `json:"action"`
		Value  string `json:"value"`
		Stage  string `json:"stage"`
	} `json:"reasons"`
}

// String is the verdict as "held: code/action/value ..." (stage left out: deliveries do not
// carry it), or "none".
func (r *risk) String() string {
	if r == nil || (!r.Held && len(r.Reasons) == 0) {
		return "none"
	}
	var parts []string
	for _, f := range r.Reasons {
		parts = append(parts, f.Code+"/"+f.Action+"/"+f.Value)
	}
	slices.Sort(parts)
	state := "flagged"
	if r.Held {
		state = "held"
	}
	return state + ": " + strings.Join(parts, " ")
}

// judged is a conversion with its commission's status and its verdict.
type judged struct {
	ID         string `json:"id"`
	Commission struct {
		Status string `json:"status"`
	} `json:"commission"`
	Risk *risk `json:"risk"`
}

// TestJourneyFraud plays a program with a fraudulent affiliate beside an honest one, every
// component in its own process. The visitors' addresses reach the api in X-Forwarded-For from
// a proxy it trusts on loopback, as behind a real load balancer (nothing connects to them),
// and ingest looks them up in a generated ASN database. The fraudulent affiliate sends clicks
// from a data centre, a conversion 2 seconds after its click, a paid-ads click (gclid on the
// landing page, registered by the tracking script) and an order of its own user's; the
// program holds each. Only its commissions are held, with the right reasons; auto-approval
// approves the honest ones and skips the held; a release puts one back; every hold reaches
// the receivers, signed, with its reason codes.
func TestJourneyFraud(t *testing.T) {
	start := time.Now()
	asnDB := enrichtest.ASN(t,
		enrichtest.Network{CIDR: "8.8.8.0/24", ASN: 15169, Org: "GOOGLE"}, // on the shipped hosting list
		enrichtest.Network{CIDR: "203.0.113.0/24", ASN: 3320, Org: "Deutsche Telekom AG"},
		enrichtest.Network{CIDR: "198.51.100.0/24", ASN: 3215, Org: "Orange S.A."})
	s := newStack(t, withArgs("api", "--trusted-proxies", "127.0.0.1", "--auto-approval-interval", "2s"), withArgs("ingest", "--asn-db", asnDB))
	w := setUp(t, s) // the honest affiliate is w.aff, with its link
	keys, err := clickid.ParseKeys(s.clickIDKeys)
	if err != nil {
		t.Fatalf("journey: the api's click-id keys: %v", err)
	}

	// The program approves commissions automatically (hold days 0) and holds on the four rules.
	s.call(apiCall{method: "PATCH", path: "/api/programs/" + w.programID, as: w.adv, auth: "session",
		body: map[string]any{"hold_days": 0}}, nil, http.StatusOK)
	hold := map[string]any{"action": "hold"}
	s.call(apiCall{method: "PATCH", path: "/api/programs/" + w.programID + "/fraud-rules", as: w.adv, auth: "session",
		body: map[string]any{"rules": map[string]any{"hosting_network": hold, "conversion_too_fast": hold,
			"paid_ads_click": hold, "self_referral": hold}}}, nil, http.StatusOK)
	// The shop's pages carry the tracking script, for partners that link to them directly.
	var pk struct {
		Key string `json:"key"`
	}
	s.call(apiCall{method: "POST", path: "/api/api-keys", as: w.adv, auth: "session",
		body: map[string]string{"name": "shop", "kind": "publishable", "program_id": w.programID}}, &pk, http.StatusCreated)
	s.call(apiCall{method: "PUT", path: "/api/programs/" + w.programID + "/tracking-script", as: w.adv, auth: "session",
		body: map[string]any{"origins": []string{"https://shop.journey.example"}, "params": []string{"via"}, "model": "last_click"}}, nil, http.StatusOK)

	fraud, _ := w.join(t, "Journey Deals")
	var link struct {
		Code string `json:"code"`
	}
	s.call(apiCall{method: "POST", path: "/api/v1/tracking-links", as: fraud, auth: "key", body: map[string]string{"program_id": w.programID}}, &link, http.StatusCreated)
	setUpDone := time.Now()

	// The clicks: the honest affiliate's readers from a home network; the fraudulent one's
	// from a data centre, and from home networks for the other tricks.
	from := func(addr string) http.Header { return http.Header{"X-Forwarded-For": {addr}} }
	click := func(v *visitor, code, addr string) string {
		t.Helper()
		id, err := v.clickWith(s.baseURL, code, from(addr))
		if err != nil {
			t.Fatalf("journey: click from %s: %v", addr, err)
		}
		return id
	}
	var honestClicks []string
	for i := range 3 {
		honestClicks = append(honestClicks, click(newVisitor(i), w.linkCode, fmt.Sprintf("203.0.113.%d", 10+i)))
	}
	dcClick := click(newVisitor(10), link.Code, "8.8.8.8")
	fastClick := click(newVisitor(11), link.Code, "198.51.100.7")
	selfClick := click(newVisitor(12), link.Code, "198.51.100.8")
	// The affiliate bids on the brand in Google Ads: the ad lands on the shop's page with its
	// code and Google's click id, and the page's script registers the click.
	paidClick := scriptClick(t, s, pk.Key, link.Code, "https://shop.journey.example/?via="+link.Code+"&gclid=EAIaIQobChMIjourney", "198.51.100.9")

	register := func(clickID, externalID string, extra map[string]string) judged {
		t.Helper()
		body := map[string]string{"click_id": clickID, "external_id": externalID, "amount": "100.00", "type": "sale"}
		for k, v := range extra {
			body[k] = v
		}
		var c judged
		s.call(apiCall{method: "POST", path: "/api/v1/conversions", as: w.adv, auth: "key", body: body}, &c, http.StatusCreated)
		return c
	}
	clickedAt := func(id string) time.Time {
		c, ok := keys.Verify(id)
		if !ok {
			t.Fatalf("journey: %s is not a click id the api signed", id)
		}
		return c.At
	}
	// The order 2 seconds after its click: the time rule holds it at registration.
	fast := register(fastClick, "fraud-fast", map[string]string{
		"occurred_at": clickedAt(fastClick).Truncate(time.Second).Add(2 * time.Second).Format(time.RFC3339)})
	if got, want := fast.Risk.String(), "held: conversion_too_fast/hold/2s"; got != want {
		t.Fatalf("journey: the 2-second conversion's verdict at registration is %q, want %q", got, want)
	}
	// The other orders come long enough after their clicks (the rule's 10 seconds).
	time.Sleep(time.Until(clickedAt(paidClick).Add(11 * time.Second)))
	self := register(selfClick, "fraud-self", map[string]string{
		// Its own user's address, written otherwise: normalised, it matches.
		"customer_email": strings.ToUpper(strings.Replace(fraud.Email, "@", "+shoes@", 1))})
	dc := register(dcClick, "fraud-dc", nil)
	paid := register(paidClick, "fraud-paid", nil)
	// The click-stage rules hold a commission about a second after its registration. The
	// honest orders come after, so that the auto-approval that approves them necessarily ran
	// after every hold.
	heldStatus := map[string]string{}
	for _, c := range []judged{dc, paid} {
		got := w.awaitHeld(t, c.ID, 60*time.Second)
		heldStatus[c.ID] = got.Commission.Status
	}
	var honest []judged
	for i, id := range honestClicks {
		honest = append(honest, register(id, fmt.Sprintf("honest-%d", i), map[string]string{
			"customer_email": fmt.Sprintf("reader.%d+shoes@gmail.com", i)}))
	}
	registered := time.Now()

	// A held commission cannot be approved by hand.
	status, body, err := s.try(apiCall{method: "POST", path: "/api/v1/conversions/" + self.ID + "/approve", as: w.adv, auth: "key"})
	if err != nil || status != http.StatusConflict || !jsonHasCode(body, "commission_held") {
		t.Fatalf("journey: approving a held commission answered %d %v %s, want 409 commission_held", status, err, body)
	}

	// The api's auto-approval runs every 2 s here (a minute by default): wait for it to
	// approve the honest orders.
	deadline := time.Now().Add(60 * time.Second)
	for _, h := range honest {
		for w.conversion(t, w.adv, h.ID).Commission.Status != events.CommissionApproved {
			if time.Now().After(deadline) {
				t.Fatalf("journey: the honest conversion %s was not approved automatically within 60 s", h.ID)
			}
			time.Sleep(time.Second)
		}
	}
	approvedAfter := time.Since(registered)

	// Exactly the fraudulent affiliate's commissions are held, each with its reason, and
	// auto-approval left them as they were when held: pending, or approved in a run where its
	// pass fell in the second between a click-stage conversion's registration and its hold.
	want := map[string]string{
		fast.ID:      "held: conversion_too_fast/hold/2s",
		self.ID:      "held: self_referral/hold/affiliate_user_email",
		dc.ID:        "held: hosting_network/hold/AS15169",
		paid.ID:      "held: paid_ads_click/hold/gclid",
		honest[0].ID: "none", honest[1].ID: "none", honest[2].ID: "none",
	}
	wantStage := map[string]string{fast.ID: "registration", self.ID: "registration", dc.ID: "click", paid.ID: "click"}
	for id, verdict := range want {
		c := w.conversion(t, w.adv, id)
		if got := c.Risk.String(); got != verdict {
			t.Errorf("journey: %s's verdict is %q, want %q", id, got, verdict)
		}
		if verdict == "none" || c.Risk == nil || len(c.Risk.Reasons) != 1 {
			continue // a wrong verdict is reported above
		}
		if got := c.Risk.Reasons[0].Stage; got != wantStage[id] {
			t.Errorf("journey: %s was held at the %s stage, want %s", id, got, wantStage[id])
		}
		wantStatus := events.CommissionPending
		if st, ok := heldStatus[id]; ok {
			wantStatus = st
		}
		if c.Commission.Status != wantStatus {
			t.Errorf("journey: held %s is %s after the auto-approval, want %s", id, c.Commission.Status, wantStatus)
		}
	}
	// The affiliate sees its verdict too.
	if got := w.conversion(t, fraud, dc.ID).Risk.String(); got != want[dc.ID] {
		t.Errorf("journey: the fraudulent affiliate sees %q on %s, want %q", got, dc.ID, want[dc.ID])
	}

	// A release is all or nothing: with an id that is not held nothing is released.
	var failed struct {
		Code     string `json:"code"`
		Failures []struct {
			ID   string `json:"id"`
			Code string `json:"code"`
		} `json:"failures"`
	}
	s.call(apiCall{method: "POST", path: "/api/conversions/release", as: w.adv, auth: "session",
		body: map[string]any{"ids": []string{fast.ID, honest[0].ID}}}, &failed, http.StatusConflict)
	if failed.Code != "bulk_release_failed" || len(failed.Failures) != 1 || failed.Failures[0].ID != honest[0].ID || failed.Failures[0].Code != "not_held" {
		t.Fatalf("journey: releasing a held and an honest commission: %+v, want bulk_release_failed naming the honest one not_held", failed)
	}
	if got := w.conversion(t, w.adv, fast.ID).Risk; !got.Held {
		t.Fatalf("journey: a failed release released %s", fast.ID)
	}
	// The advertiser trusts the fast order: released, it keeps its reasons and can be approved.
	s.call(apiCall{method: "POST", path: "/api/conversions/release", as: w.adv, auth: "session",
		body: map[string]any{"ids": []string{fast.ID}}}, nil, http.StatusOK)
	if got := w.conversion(t, w.adv, fast.ID); got.Risk.String() != "flagged: conversion_too_fast/hold/2s" || got.Commission.Status != events.CommissionPending {
		t.Fatalf("journey: released %s is %s, %q, want pending, flagged with its reason kept", fast.ID, got.Commission.Status, got.Risk)
	}
	if got := w.decide(t, fast.ID, "approve"); got.Commission.Status != events.CommissionApproved {
		t.Fatalf("journey: the released commission approved is %q", got.Commission.Status)
	}

	t.Run("the receivers got every hold with its reasons", func(t *testing.T) {
		d := w.awaitDeliveries(t, 2*time.Minute)
		t.Logf("deliveries: %v", d)
		checkDeliveries(t, d)
		wantHeld := map[string]string{}
		for _, id := range []string{fast.ID, self.ID, dc.ID, paid.ID} {
			wantHeld[id] = want[id]
		}
		for _, r := range []*receiver{w.webhooks[fraud.ID], w.postbacks[fraud.ID], w.webhooks[w.adv.ID], w.postbacks[w.adv.ID]} {
			if got := deliveredVerdicts(r, events.CommissionHeld); fmt.Sprint(got) != fmt.Sprint(wantHeld) {
				t.Errorf("journey: %s got commission.held %v, want %v", r.name, got, wantHeld)
			}
			released := map[string]string{fast.ID: "flagged: conversion_too_fast/hold/2s"}
			if got := deliveredVerdicts(r, events.CommissionReleased); fmt.Sprint(got) != fmt.Sprint(released) {
				t.Errorf("journey: %s got commission.released %v, want %v", r.name, got, released)
			}
		}
		for _, r := range []*receiver{w.webhooks[w.aff.ID], w.postbacks[w.aff.ID]} {
			if got := deliveredVerdicts(r, events.CommissionHeld); len(got) != 0 {
				t.Errorf("journey: the honest affiliate's %s got commission.held %v", r.name, got)
			}
		}
	})
	t.Logf("set-up %s (stack and both companies), then clicks to the last hold and the honest orders %s, the auto-approval %s later; whole test %s",
		setUpDone.Sub(start).Round(100*time.Millisecond), registered.Sub(setUpDone).Round(100*time.Millisecond),
		approvedAfter.Round(100*time.Millisecond), time.Since(start).Round(100*time.Millisecond))
}

// conversion reads a conversion as the company sees it.
func (w *world) conversion(t testing.TB, as *company, id string) judged {
	t.Helper()
	var c judged
	w.s.call(apiCall{method: "GET", path: "/api/v1/conversions/" + id, as: as, auth: "key"}, &c, http.StatusOK)
	return c
}

// awaitHeld waits until a rule holds the conversion's commission.
func (w *world) awaitHeld(t testing.TB, id string, within time.Duration) judged {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		c := w.conversion(t, w.adv, id)
		if c.Risk != nil && c.Risk.Held {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("journey: %s not held within %v: %s", id, within, c.Risk)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// deliveredVerdicts are the verdicts of the deliveries of one event type the receiver
// accepted, by conversion id.
func deliveredVerdicts(r *receiver, eventType string) map[string]string {
	accepted, _, _ := r.snapshot()
	out := map[string]string{}
	for _, rc := range accepted {
		if rc.event.Event == eventType {
			out[rc.event.Data.ID] = rc.event.Data.Risk.String()
		}
	}
	return out
}

// scriptClick registers a click as the tracking script does from a page of the shop, the
// visitor's address passed on by the proxy, and returns its id.
func scriptClick(t testing.TB, s *stack, key, code, page, addr string) string {
	t.Helper()
	b, _ := json.Marshal(map[string]string{"key": key, "code": code, "url": page})
	req, err := http.NewRequest(http.MethodPost, s.baseURL+"/api/script/clicks", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "text/plain")
	req.Header.Set("Origin", "https://shop.journey.example")
	req.Header.Set("User-Agent", browserAgent("journey paid visitor"))
	req.Header.Set("X-Forwarded-For", addr)
	resp, err := apiClient.Do(req)
	if err != nil {
		t.Fatalf("journey: script click: %v", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var c struct {
		ClickID string `json:"click_id"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &c) != nil || c.ClickID == "" {
		t.Fatalf("journey: script click: %d %s", resp.StatusCode, raw)
	}
	return c.ClickID
}
