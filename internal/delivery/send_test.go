package delivery

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/testenv"
	"github.com/partnerstream/partnerstream/internal/webhooks/signing"
)

func TestEveryTargetOfBothCompaniesGetsOneSignedDelivery(t *testing.T) {
	t.Parallel()
	db, cos := newDB(t, 3)
	adv, aff, other := cos[0], cos[1], cos[2]
	rc := newReceiver(t, nil)
	sub, pb := newSubs(), newPostbacks()
	advHook, advSecret := sub.add(adv, rc.URL+"/adv", events.ConversionCreated, events.CommissionStatusChanged)
	affHook, affSecret := sub.add(aff, rc.URL+"/aff", events.ConversionCreated)
	sub.add(other, rc.URL+"/other", events.ConversionCreated) // not a party to the events
	sub.add(adv, rc.URL+"/adv-approved", events.ConversionApproved)
	advPostback := pb.set(adv, rc.URL+"/adv-postback")
	affPostback := pb.set(aff, rc.URL+"/aff-postback")
	s := newService(t, db, Options{Subscriptions: sub, Postbacks: pb})

	created := envelope(events.ConversionCreated, adv, aff)
	changed := envelope(events.CommissionStatusChanged, adv, aff)
	n, err := s.record(context.Background(), []events.Envelope{created, changed})
	if err != nil {
		t.Fatal(err)
	}
	// created: both companies' conversion.created webhooks; changed: the advertiser's webhook
	// and both postback URLs.
	if n != 5 {
		t.Fatalf("recorded %d deliveries, want 5", n)
	}
	// The same events consumed again record nothing.
	if n, err := s.record(context.Background(), []events.Envelope{changed, created}); err != nil || n != 0 {
		t.Fatalf("recording the events again made %d deliveries (%v), want 0", n, err)
	}
	if outs := s.step(t); len(outs) != 5 {
		t.Fatalf("%d attempts, want 5", len(outs))
	}

	want := map[string]struct {
		secret, sigHeader, event string
	}{
		"/adv":          {advSecret, "X-Webhook-Signature", events.ConversionCreated},
		"/aff":          {affSecret, "X-Webhook-Signature", events.ConversionCreated},
		"/adv-postback": {advPostback, "x-svc-signature", events.CommissionStatusChanged},
		"/aff-postback": {affPostback, "x-svc-signature", events.CommissionStatusChanged},
	}
	got := rc.requests()
	if len(got) != 5 {
		t.Fatalf("the receivers got %d requests, want 5", len(got))
	}
	for _, r := range got {
		path := r.header.Get(pathHeader)
		w, ok := want[path]
		if path == "/adv" && strings.Contains(string(r.body), events.CommissionStatusChanged) {
			w.event = events.CommissionStatusChanged
		}
		if !ok {
			t.Errorf("unexpected delivery to %s", path)
			continue
		}
		if err := verify(t, r, w.secret, true); err != nil {
			t.Errorf("%s: the Standard Webhooks library refuses the delivery: %v", path, err)
		}
		if r.header.Get(w.sigHeader) != r.header.Get("webhook-signature") {
			t.Errorf("%s: %s = %q, want the webhook-signature", path, w.sigHeader, r.header.Get(w.sigHeader))
		}
		other := map[string]string{"X-Webhook-Signature": "x-svc-signature", "x-svc-signature": "X-Webhook-Signature"}[w.sigHeader]
		if r.header.Get(other) != "" {
			t.Errorf("%s: has both signature headers", path)
		}
		e := created
		if w.event == events.CommissionStatusChanged {
			e = changed
		}
		body, _ := events.WebhookBody(e)
		if string(r.body) != string(body) {
			t.Errorf("%s: body %s, want %s", path, r.body, body)
		}
	}
	for _, r := range rows(t, db, "") {
		if r.status != StatusSucceeded || r.attempts != 1 || deref(r.lastStatus) != "204" || r.lastError != nil || r.next != nil {
			t.Errorf("delivery %s to %s: status %s, attempts %d, last status %s, error %s", r.id, r.url, r.status, r.attempts, deref(r.lastStatus), deref(r.lastError))
		}
		if r.kind == KindWebhook && r.target != advHook.ID && r.target != affHook.ID {
			t.Errorf("delivery to webhook %s of a company that is no party", r.target)
		}
		if r.kind == KindPostback && r.target != r.company {
			t.Errorf("a postback's target is %s, want its company %s", r.target, r.company)
		}
		as := attemptsOf(t, db, r.id)
		if len(as) != 1 || as[0].n != 1 || as[0].trigger != TriggerScheduled || deref(as[0].code) != "204" {
			t.Errorf("delivery %s attempts %+v", r.id, as)
		}
	}
}

