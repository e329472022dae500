package journey

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/money"
)

// TestJourney plays a whole affiliate program through the public API, with every component
// in its own process: sign-ups, a program, an approved partnership, a tracking link, clicks
// from several visitors, conversions approved and rejected, the statistics, a payout, and the
// signed webhooks and postbacks both companies receive.
func TestJourney(t *testing.T) {
	s := newStack(t)
	w := setUp(t, s)
	w.play(t)
}

// play is the journey after set-up: clicks, conversions, decisions, the exact statistics, a
// payout and every delivery verified. A local cluster plays the same one (TestCluster).
func (w *world) play(t *testing.T) {
	s := w.s
	// 8 visitors click 5 times each: 40 clicks, 8 unique (a visitor's repeats within the UTC
	// hour are flagged duplicates through its ps_vid cookie).
	const nVisitors, perVisitor = 8, 5
	awayFromHourTurn(t, time.Minute)
	vs := visitors(nVisitors)
	log := newClickLog()
	w.drive(context.Background(), vs, 4, nVisitors*perVisitor-1, 0, log)
	// The last click converts at once: a signed click id needs nothing from ClickHouse, so an
	// order sent the moment its redirect answered is 201 like any other.
	lastVisitor := vs[(nVisitors*perVisitor-1)%nVisitors]
	lastClick, err := lastVisitor.click(s.baseURL, w.linkCode)
	answered := time.Now()
	log.add(lastVisitor, lastClick, err)
	if err != nil {
		t.Fatalf("journey: the last click: %v", err)
	}
	lastOrder, status := w.convert(t, lastClick, "order-6", "42.00")
	if status != http.StatusCreated {
		t.Fatalf("journey: an order sent %s after its redirect answered %d, want 201", time.Since(answered), status)
	}
	ids, failed := log.answered()
	if failed != 0 || len(ids) != nVisitors*perVisitor {
		t.Fatalf("journey: %d clicks answered (%d failed), want %d", len(ids), failed, nVisitors*perVisitor)
	}
	ids = slices.DeleteFunc(ids, func(id string) bool { return id == lastClick })

	// Six orders, the last on the last click; the first order is sent twice (a retrying
	// integration) and must stay one conversion.
	amounts := []string{"120.00", "59.90", "310.50", "15.00", "99.90"}
	var convs []conversion
	for i, amount := range amounts {
		c, status := w.convert(t, ids[i*perVisitor], fmt.Sprintf("order-%d", i+1), amount)
		if status != http.StatusCreated {
			t.Fatalf("journey: new conversion answered %d, want 201", status)
		}
		convs = append(convs, c)
	}
	convs = append(convs, lastOrder)
	if again, status := w.convert(t, ids[0], "order-1", "120.00"); status != http.StatusOK || again.ID != convs[0].ID {
		t.Fatalf("journey: repeated order answered %d with %s, want 200 with %s", status, again.ID, convs[0].ID)
	}
	// Approve four, reject one, leave one pending.
	for _, c := range convs[:4] {
		if got := w.decide(t, c.ID, "approve"); got.Commission.Status != "approved" {
			t.Fatalf("journey: approved commission is %q", got.Commission.Status)
		}
	}
	if got := w.decide(t, convs[4].ID, "reject"); got.Commission.Status != "rejected" {
		t.Fatalf("journey: rejected commission is %q", got.Commission.Status)
	}

	// The expected figures, in minor units: the program pays 10 % of each sale.
	var sale, commission, approvedCommission int64
	for i, c := range convs {
		a, c1 := cents(t, c.Amount), cents(t, c.Commission.Amount)
		if want := a / 10; c1 != want {
			t.Fatalf("journey: commission of %s is %s, want 10 %%", c.Amount, c.Commission.Amount)
		}
		if i == 4 {
			continue // rejected: earns nothing
		}
		sale += a
		commission += c1
		if i < 4 {
			approvedCommission += c1
		}
	}
	clicks := int64(nVisitors * perVisitor)
	want := figures{Clicks: int(clicks), UniqueClicks: nVisitors, SaleAmount: money.Format(sale, "EUR"),
		Commission: money.Format(commission, "EUR"), EPC: money.Format((2*commission+clicks)/(2*clicks), "EUR")}
	want.Conversions.Total, want.Conversions.Pending, want.Conversions.Approved, want.Conversions.Rejected = 6, 1, 4, 1
	got := w.awaitStats(t, w.adv, want, 60*time.Second)
	t.Logf("advertiser stats: %v", got)
	w.awaitStats(t, w.aff, want, 10*time.Second)

	// The advertiser pays the affiliate's approved commissions of the period.
	today := time.Now().UTC()
	var payout struct {
		ID              string `json:"id"`
		Amount          string `json:"amount"`
		CommissionCount int    `json:"commission_count"`
		Status          string `json:"status"`
	}
	s.call(apiCall{method: "POST", path: "/api/payouts", as: w.adv, auth: "session", body: map[string]string{
		"affiliate_id": w.aff.ID, "currency": "EUR",
		"period_start": today.AddDate(0, 0, -1).Format(time.DateOnly), "period_end": today.AddDate(0, 0, 1).Format(time.DateOnly)}},
		&payout, http.StatusCreated)
	if payout.Amount != money.Format(approvedCommission, "EUR") || payout.CommissionCount != 4 {
		t.Fatalf("journey: payout of %s for %d commissions, want %s for 4", payout.Amount, payout.CommissionCount, money.Format(approvedCommission, "EUR"))
	}
	s.call(apiCall{method: "POST", path: "/api/payouts/" + payout.ID + "/paid", as: w.adv, auth: "session"}, &payout, http.StatusOK)
	if payout.Status != "paid" {
		t.Fatalf("journey: payout is %q after paying it", payout.Status)
	}
	want.Conversions.Approved, want.Conversions.Paid = 0, 4
	got = w.awaitStats(t, w.aff, want, 60*time.Second)
	t.Logf("affiliate stats after the payout: %v", got)
	t.Logf("clicks: %d answered, stored %s", len(ids), storedString(s, t, ids))

	t.Run("webhooks and postbacks", func(t *testing.T) {
		d := w.awaitDeliveries(t, 2*time.Minute)
		t.Logf("deliveries: %v", d)
		checkDeliveries(t, d)
		// What each company saw: the advertiser's webhook has the six conversions created.
		created := map[string]bool{}
		accepted, _, _ := w.webhooks[w.adv.ID].snapshot()
		for _, rc := range accepted {
			if rc.event.Event == "conversion.created" {
				created[rc.event.Data.ID] = true
			}
		}
		for _, c := range convs {
			if !created[c.ID] {
				t.Errorf("journey: the advertiser's webhook never got conversion.created for %s", c.ID)
			}
		}
	})
}

