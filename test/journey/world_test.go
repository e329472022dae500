package journey

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/jackc/pgx/v5"

	"github.com/partnerstream/partnerstream/internal/events"
)

// allEvents are the webhook event types; the journey's subscriptions take every one.
var allEvents = events.Types

// world is the journey's cast after set-up: an advertiser with a program, an affiliate with an
// approved partnership and a tracking link, and both companies' webhook and postback
// receivers.
type world struct {
	s          *stack
	adv, aff   *company
	programID  string
	linkCode   string
	webhooks   map[string]*receiver // company id -> its webhook receiver
	webhookIDs map[string]string    // company id -> wh_...
	postbacks  map[string]*receiver // company id -> its postback receiver
}

// setUp plays the journey up to the first click, through the public API only.
func setUp(t testing.TB, s *stack) *world {
	t.Helper()
	w := &world{s: s, webhooks: map[string]*receiver{}, webhookIDs: map[string]string{}, postbacks: map[string]*receiver{}}
	w.adv = s.signUp("advertiser", "Journey Shoes")
	w.aff = s.signUp("affiliate", "Journey Blog")
	// Both companies subscribe before anything happens, so every event has its receivers.
	for _, c := range []*company{w.adv, w.aff} {
		w.receive(t, c)
	}

	var prg struct {
		ID string `json:"id"`
	}
	s.call(apiCall{method: "POST", path: "/api/programs", as: w.adv, auth: "session", body: map[string]any{
		"name": "Journey Shoes Partners", "landing_url": "https://shop.journey.example/landing", "currency": "EUR",
		"commission": map[string]string{"type": "percent", "percent": "10"}, "visibility": "approval"}}, &prg, http.StatusCreated)
	w.programID = prg.ID

	var ptn struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	s.call(apiCall{method: "POST", path: "/api/v1/partnerships", as: w.aff, auth: "key",
		body: map[string]string{"program_id": w.programID, "message": "We review shoes."}}, &ptn, http.StatusCreated)
	if ptn.Status != "pending" {
		t.Fatalf("journey: a new partnership of an approval program is %q, want pending", ptn.Status)
	}
	s.call(apiCall{method: "POST", path: "/api/partnerships/" + ptn.ID + "/approve", as: w.adv, auth: "session"}, &ptn, http.StatusOK)
	if ptn.Status != "approved" {
		t.Fatalf("journey: approved partnership is %q", ptn.Status)
	}

	var link struct {
		Code string `json:"code"`
		URL  string `json:"url"`
	}
	s.call(apiCall{method: "POST", path: "/api/v1/tracking-links", as: w.aff, auth: "key",
		body: map[string]string{"program_id": w.programID, "sub1": "journey"}}, &link, http.StatusCreated)
	if !strings.HasSuffix(link.URL, "/c/"+link.Code) {
		t.Fatalf("journey: link url %q does not end in its code %q", link.URL, link.Code)
	}
	w.linkCode = link.Code
	return w
}

// receive subscribes a webhook receiver and a postback receiver of the company.
func (w *world) receive(t testing.TB, c *company) {
	t.Helper()
	s := w.s
	wr := s.newReceiver(t, c.Kind+"-webhook", "X-Webhook-Signature")
	id, secret := s.subscribeWebhook(t, c, wr.url)
	wr.setSecret(t, secret)
	w.webhooks[c.ID], w.webhookIDs[c.ID] = wr, id

	pr := s.newReceiver(t, c.Kind+"-postback", "x-svc-signature")
	var pb struct {
		Secret string `json:"secret"`
	}
	s.call(apiCall{method: "PUT", path: "/api/postbacks", as: c, auth: "session", body: map[string]string{"url": pr.url}}, &pb, http.StatusOK)
	pr.setSecret(t, pb.Secret)
	w.postbacks[c.ID] = pr
}

// join signs up another affiliate with its receivers and an approved partnership in the
// program, and returns it with the partnership's id.
func (w *world) join(t testing.TB, name string) (*company, string) {
	t.Helper()
	s := w.s
	c := s.signUp("affiliate", name)
	w.receive(t, c)
	var ptn struct {
		ID string `json:"id"`
	}
	s.call(apiCall{method: "POST", path: "/api/v1/partnerships", as: c, auth: "key", body: map[string]string{"program_id": w.programID}}, &ptn, http.StatusCreated)
	s.call(apiCall{method: "POST", path: "/api/partnerships/" + ptn.ID + "/approve", as: w.adv, auth: "session"}, nil, http.StatusOK)
	return c, ptn.ID
}