// pathHeader and queryHeader carry the request's path and query into the recorded headers.
const (
	pathHeader  = "X-Test-Path"
	queryHeader = "X-Test-Query"
)

// A postback URL's placeholders are filled from the event it delivers, percent-encoded, on the
// recorded delivery and on the request.
func TestAPostbackURLGetsTheEventsValuesInItsPlaceholders(t *testing.T) {
	t.Parallel()
	db, cos := newDB(t, 2)
	adv, aff := cos[0], cos[1]
	rc := newReceiver(t, nil)
	pb := newPostbacks()
	pb.set(adv, rc.URL+"/pb/{status}?cid={click_id}&amount={amount}&c={commission}&cur={currency}&s1={sub1}&id={conversion_id}&none={external_id}")
	s := newService(t, db, Options{Subscriptions: newSubs(), Postbacks: pb})
	data, _ := json.Marshal(events.ConversionData{ID: "cnv_1", Type: "sale", Amount: "42.50", Status: "approved", Currency: "EUR",
		CommissionAmount: "4.25", ClickID: "clk_9", Sub1: "mail & more", AdvertiserID: adv, AffiliateID: aff})
	changed := events.Envelope{ID: ids.New(ids.Event), Type: events.CommissionStatusChanged, OccurredAt: time.Now(),
		AdvertiserID: adv, AffiliateID: aff, ProgramID: ids.New(ids.Program), Data: data}
	if _, err := s.record(context.Background(), []events.Envelope{changed}); err != nil {
		t.Fatal(err)
	}
	s.step(t)
	got := rc.requests()
	if len(got) != 1 {
		t.Fatalf("%d postbacks, want 1", len(got))
	}
	const query = "cid=clk_9&amount=42.50&c=4.25&cur=EUR&s1=mail%20%26%20more&id=cnv_1&none="
	if p, q := got[0].header.Get(pathHeader), got[0].header.Get(queryHeader); p != "/pb/approved" || q != query {
		t.Errorf("postback to %s?%s, want /pb/approved?%s", p, q, query)
	}
	if r := rows(t, db, ""); len(r) != 1 || !strings.HasSuffix(r[0].url, "/pb/approved?"+query) {
		t.Errorf("recorded deliveries %+v, want the filled URL", r)
	}
}