// checkDeliveries fails the test when anything was lost or failed verification.
func checkDeliveries(t testing.TB, d deliveryTally) {
	t.Helper()
	if d.expected == 0 {
		t.Error("journey: no event was expected to be delivered")
	}
	for i, l := range d.lost {
		if i == 10 {
			t.Errorf("journey: ... and %d more lost", len(d.lost)-10)
			break
		}
		t.Errorf("journey: lost: %s", l)
	}
	for _, why := range d.invalid {
		t.Errorf("journey: a delivery failed verification: %s", why)
	}
}

func cents(t testing.TB, s string) int64 {
	t.Helper()
	v, err := money.Parse(s, "EUR")
	if err != nil {
		t.Fatalf("journey: amount %q: %v", s, err)
	}
	return v
}

func storedString(s *stack, t testing.TB, ids []string) string {
	rows, distinct := s.storedClicks(t, ids)
	return fmt.Sprintf("%d rows, %d distinct", rows, distinct)
}

// awayFromHourTurn waits for the next UTC hour if the current one ends within margin: unique
// clicks are per hour, so a visitor's clicks on both sides of the turn count twice, rightly.
func awayFromHourTurn(t testing.TB, margin time.Duration) {
	now := time.Now()
	if left := now.Truncate(time.Hour).Add(time.Hour).Sub(now); left < margin {
		t.Logf("waiting %s for the hour to turn: unique clicks are per UTC hour", left.Round(time.Second))
		time.Sleep(left + time.Second)
	}
}