// newReceiver starts a receiver where the stack's components can reach it.
func (s *stack) newReceiver(t testing.TB, name, sigHeader string) *receiver {
	t.Helper()
	addr := s.receiverAddr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	return newReceiverOn(t, name, sigHeader, addr, s.receiverTLS)
}

// subscribeWebhook subscribes the company's receiver to every event, through the dashboard
// API unless the stack subscribes another way, and returns the webhook id and its secret.
func (s *stack) subscribeWebhook(t testing.TB, c *company, url string) (id, secret string) {
	t.Helper()
	if s.subscribe != nil {
		return s.subscribe(t, c, url)
	}
	var hook struct {
		ID     string `json:"id"`
		Secret string `json:"secret"`
	}
	s.call(apiCall{method: "POST", path: "/api/webhooks", as: c, auth: "session",
		body: map[string]any{"url": url, "events": allEvents, "description": "journey"}}, &hook, http.StatusCreated)
	return hook.ID, hook.Secret
}

// clickLog is what the visitors were answered: every click id a 302 carried.
type clickLog struct {
	mu      sync.Mutex
	ids     map[string]int
	order   []string        // answered click ids in the order they were answered
	visitor map[string]bool // visitors with at least one answered click
	failed  int             // clicks not answered (the api was down)
}

func newClickLog() *clickLog { return &clickLog{ids: map[string]int{}, visitor: map[string]bool{}} }

func (l *clickLog) add(v *visitor, id string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.failed++
		return
	}
	l.ids[id]++
	l.order = append(l.order, id)
	l.visitor[v.ua] = true
}

// nth returns the n-th answered click id, if there is one yet.
func (l *clickLog) nth(n int) (string, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n >= len(l.order) {
		return "", false
	}
	return l.order[n], true
}

func (l *clickLog) answered() (ids []string, failed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id := range l.ids {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids, l.failed
}

// drive sends clicks from the visitors round-robin, `workers` at a time, until ctx ends or
// total clicks were tried (0: no limit), pacing each worker to one click per interval.
func (w *world) drive(ctx context.Context, visitors []*visitor, workers, total int, interval time.Duration, log *clickLog) {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		next int
	)
	take := func() (int, bool) {
		mu.Lock()
		defer mu.Unlock()
		if total > 0 && next >= total {
			return 0, false
		}
		next++
		return next - 1, true
	}
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(max(interval, time.Millisecond))
			defer tick.Stop()
			for ctx.Err() == nil {
				n, ok := take()
				if !ok {
					return
				}
				v := visitors[n%len(visitors)]
				id, err := v.click(w.s.baseURL, w.linkCode)
				log.add(v, id, err)
				if interval > 0 {
					select {
					case <-tick.C:
					case <-ctx.Done():
					}
				}
			}
		}()
	}
	wg.Wait()
}

func visitors(n int) []*visitor {
	vs := make([]*visitor, n)
	for i := range vs {
		vs[i] = newVisitor(i)
	}
	return vs
}

// conversion is the part of a registered conversion the journey checks.
type conversion struct {
	ID         string `json:"id"`
	ExternalID string `json:"external_id"`
	Amount     string `json:"amount"`
	Commission struct {
		ID     string `json:"id"`
		Amount string `json:"amount"`
		Status string `json:"status"`
	} `json:"commission"`
}