func TestARotationSignsWithBothSecretsUntilTheOldOneExpires(t *testing.T) {
	t.Parallel()
	db, cos := newDB(t, 2)
	rc := newReceiver(t, nil)
	sub := newSubs()
	clk := testenv.NewClock()
	clk.Set(time.Now())
	oldSecret, newSecret := signing.NewSecret(), signing.NewSecret()
	oldKey, _ := signing.Key(oldSecret)
	newKey, _ := signing.Key(newSecret)
	hook := signing.Target{ID: "wh_rotating", URL: rc.URL, Secrets: []signing.HMACKey{{Key: newKey}, {Key: oldKey, ExpiresAt: clk.Now().Add(time.Hour)}}}
	sub.put(cos[0], hook, events.ConversionCreated)
	s := newService(t, db, Options{Subscriptions: sub, Now: clk.Now})

	deliver := func() request {
		t.Helper()
		before := len(rc.requests())
		if _, err := s.record(context.Background(), []events.Envelope{envelope(events.ConversionCreated, cos[0], cos[1])}); err != nil {
			t.Fatal(err)
		}
		s.step(t)
		got := rc.requests()
		if len(got) != before+1 {
			t.Fatalf("%d requests, want %d", len(got), before+1)
		}
		return got[len(got)-1]
	}
	during := deliver()
	if n := strings.Count(during.header.Get("webhook-signature"), "v1,"); n != 2 {
		t.Errorf("during the grace period %d signatures, want 2", n)
	}
	for name, secret := range map[string]string{"new": newSecret, "old": oldSecret} {
		if err := verify(t, during, secret, false); err != nil {
			t.Errorf("during the grace period a receiver with the %s secret refuses the delivery: %v", name, err)
		}
	}
	// The keys are checked when signing: once expired, the old one signs no more even if
	// the subscription source still lists it.
	clk.Advance(time.Hour)
	after := deliver()
	if err := verify(t, after, newSecret, false); err != nil {
		t.Errorf("after the grace period the new secret does not verify: %v", err)
	}
	if err := verify(t, after, oldSecret, false); err == nil {
		t.Error("after the grace period the old secret still verifies")
	}
}

// fixture is one webhook target on a receiver, with a service around it.
type fixture struct {
	db      *pgxpool.Pool
	s       *Service
	rc      *receiver
	sub     *subs
	clk     *testenv.Clock
	secret  string
	hook    signing.Target
	cos     []string
	suspend *suspended
}

func newFixture(t *testing.T, respond func(http.ResponseWriter, *http.Request), o Options) *fixture {
	t.Helper()
	db, cos := newDB(t, 2)
	f := &fixture{db: db, rc: newReceiver(t, respond), sub: newSubs(), clk: testenv.NewClock(), cos: cos, suspend: &suspended{}}
	f.hook, f.secret = f.sub.add(cos[0], f.rc.URL+"/hook", events.ConversionCreated)
	o.Subscriptions, o.Now, o.Suspender = f.sub, f.clk.Now, f.suspend
	if o.Jitter == nil {
		o.Jitter = func() float64 { return 0.5 }
	}
	f.s = newService(t, db, o)
	return f
}

// enqueue records one event for the webhook and returns its delivery id.
func (f *fixture) enqueue(t *testing.T) string {
	t.Helper()
	e := envelope(events.ConversionCreated, f.cos[0], f.cos[1])
	if _, err := f.s.record(context.Background(), []events.Envelope{e}); err != nil {
		t.Fatal(err)
	}
	rs := rows(t, f.db, "WHERE event_id = $1", e.ID)
	if len(rs) != 1 {
		t.Fatalf("%d deliveries of the event, want 1", len(rs))
	}
	return rs[0].id
}

func TestResponsesAndFailures(t *testing.T) {
	t.Parallel()
	closedPort := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		return "http://" + addr + "/hook"
	}
	minute := time.Minute + 6*time.Second // 1 min + 10% (jitter 0.5 of 20%)
	tests := []struct {
		name    string
		respond func(http.ResponseWriter, *http.Request)
		url     string // instead of the receiver's
		noAllow bool   // without the loopback allow-list
		gone    bool   // the webhook is deleted before the attempt
		// expected
		status    string
		delay     time.Duration // of the retry
		code      string
		errPart   string
		excerpt   string
		received  int
		suspended bool
	}{
		{name: "a 200 succeeds", respond: answer(200, "ok"), status: StatusSucceeded, code: "200", excerpt: "ok", received: 1},
		{name: "a 204 succeeds", respond: answer(204, ""), status: StatusSucceeded, code: "204", excerpt: "<nil>", received: 1},
		{name: "a 302 is a failure and is not followed", respond: func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/elsewhere" {
				w.WriteHeader(200)
				return
			}
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		}, status: StatusPending, delay: minute, code: "302", errPart: "redirects are not followed", received: 1},
		{name: "a 400 is retried", respond: answer(400, `{"error":"bad"}`), status: StatusPending, delay: minute, code: "400", errPart: "400 Bad Request", excerpt: `{"error":"bad"}`, received: 1},
		{name: "a 500 is retried", respond: answer(500, "boom"), status: StatusPending, delay: minute, code: "500", errPart: "500 Internal Server Error", excerpt: "boom", received: 1},
		{name: "a 410 fails and suspends the webhook", respond: answer(410, "gone"), status: StatusFailed, code: "410", errPart: "disabled", excerpt: "gone", received: 1, suspended: true},
		{name: "a 429 with Retry-After waits as asked, within twice the base", respond: func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", "100")
			w.WriteHeader(429)
		}, status: StatusPending, delay: 100 * time.Second, code: "429", errPart: "429", received: 1},
		{name: "a 429 asking for an hour waits twice the base", respond: func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", "3600")
			w.WriteHeader(429)
		}, status: StatusPending, delay: 2 * time.Minute, code: "429", errPart: "429", received: 1},
		{name: "a receiver slower than the timeout fails the attempt", respond: func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
		}, status: StatusPending, delay: minute, code: "<nil>", errPart: "timed out", received: 1},
		{name: "a refused connection is retried", url: closedPort(), status: StatusPending, delay: minute, code: "<nil>", errPart: "connection refused"},
		{name: "a loopback receiver is refused without the allow-list", noAllow: true, status: StatusFailed, code: "<nil>", errPart: "refused: 127.0.0.1 is a loopback address"},
		{name: "a deleted webhook fails the delivery", gone: true, status: StatusFailed, code: "<nil>", errPart: "was deleted, suspended or unsubscribed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := Options{}
			if tt.noAllow {
				o.AllowList = []netip.Prefix{}
			}
			f := newFixture(t, tt.respond, o)
			f.s.sender.timeout = 300 * time.Millisecond
			if tt.url != "" {
				f.hook.URL = tt.url
				f.sub.put(f.cos[0], f.hook, events.ConversionCreated)
			}
			id := f.enqueue(t)
			if tt.gone {
				f.sub.remove(f.hook.ID)
			}
			start := f.clk.Now()
			f.s.step(t)
			r := rows(t, f.db, "WHERE id = $1", id)[0]
			if r.status != tt.status {
				t.Errorf("status %s, want %s", r.status, tt.status)
			}
			if tt.status == StatusPending {
				if r.next == nil || r.next.Sub(start) != tt.delay {
					t.Errorf("next attempt at %v, want %s after %s", r.next, tt.delay, start)
				}
			}
			as := attemptsOf(t, f.db, id)
			if len(as) != 1 {
				t.Fatalf("%d attempts recorded, want 1", len(as))
			}
			a := as[0]
			if deref(a.code) != tt.code || deref(r.lastStatus) != tt.code {
				t.Errorf("status code %s (last %s), want %s", deref(a.code), deref(r.lastStatus), tt.code)
			}
			if !strings.Contains(deref(a.err), tt.errPart) || deref(a.err) != deref(r.lastError) && tt.errPart != "" {
				t.Errorf("error %q (last %q), want it to contain %q", deref(a.err), deref(r.lastError), tt.errPart)
			}
			if tt.errPart == "" && a.err != nil {
				t.Errorf("error %q on a success", *a.err)
			}
			if tt.excerpt != "" && deref(a.excerpt) != tt.excerpt {
				t.Errorf("excerpt %.60q, want %.60q", deref(a.excerpt), tt.excerpt)
			}
			if got := len(f.rc.requests()); got != tt.received {
				t.Errorf("the receiver got %d requests, want %d", got, tt.received)
			}
			for _, req := range f.rc.requests() {
				if err := verify(t, req, f.secret, false); err != nil {
					t.Errorf("the delivery does not verify: %v", err)
				}
			}
			if got := slices.Contains(f.suspend.list(), f.hook.ID); got != tt.suspended {
				t.Errorf("suspended: %v, want %v", got, tt.suspended)
			}
		})
	}
}