// convert registers a conversion for a click, retrying while the platform does not answer
// (the fault runs take its stores away).
func (w *world) convert(t testing.TB, clickID, externalID, amount string) (conversion, int) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		var c conversion
		status, body, err := w.s.try(apiCall{method: "POST", path: "/api/v1/conversions", as: w.adv, auth: "key",
			body: map[string]string{"click_id": clickID, "external_id": externalID, "amount": amount, "type": "sale"}})
		if err == nil && (status == http.StatusCreated || status == http.StatusOK) {
			if err := jsonUnmarshal(body, &c); err != nil {
				t.Fatalf("journey: conversion: %v", err)
			}
			return c, status
		}
		if time.Now().After(deadline) {
			t.Fatalf("journey: conversion for %s: status %d, %v: %s", clickID, status, err, body)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// decide approves or rejects a conversion's commission.
func (w *world) decide(t testing.TB, id, decision string) conversion {
	t.Helper()
	var c conversion
	var body any
	if decision == "reject" {
		body = map[string]string{"reason": "journey: returned order"}
	}
	w.s.call(apiCall{method: "POST", path: "/api/v1/conversions/" + id + "/" + decision, as: w.adv, auth: "key", body: body}, &c, http.StatusOK)
	return c
}

// figures are the stats API's totals.
type figures struct {
	Clicks       int `json:"clicks"`
	UniqueClicks int `json:"unique_clicks"`
	Conversions  struct {
		Total    int `json:"total"`
		Pending  int `json:"pending"`
		Approved int `json:"approved"`
		Rejected int `json:"rejected"`
		Paid     int `json:"paid"`
		Reversed int `json:"reversed"`
	} `json:"conversions"`
	SaleAmount string `json:"sale_amount"`
	Commission string `json:"commission"`
	EPC        string `json:"epc"`
}

func (f figures) String() string {
	c := f.Conversions
	return fmt.Sprintf("clicks %d, unique %d, conversions %d (pending %d, approved %d, rejected %d, paid %d), sale %s, commission %s, EPC %s",
		f.Clicks, f.UniqueClicks, c.Total, c.Pending, c.Approved, c.Rejected, c.Paid, f.SaleAmount, f.Commission, f.EPC)
}

// stats reads the company's totals for the program (from the api's figures, i.e. ClickHouse).
func (w *world) stats(t testing.TB, as *company) figures {
	t.Helper()
	var r struct {
		Totals figures `json:"totals"`
	}
	w.s.call(apiCall{method: "GET", path: "/api/v1/stats?program_id=" + w.programID, as: as, auth: "key"}, &r, http.StatusOK)
	return r.Totals
}

// statsRow is a row of the program's statistics grouped by sub1 or by link.
type statsRow struct {
	Sub1   string `json:"sub1"`
	LinkID string `json:"link_id"`
	figures
}

// statsBy reads the company's statistics of the program, grouped.
func (w *world) statsBy(t testing.TB, as *company, groupBy string) []statsRow {
	t.Helper()
	var r struct {
		Data []statsRow `json:"data"`
	}
	w.s.call(apiCall{method: "GET", path: "/api/v1/stats?group_by=" + groupBy + "&program_id=" + w.programID, as: as, auth: "key"}, &r, http.StatusOK)
	return r.Data
}

// conversionsBySub1 reads the company's conversions of the program by sub1 (rows without
// conversions left out).
func (w *world) conversionsBySub1(t testing.TB, as *company) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, row := range w.statsBy(t, as, "sub1") {
		if row.Conversions.Total != 0 {
			out[row.Sub1] += row.Conversions.Total
		}
	}
	return out
}

// awaitStats polls until the figures match (they are fresh within seconds), bounded.
func (w *world) awaitStats(t testing.TB, as *company, want figures, within time.Duration) figures {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := w.stats(t, as)
		if got == want {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("journey: stats of %s after %v:\n got %v\nwant %v", as.Kind, within, got, want)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// storedClicks counts, in ClickHouse's raw table, the rows of the given (distinct) click ids
// and the distinct ids among them, a few thousand ids per query (a query's size is bounded).
func (s *stack) storedClicks(t testing.TB, ids []string) (rows, distinct uint64) {
	t.Helper()
	conn := s.clickhouse(t)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for chunk := range slices.Chunk(ids, 2000) {
		var r, d uint64
		if err := conn.QueryRow(ctx, "SELECT count(), uniqExact(click_id) FROM "+s.chDB+".clicks WHERE has(?, click_id)", chunk).Scan(&r, &d); err != nil {
			t.Fatalf("journey: count clicks: %v", err)
		}
		rows, distinct = rows+r, distinct+d
	}
	return rows, distinct
}

// clickhouse connects to the stack's ClickHouse.
func (s *stack) clickhouse(t testing.TB) driver.Conn {
	t.Helper()
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{s.chAddr}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("journey: clickhouse: %v", err)
	}
	return conn
}

// allClicks counts every stored click row and distinct click id of the stack.
func (s *stack) allClicks(t testing.TB) (rows, distinct uint64) {
	t.Helper()
	conn := s.clickhouse(t)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := conn.QueryRow(ctx, "SELECT count(), uniqExact(click_id) FROM "+s.chDB+".clicks").Scan(&rows, &distinct); err != nil {
		t.Fatalf("journey: count clicks: %v", err)
	}
	return rows, distinct
}

// awaitClicksStored waits until every answered click is in ClickHouse, and reports the rows
// (duplicates would make rows > distinct).
func (s *stack) awaitClicksStored(t testing.TB, ids []string, within time.Duration) (rows, distinct uint64) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		rows, distinct = s.storedClicks(t, ids)
		if distinct == uint64(len(ids)) || time.Now().After(deadline) {
			return rows, distinct
		}
		time.Sleep(time.Second)
	}
}