func answer(code int, body string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(code)
		_, _ = w.Write([]byte(body))
	}
}

func TestRetriesFollowTheScheduleThenFail(t *testing.T) {
	t.Parallel()
	f := newFixture(t, answer(500, "down"), Options{})
	id := f.enqueue(t)
	t0 := f.clk.Now()
	// Attempt n is due at t0 + the sum of the earlier delays, each base + 10% (jitter 0.5).
	due := []time.Duration{0, 66 * time.Second, 66*time.Second + 11*time.Minute, 66*time.Second + 11*time.Minute + 110*time.Minute}
	for n, at := range due {
		f.clk.Set(t0.Add(at).Add(-time.Second))
		if outs := f.s.step(t); len(outs) != 0 && n > 0 {
			t.Fatalf("attempt %d was made a second before it was due", n+1)
		}
		f.clk.Set(t0.Add(at))
		if outs := f.s.step(t); len(outs) != 1 {
			t.Fatalf("attempt %d was not made when due", n+1)
		}
	}
	f.clk.Advance(24 * time.Hour)
	if outs := f.s.step(t); len(outs) != 0 {
		t.Fatal("a fifth attempt was made")
	}
	r := rows(t, f.db, "WHERE id = $1", id)[0]
	if r.status != StatusFailed || r.attempts != 4 || r.next != nil {
		t.Errorf("after 4 failures: status %s, %d attempts, next %v; want failed, 4, none", r.status, r.attempts, r.next)
	}
	reqs := f.rc.requests()
	if len(reqs) != 4 {
		t.Fatalf("the receiver got %d requests, want 4", len(reqs))
	}
	var stamps []string
	for i, req := range reqs {
		if req.header.Get("webhook-id") != id {
			t.Errorf("attempt %d has webhook-id %q, want %s", i+1, req.header.Get("webhook-id"), id)
		}
		stamps = append(stamps, req.header.Get("webhook-timestamp"))
		if want := fmt.Sprint(t0.Add(due[i]).Unix()); stamps[i] != want {
			t.Errorf("attempt %d has webhook-timestamp %s, want %s (the attempt's time)", i+1, stamps[i], want)
		}
		if err := verify(t, req, f.secret, false); err != nil {
			t.Errorf("attempt %d does not verify: %v", i+1, err)
		}
	}
	for i, a := range attemptsOf(t, f.db, id) {
		if a.n != i+1 || !a.startedAt.Equal(t0.Add(due[i])) || a.trigger != TriggerScheduled {
			t.Errorf("attempt %+v, want n %d started at %s", a, i+1, t0.Add(due[i]))
		}
	}
}

func TestAManualTriggerMakesExactlyOneAttempt(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		code   int
		status string
	}{
		{"a replay that fails ends failed without a retry", 500, StatusFailed},
		{"a replay that succeeds ends succeeded", 200, StatusSucceeded},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var code atomic.Int64
			code.Store(410)
			f := newFixture(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(int(code.Load())) }, Options{})
			id := f.enqueue(t)
			f.s.step(t) // 410: failed at once
			if r := rows(t, f.db, "WHERE id = $1", id)[0]; r.status != StatusFailed {
				t.Fatalf("status %s after a 410, want failed", r.status)
			}
			// What history's Replay and RetryFailed do to the row.
			code.Store(int64(tt.code))
			if _, err := f.db.Exec(context.Background(), `UPDATE deliveries SET status = 'pending', next_attempt_at = $2,
				next_trigger = 'manual', updated_at = $2 WHERE id = $1`, id, f.clk.Now()); err != nil {
				t.Fatal(err)
			}
			if outs := f.s.step(t); len(outs) != 1 {
				t.Fatalf("%d attempts, want 1", len(outs))
			}
			f.clk.Advance(48 * time.Hour)
			if outs := f.s.step(t); len(outs) != 0 {
				t.Fatalf("%d more attempts after the manual one", len(outs))
			}
			r := rows(t, f.db, "WHERE id = $1", id)[0]
			if r.status != tt.status || r.trigger != TriggerScheduled || r.next != nil || r.attempts != 2 {
				t.Errorf("after the replay: status %s, next trigger %s, next %v, attempts %d; want %s, scheduled, none, 2",
					r.status, r.trigger, r.next, r.attempts, tt.status)
			}
			as := attemptsOf(t, f.db, id)
			if len(as) != 2 || as[1].trigger != TriggerManual || deref(as[1].code) != fmt.Sprint(tt.code) {
				t.Errorf("attempts %+v, want a second, manual one answered %d", as, tt.code)
			}
			reqs := f.rc.requests()
			if len(reqs) != 2 || reqs[1].header.Get("webhook-id") != id {
				t.Errorf("the replay was not sent with the same webhook-id")
			}
		})
	}
}