// deliveryTally compares the events of the outbox with what the receivers accepted.
type deliveryTally struct {
	expected   int // (event, target) pairs that must arrive
	recorded   int // rows in the deliveries table for those pairs
	accepted   int // pairs whose webhook-id a receiver accepted
	lost       []string
	duplicates int // extra accepted copies of a webhook-id (allowed)
	invalid    []string
	attempts   int
}

func (d deliveryTally) String() string {
	return fmt.Sprintf("events x targets %d, deliveries recorded %d, accepted %d, lost %d, duplicates %d, invalid %d, receiver attempts %d",
		d.expected, d.recorded, d.accepted, len(d.lost), d.duplicates, len(d.invalid), d.attempts)
}

// tallyDeliveries reads the outbox and the deliveries of the stack's database and checks them
// against the receivers. Every event of the two companies must reach each of their webhook
// subscriptions, and every commission status change, hold and release each of their postback
// URLs.
func (w *world) tallyDeliveries(t testing.TB) deliveryTally {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, w.s.pgURL)
	if err != nil {
		t.Fatalf("journey: postgres: %v", err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT o.event_id, o.type, o.envelope->>'advertiser_id', o.envelope->>'affiliate_id' FROM outbox o ORDER BY o.id`)
	if err != nil {
		t.Fatalf("journey: outbox: %v", err)
	}
	type pair struct{ event, kind, target, company string }
	var want []pair
	for rows.Next() {
		var id, typ string
		var adv, aff *string
		if err := rows.Scan(&id, &typ, &adv, &aff); err != nil {
			t.Fatalf("journey: outbox: %v", err)
		}
		for _, c := range []*string{adv, aff} {
			if c == nil || *c == "" {
				continue
			}
			if wh, ok := w.webhookIDs[*c]; ok {
				want = append(want, pair{id, "webhook", wh, *c})
			}
			if _, ok := w.postbacks[*c]; ok && slices.Contains(events.PostbackTypes, typ) {
				want = append(want, pair{id, "postback", *c, *c})
			}
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("journey: outbox: %v", err)
	}
	var d deliveryTally
	d.expected = len(want)
	accepted := map[string]map[string]receipt{}
	for _, rs := range []map[string]*receiver{w.webhooks, w.postbacks} {
		for _, r := range rs {
			a, n, inv := r.snapshot()
			accepted[r.url] = a
			d.attempts += n
			d.invalid = append(d.invalid, inv...)
			for _, rc := range a {
				d.duplicates += rc.count - 1
			}
		}
	}
	for _, p := range want {
		var msgID string
		err := conn.QueryRow(ctx, `SELECT id FROM deliveries WHERE event_id = $1 AND kind = $2 AND target_id = $3`, p.event, p.kind, p.target).Scan(&msgID)
		if errors.Is(err, pgx.ErrNoRows) {
			d.lost = append(d.lost, fmt.Sprintf("%s %s to %s: no delivery recorded", p.event, p.kind, p.target))
			continue
		}
		if err != nil {
			t.Fatalf("journey: deliveries: %v", err)
		}
		d.recorded++
		r := w.webhooks[p.company]
		if p.kind == "postback" {
			r = w.postbacks[p.company]
		}
		if _, ok := accepted[r.url][msgID]; !ok {
			d.lost = append(d.lost, fmt.Sprintf("%s %s to %s: %s not accepted by the receiver", p.event, p.kind, p.target, msgID))
			continue
		}
		d.accepted++
	}
	return d
}

// awaitDeliveries polls until nothing is lost, bounded, and returns the last tally.
func (w *world) awaitDeliveries(t testing.TB, within time.Duration) deliveryTally {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		d := w.tallyDeliveries(t)
		if (len(d.lost) == 0 && d.expected > 0) || time.Now().After(deadline) {
			return d
		}
		time.Sleep(time.Second)
	}
}