func TestSeveralWorkersNeverSendTheSameAttemptTwice(t *testing.T) {
	t.Parallel()
	db, cos := newDB(t, 10)
	rc := newReceiver(t, nil)
	sub := newSubs()
	for _, co := range cos {
		sub.add(co, rc.URL, events.ConversionCreated)
	}
	var envs []events.Envelope
	for i := range 300 {
		envs = append(envs, envelope(events.ConversionCreated, cos[i%5], cos[5+i%5]))
	}
	seed := newService(t, db, Options{Subscriptions: sub})
	if n, err := seed.record(context.Background(), envs); err != nil || n != 600 {
		t.Fatalf("recorded %d (%v), want 600", n, err)
	}
	var services []*Service
	for range 4 {
		services = append(services, newService(t, db, Options{Subscriptions: sub, Workers: 8, ClaimBatch: 16, PollInterval: 20 * time.Millisecond}))
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, s := range services {
		wg.Go(func() { _ = s.dispatch(ctx) })
	}
	eventually(t, time.Minute, func() error {
		if n := len(rows(t, db, "WHERE status = 'succeeded'")); n != 600 {
			return fmt.Errorf("%d of 600 succeeded", n)
		}
		return nil
	})
	cancel()
	wg.Wait()
	sent := map[string]int{}
	for _, r := range rc.requests() {
		sent[r.header.Get("webhook-id")]++
	}
	if len(sent) != 600 {
		t.Errorf("%d distinct deliveries sent, want 600", len(sent))
	}
	for id, n := range sent {
		if n != 1 {
			t.Errorf("delivery %s was sent %d times", id, n)
		}
	}
	var attempts int
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM delivery_attempts`).Scan(&attempts); err != nil || attempts != 600 {
		t.Errorf("%d attempts recorded (%v), want 600", attempts, err)
	}
}

func TestASlowReceiverDoesNotStarveTheOthers(t *testing.T) {
	t.Parallel()
	db, cos := newDB(t, 2)
	release := make(chan struct{})
	var slowNow, slowMax atomic.Int64
	slow := newReceiver(t, func(w http.ResponseWriter, _ *http.Request) {
		n := slowNow.Add(1)
		for m := slowMax.Load(); n > m && !slowMax.CompareAndSwap(m, n); m = slowMax.Load() {
		}
		<-release
		slowNow.Add(-1)
		w.WriteHeader(204)
	})
	fast := newReceiver(t, nil)
	sub := newSubs()
	slowHook, _ := sub.add(cos[0], slow.URL, events.ConversionCreated)
	sub.add(cos[1], fast.URL, events.ConversionCreated)
	s := newService(t, db, Options{Subscriptions: sub, Workers: 6, PerTarget: 2, ClaimBatch: 50, PollInterval: 20 * time.Millisecond})
	// The slow target's deliveries come first in the queue.
	var envs []events.Envelope
	for range 30 {
		envs = append(envs, envelope(events.ConversionCreated, cos[0], ""))
	}
	if _, err := s.record(context.Background(), envs); err != nil {
		t.Fatal(err)
	}
	envs = envs[:0]
	for range 30 {
		envs = append(envs, envelope(events.ConversionCreated, cos[1], ""))
	}
	if _, err := s.record(context.Background(), envs); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.dispatch(ctx) }()
	eventually(t, 30*time.Second, func() error {
		if n := len(fast.requests()); n != 30 {
			return fmt.Errorf("the fast receiver got %d of 30 while the slow one hangs", n)
		}
		return nil
	})
	if m := slowMax.Load(); m != 2 {
		t.Errorf("the slow receiver had %d requests at once, want the limit, 2", m)
	}
	close(release)
	eventually(t, 30*time.Second, func() error {
		if n := len(rows(t, db, "WHERE target_id = $1 AND status = 'succeeded'", slowHook.ID)); n != 30 {
			return fmt.Errorf("%d of the slow receiver's 30 succeeded", n)
		}
		return nil
	})
	if m := slowMax.Load(); m > 2 {
		t.Errorf("the slow receiver had %d requests at once, over the limit of 2", m)
	}
	cancel()
	<-done
}

func TestShutdownFinishesTheAttemptInFlightAndReleasesTheRest(t *testing.T) {
	t.Parallel()
	db, cos := newDB(t, 5)
	started := make(chan struct{}, 10)
	rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request) {
		started <- struct{}{}
		time.Sleep(300 * time.Millisecond)
		w.WriteHeader(204)
	})
	sub := newSubs()
	for _, co := range cos {
		sub.add(co, rc.URL, events.ConversionCreated)
	}
	s := newService(t, db, Options{Subscriptions: sub, Workers: 1, ClaimBatch: 10})
	for _, co := range cos {
		if _, err := s.record(context.Background(), []events.Envelope{envelope(events.ConversionCreated, co, "")}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.dispatch(ctx) }()
	<-started
	cancel()
	<-done
	if n := len(rc.requests()); n != 1 {
		t.Errorf("%d attempts were started, want the one in flight", n)
	}
	succeeded := rows(t, db, "WHERE status = 'succeeded'")
	if len(succeeded) != 1 {
		t.Errorf("%d deliveries recorded as succeeded, want the one in flight", len(succeeded))
	}
	due := rows(t, db, "WHERE status = 'pending' AND next_attempt_at <= $1", time.Now())
	if len(due) != 4 {
		t.Errorf("%d deliveries are due again after the shutdown, want the 4 claimed but not started", len(due))
	}
}

func TestAPostbackAnswered410FailsAndSaysItsURLStaysActive(t *testing.T) {
	t.Parallel()
	db, cos := newDB(t, 2)
	rc := newReceiver(t, answer(410, "gone"))
	pb := newPostbacks()
	pb.set(cos[0], rc.URL+"/postback")
	var suspend suspended
	s := newService(t, db, Options{Subscriptions: newSubs(), Postbacks: pb, Suspender: &suspend})
	if n, err := s.record(context.Background(), []events.Envelope{envelope(events.CommissionStatusChanged, cos[0], cos[1])}); err != nil || n != 1 {
		t.Fatalf("recorded %d deliveries (%v), want the postback", n, err)
	}
	s.step(t)
	r := rows(t, db, "")[0]
	if r.kind != KindPostback || r.status != StatusFailed || deref(r.lastStatus) != "410" {
		t.Fatalf("delivery %s: status %s, last status %s; want a failed postback answered 410", r.kind, r.status, deref(r.lastStatus))
	}
	if e := deref(r.lastError); e != "receiver answered 410 Gone: the delivery failed; the postback URL stays active" {
		t.Errorf("error %q does not say what happened", e)
	}
	if got := suspend.list(); len(got) != 0 {
		t.Errorf("a postback's 410 suspended %v", got)
	}
}
