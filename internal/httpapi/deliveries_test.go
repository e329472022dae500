package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/partnerstream/partnerstream/internal/delivery"
	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/httpapi"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/postbacks"
	"github.com/partnerstream/partnerstream/internal/webhooks"
	"github.com/partnerstream/partnerstream/internal/webhooks/signing"
)

// deliveryFixture is the webhook fixture with the delivery routes mounted on it, and a
// loopback receiver that the test endpoint may send to.
type deliveryFixture struct {
	*webhookFixture
	receiver  *receiver
	postbacks *postbacks.Service
}

func newDeliveryFixture(t *testing.T) *deliveryFixture {
	t.Helper()
	f := &deliveryFixture{webhookFixture: newWebhookFixture(t), receiver: newReceiver(t)}
	f.postbacks = postbacks.NewService(f.db, postbacks.Options{})
	f.srv.MountDeliveries(delivery.NewHistory(f.db, nil), webhooks.NewService(kube.Client, webhooks.Options{Namespace: f.ns}),
		httpapi.DeliveriesOptions{Client: loopbackOnly(f.receiver.addr), Postbacks: f.postbacks})
	return f
}

// loopbackOnly is a client that connects to the test receiver and refuses every other
// address, as the delivery workers' guarded client does with loopback allow-listed.
func loopbackOnly(addr string) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second}
	return &http.Client{Transport: &http.Transport{Proxy: nil, DialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
		if a != addr {
			return nil, &net.OpError{Op: "dial", Net: network, Err: errRefused}
		}
		return d.DialContext(ctx, network, a)
	}}}
}

var errRefused = &net.AddrError{Err: "refused by the test's allow-list"}

// receiver is a webhook receiver on loopback that keeps what it gets and answers status.
type receiver struct {
	addr   string
	mu     sync.Mutex
	status int
	got    []received
}

type received struct {
	header http.Header
	body   []byte
	uri    string
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{status: http.StatusNoContent}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		defer r.mu.Unlock()
		r.got = append(r.got, received{req.Header.Clone(), body, req.URL.RequestURI()})
		w.WriteHeader(r.status)
		_, _ = w.Write([]byte("thanks"))
	}))
	t.Cleanup(srv.Close)
	r.addr = srv.Listener.Addr().String()
	return r
}

func (r *receiver) answer(status int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status = status
}

func (r *receiver) requests() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// stored inserts a delivery row of the company the way the delivery workers write one, with
// one scheduled attempt per status code (0: no response), and returns its id.
func (f *deliveryFixture) stored(t *testing.T, company, kind, target, status, eventType string, created time.Time, codes ...int) string {
	t.Helper()
	ctx := context.Background()
	id := ids.New(ids.Delivery)
	var next *time.Time
	if status == delivery.StatusPending {
		next = &created
	}
	if _, err := f.db.Exec(ctx, `INSERT INTO deliveries (id, company_id, kind, target_id, url, event_id, event_type, body, status,
		attempts, next_attempt_at, created_at, updated_at) VALUES ($1, $2, $3, $4, 'https://receiver.example/h', $5, $6, '{}', $7, $8, $9, $10, $10)`,
		id, company, kind, target, ids.New(ids.Event), eventType, status, len(codes), next, created); err != nil {
		t.Fatal(err)
	}
	for i, code := range codes {
		var sc *int
		errText := "connection refused"
		if code != 0 {
			sc, errText = &code, ""
		}
		if _, err := f.db.Exec(ctx, `INSERT INTO delivery_attempts (delivery_id, n, trigger, started_at, duration_ms, status_code, error, response_excerpt)
			VALUES ($1, $2, 'scheduled', $3, 40, $4, NULLIF($5, ''), 'busy')`, id, i+1, created.Add(time.Duration(i)*time.Minute), sc, errText); err != nil {
			t.Fatal(err)
		}
	}
	return id
}

// deliveryAnswer is a delivery answer; a pointer tells a missing field (or null) from an
// empty one.
type deliveryAnswer struct {
	ID            string  `json:"id"`
	Status        string  `json:"status"`
	NextTrigger   string  `json:"next_trigger"`
	NextAttemptAt *string `json:"next_attempt_at"`
	AttemptCount  int     `json:"attempt_count"`
	Attempts      []struct {
		N               int    `json:"n"`
		StatusCode      *int   `json:"status_code"`
		Error           string `json:"error"`
		Trigger         string `json:"trigger"`
		DurationMS      int    `json:"duration_ms"`
		ResponseExcerpt string `json:"response_excerpt"`
	} `json:"attempts"`
}

var day = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

func TestDeliveryRoutesAreDocumented(t *testing.T) {
	assertAreaDocumented(t, func(s *httpapi.Server) { s.MountDeliveries(nil, nil, httpapi.DeliveriesOptions{}) }, "openapi/31-deliveries.yaml")
}

func TestWebhookDeliveryHistoryIsTheCompanysOnlyWithFiltersAndPages(t *testing.T) {
	f := newDeliveryFixture(t)
	wh, _ := f.create(t, f.adv, orderHook)
	failed := f.stored(t, f.advID, "webhook", wh, "failed", events.ConversionCreated, day, 500, 0, 503, 500)
	ok := f.stored(t, f.advID, "webhook", wh, "succeeded", events.ConversionApproved, day.Add(time.Hour), 200)
	pending := f.stored(t, f.advID, "webhook", wh, "pending", events.ConversionCreated, day.Add(2*time.Hour), 503)
	// The same target id under the other company (a forged row) and the company's postback.
	f.stored(t, f.affID, "webhook", wh, "failed", events.ConversionCreated, day)
	f.stored(t, f.advID, "postback", f.advID, "failed", events.CommissionStatusChanged, day)
	path := "/api/webhooks/" + wh + "/deliveries"

	cases := []struct {
		name, query string
		want        []string
	}{
		{"everything, newest first", "", []string{pending, ok, failed}},
		{"by status", "?status=failed", []string{failed}},
		{"by event type", "?event_type=conversion.approved", []string{ok}},
		{"from a time, inclusive", "?from=2026-03-01T01:00:00Z", []string{pending, ok}},
		{"to a date, exclusive", "?to=2026-03-01", []string{}},
		{"a range", "?from=2026-03-01&to=2026-03-01T01:00:00Z", []string{failed}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := idsOf(t, f.do(t, "GET", path+c.query, f.adv, "")); !slices.Equal(got, c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}

	t.Run("pages", func(t *testing.T) {
		first := f.do(t, "GET", path+"?limit=2", f.adv, "")
		next := decode[list[resource]](t, first).NextCursor
		second := f.do(t, "GET", path+"?limit=2&cursor="+next, f.adv, "")
		if got := append(idsOf(t, first), idsOf(t, second)...); !slices.Equal(got, []string{pending, ok, failed}) || decode[list[resource]](t, second).NextCursor != "" {
			t.Fatalf("pages %v then %s", got, second.raw)
		}
	})

	t.Run("attempts", func(t *testing.T) {
		r := f.do(t, "GET", path+"?status=failed", f.adv, "")
		data := decode[list[deliveryAnswer]](t, r).Data
		if len(data) == 0 {
			t.Fatalf("no failed delivery: %s", r.raw)
		}
		d := data[0]
		attempts := d.Attempts
		if d.AttemptCount != 4 || len(attempts) != 4 || d.NextAttemptAt != nil {
			t.Fatalf("delivery %s", r.raw)
		}
		second := attempts[1]
		if second.N != 2 || second.StatusCode != nil || second.Error != "connection refused" || second.Trigger != "scheduled" ||
			second.DurationMS != 40 || second.ResponseExcerpt != "busy" || attempts[2].StatusCode == nil || *attempts[2].StatusCode != 503 {
			t.Fatalf("attempts %s", r.raw)
		}
	})

	refused := []struct {
		name    string
		who     map[string]string
		query   string
		status  int
		code    string
		message string
	}{
		{"another company's webhook is not found", f.aff, "", 404, "not_found", ""},
		{"an unknown status", f.adv, "?status=lost", 400, "validation_failed", "status: must be one of pending, succeeded, failed"},
		{"an unknown event type", f.adv, "?event_type=click", 400, "validation_failed", "event_type: must be one of"},
		{"a malformed time", f.adv, "?from=yesterday", 400, "validation_failed", "from: must be an RFC 3339 time (2026-03-14T15:09:26Z) or a date (2026-03-14)"},
		{"an empty range", f.adv, "?from=2026-03-02&to=2026-03-01", 400, "validation_failed", "to: must be after from"},
		{"an API key", f.advKey, "", 401, "api_key_not_allowed", ""},
	}
	for _, c := range refused {
		t.Run(c.name, func(t *testing.T) {
			r := f.do(t, "GET", path+c.query, c.who, "")
			if r.status != c.status || r.problem.Code != c.code || !strings.Contains(r.raw, c.message) {
				t.Fatalf("= %d %s, want %d %s %q", r.status, r.raw, c.status, c.code, c.message)
			}
		})
	}
}

func TestPostbackDeliveryHistoryIsTheCompanysOnly(t *testing.T) {
	f := newDeliveryFixture(t)
	mine := f.stored(t, f.advID, "postback", f.advID, "succeeded", events.CommissionStatusChanged, day, 200)
	theirs := f.stored(t, f.affID, "postback", f.affID, "failed", events.CommissionStatusChanged, day, 500)
	f.stored(t, f.advID, "webhook", ids.New(ids.Webhook), "failed", events.CommissionStatusChanged, day)
	if got := idsOf(t, f.do(t, "GET", "/api/postbacks/deliveries", f.adv, "")); !slices.Equal(got, []string{mine}) {
		t.Fatalf("the advertiser sees %v, want only %s", got, mine)
	}
	if got := idsOf(t, f.do(t, "GET", "/api/postbacks/deliveries?status=failed", f.aff, "")); !slices.Equal(got, []string{theirs}) {
		t.Fatalf("the affiliate sees %v, want only %s", got, theirs)
	}
	if r := f.do(t, "GET", "/api/postbacks/deliveries?status=done", f.adv, ""); r.status != 400 {
		t.Fatalf("a bad filter = %d %s", r.status, r.raw)
	}
}

func TestReplayQueuesOneFailedDeliveryOfTheCompany(t *testing.T) {
	f := newDeliveryFixture(t)
	wh, _ := f.create(t, f.adv, orderHook)
	failed := f.stored(t, f.advID, "webhook", wh, "failed", events.ConversionCreated, day, 500, 500, 500, 500)
	cases := []struct {
		name   string
		who    map[string]string
		id     string
		status int
		code   string
		reason string // the delivery_status of a 409
	}{
		{"another company's delivery is not found", f.aff, failed, 404, "not_found", ""},
		{"a member may not replay", f.member, failed, 403, "forbidden", ""},
		{"an unknown id is not found", f.adv, ids.New(ids.Delivery), 404, "not_found", ""},
		{"a malformed id is not found", f.adv, "wh_nope", 404, "not_found", ""},
		{"a succeeded delivery is a conflict", f.adv, f.stored(t, f.advID, "webhook", wh, "succeeded", events.ConversionCreated, day, 200), 409, "delivery_not_replayable", "succeeded"},
		{"a pending delivery is a conflict", f.adv, f.stored(t, f.advID, "webhook", wh, "pending", events.ConversionCreated, day), 409, "delivery_not_replayable", "pending"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := f.do(t, "POST", "/api/webhooks/"+c.id+"/replay", c.who, "")
			if r.status != c.status || r.problem.Code != c.code {
				t.Fatalf("= %d %s, want %d %s", r.status, r.raw, c.status, c.code)
			}
			if c.reason != "" && (r.problem.DeliveryStatus != c.reason || !strings.Contains(r.raw, `"replayable_statuses":["failed"]`)) {
				t.Fatalf("the conflict does not say why: %s", r.raw)
			}
		})
	}

	r := f.do(t, "POST", "/api/webhooks/"+failed+"/replay", f.adv, "")
	if d := decode[deliveryAnswer](t, r); r.status != 202 || d.ID != failed || d.Status != "pending" || d.NextTrigger != "manual" ||
		d.NextAttemptAt == nil || len(d.Attempts) != 4 {
		t.Fatalf("replay = %d %s", r.status, r.raw)
	}
	if again := f.do(t, "POST", "/api/webhooks/"+failed+"/replay", f.adv, ""); again.status != 409 || again.problem.DeliveryStatus != "pending" {
		t.Fatalf("a second replay before its attempt = %d %s", again.status, again.raw)
	}
}

func TestRetryFailedQueuesTheCompanysFailedDeliveriesAndCountsThem(t *testing.T) {
	f := newDeliveryFixture(t)
	wh, _ := f.create(t, f.adv, orderHook)
	other, _ := f.create(t, f.adv, orderHook)
	theirs, _ := f.create(t, f.aff, orderHook)
	f.stored(t, f.advID, "webhook", wh, "failed", events.ConversionCreated, day)
	f.stored(t, f.advID, "webhook", wh, "failed", events.ConversionCreated, day.Add(24*time.Hour))
	f.stored(t, f.advID, "webhook", other, "failed", events.ConversionCreated, day)
	f.stored(t, f.advID, "postback", f.advID, "failed", events.CommissionStatusChanged, day)
	f.stored(t, f.advID, "webhook", wh, "succeeded", events.ConversionCreated, day)
	f.stored(t, f.affID, "webhook", theirs, "failed", events.ConversionCreated, day)

	cases := []struct {
		name, body string
		status     int
		queued     int
	}{
		{"one webhook in a range", `{"webhook_id": "` + wh + `", "from": "2026-03-02", "to": "2026-03-03T00:00:00Z"}`, 200, 1},
		{"another company's webhook is not found", `{"webhook_id": "` + theirs + `"}`, 404, 0},
		{"a malformed time is refused", `{"from": "March"}`, 400, 0},
		{"an unknown field is refused", `{"webhook": "` + wh + `"}`, 400, 0},
		{"one webhook", `{"webhook_id": "` + wh + `"}`, 200, 1},
		{"every other failed delivery, postbacks too, without a body", ``, 200, 2},
		{"then nothing is left", `{}`, 200, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := f.do(t, "POST", "/api/webhooks/retry-failed", f.adv, c.body)
			if r.status != c.status || (c.status == 200 && decode[struct{ Queued int }](t, r).Queued != c.queued) {
				t.Fatalf("= %d %s, want %d queued %v", r.status, r.raw, c.status, c.queued)
			}
		})
	}
	if r := f.do(t, "POST", "/api/webhooks/retry-failed", f.member, ""); r.status != 403 {
		t.Fatalf("a member's bulk retry = %d %s", r.status, r.raw)
	}
	var theirsFailed int
	if err := f.db.QueryRow(context.Background(), `SELECT count(*) FROM deliveries WHERE company_id = $1 AND status = 'failed'`, f.affID).Scan(&theirsFailed); err != nil || theirsFailed != 1 {
		t.Fatalf("the other company's failed deliveries: %d (%v), want 1 untouched", theirsFailed, err)
	}
}

// sample is a test endpoint answer.
type sample struct {
	Body    string            `json:"body"`
	Payload json.RawMessage   `json:"payload"`
	Headers map[string]string `json:"headers"`
	Secret  string            `json:"secret"`
	Sent    *struct {
		Success         bool   `json:"success"`
		StatusCode      *int   `json:"status_code"`
		Error           string `json:"error"`
		ResponseExcerpt string `json:"response_excerpt"`
	} `json:"sent"`
}

func (f *deliveryFixture) sample(t *testing.T, key map[string]string, body string) sample {
	t.Helper()
	r := f.do(t, "POST", "/api/v1/webhooks/test", key, body)
	if r.status != 200 {
		t.Fatalf("test endpoint = %d %s", r.status, r.raw)
	}
	var s sample
	if err := json.Unmarshal([]byte(r.raw), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// verify checks the sample with the Standard Webhooks reference library and the secret.
func verify(t *testing.T, secret string, body []byte, headers map[string]string) {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	for k, v := range headers {
		h.Set(k, v)
	}
	if err := wh.Verify(body, h); err != nil {
		t.Fatalf("the reference library refuses the sample: %v", err)
	}
}

func TestTheTestEndpointSignsASampleAsADeliveryWould(t *testing.T) {
	f := newDeliveryFixture(t)
	s := f.sample(t, f.advKey, "")
	verify(t, s.Secret, []byte(s.Body), s.Headers)
	// payload is the same event as an object, for people and generated clients.
	var asObject, asBody map[string]any
	if err := json.Unmarshal(s.Payload, &asObject); err != nil || json.Unmarshal([]byte(s.Body), &asBody) != nil || !reflect.DeepEqual(asObject, asBody) {
		t.Fatalf("payload %s is not body %s as an object (%v)", s.Payload, s.Body, err)
	}
	if s.Headers["X-Webhook-Signature"] != s.Headers["webhook-signature"] || !strings.HasPrefix(s.Headers["webhook-id"], "msg_") {
		t.Fatalf("headers %v", s.Headers)
	}
	// The body is exactly what events.WebhookBody makes of the same event.
	var parsed struct {
		Event     string          `json:"event"`
		Data      json.RawMessage `json:"data"`
		Timestamp time.Time       `json:"timestamp"`
	}
	if err := json.Unmarshal([]byte(s.Body), &parsed); err != nil {
		t.Fatal(err)
	}
	again, err := events.WebhookBody(events.Envelope{Type: parsed.Event, Data: parsed.Data, OccurredAt: parsed.Timestamp})
	if err != nil || string(again) != s.Body {
		t.Fatalf("body %s\nis not events.WebhookBody's %s (%v)", s.Body, again, err)
	}
	var data events.ConversionData
	if err := json.Unmarshal(parsed.Data, &data); err != nil {
		t.Fatal(err)
	}
	if parsed.Event != events.ConversionCreated || data.AdvertiserID != f.advID || data.Amount != "42.50" || data.Currency != "USD" ||
		data.Status != "pending" || !strings.HasPrefix(data.ID, "cnv_") || data.CommissionAmount != "4.25" {
		t.Fatalf("sample %s", s.Body)
	}
	if other, _ := standardwebhooks.NewWebhook(signing.NewSecret()); other.Verify([]byte(s.Body), http.Header{
		"Webhook-Id": {s.Headers["webhook-id"]}, "Webhook-Timestamp": {s.Headers["webhook-timestamp"]}, "Webhook-Signature": {s.Headers["webhook-signature"]},
	}) == nil {
		t.Fatal("another secret verifies the sample")
	}

	t.Run("the affiliate's sample is its side of the conversion, of the type asked", func(t *testing.T) {
		s := f.sample(t, f.affKey, `{"event_type": "commission.status_changed"}`)
		verify(t, s.Secret, []byte(s.Body), s.Headers)
		if !strings.Contains(s.Body, `"affiliate_id":"`+f.affID+`"`) || !strings.Contains(s.Body, `"previous_status":"pending"`) ||
			!strings.HasPrefix(s.Body, `{"event":"commission.status_changed"`) {
			t.Fatalf("sample %s", s.Body)
		}
	})
	t.Run("a partnership sample carries the partnership's data", func(t *testing.T) {
		s := f.sample(t, f.advKey, `{"event_type": "partnership.created"}`)
		verify(t, s.Secret, []byte(s.Body), s.Headers)
		if !strings.HasPrefix(s.Body, `{"event":"partnership.created","data":{"id":"ptn_`) || !strings.Contains(s.Body, `"type":"partnership"`) ||
			!strings.Contains(s.Body, `"advertiser_id":"`+f.advID+`"`) || !strings.Contains(s.Body, `"status":"pending"`) {
			t.Fatalf("sample %s", s.Body)
		}
	})
	t.Run("a given secret signs and is not echoed", func(t *testing.T) {
		secret := signing.NewSecret()
		s := f.sample(t, f.advKey, `{"secret": "`+secret+`"}`)
		verify(t, secret, []byte(s.Body), s.Headers)
		if s.Secret != "" {
			t.Fatal("the answer repeats the caller's secret")
		}
	})
}

// A postback sample is signed with the company's postback secret and sent to its postback URL
// with the placeholders filled from the sample, as a real postback would be.
func TestTheTestEndpointSendsAPostbackSampleToThePostbackURL(t *testing.T) {
	f := newDeliveryFixture(t)
	if r := f.do(t, "POST", "/api/v1/webhooks/test", f.advKey, `{"postback": true}`); r.status != 409 || r.problem.Code != "postback_not_configured" {
		t.Fatalf("a postback sample without a postback URL = %d %s", r.status, r.raw)
	}
	url := "http://" + f.receiver.addr + "/pb/{status}?cid={click_id}&amount={amount}&cur={currency}"
	_, secret, err := f.postbacks.SetURL(context.Background(), f.advID, &url)
	if err != nil {
		t.Fatal(err)
	}
	s := f.sample(t, f.advKey, `{"postback": true, "send": true}`)
	verify(t, secret, []byte(s.Body), s.Headers)
	if !strings.HasPrefix(s.Body, `{"event":"commission.status_changed"`) || s.Headers["x-svc-signature"] != s.Headers["webhook-signature"] {
		t.Fatalf("sample %s with headers %v", s.Body, s.Headers)
	}
	var body struct{ Data events.ConversionData }
	if err := json.Unmarshal([]byte(s.Body), &body); err != nil {
		t.Fatal(err)
	}
	got := f.receiver.requests()
	want := "/pb/approved?cid=" + body.Data.ClickID + "&amount=42.50&cur=USD"
	if s.Sent == nil || !s.Sent.Success || len(got) != 1 || got[0].uri != want {
		t.Fatalf("sent %+v; received %d requests, want one to %s", s.Sent, len(got), want)
	}
	for _, bad := range []string{`{"postback": true, "event_type": "conversion.created"}`, `{"postback": true, "secret": "` + signing.NewSecret() + `"}`} {
		if r := f.do(t, "POST", "/api/v1/webhooks/test", f.advKey, bad); r.status != 400 {
			t.Errorf("%s = %d %s, want 400", bad, r.status, r.raw)
		}
	}
}

func TestTheTestEndpointSignsWithTheWebhooksSecretsAndSendsToIt(t *testing.T) {
	f := newDeliveryFixture(t)
	wh, secret := f.create(t, f.adv, `{"url": "http://`+f.receiver.addr+`/hooks", "events": ["conversion.created"]}`)
	// Another company cannot have a sample signed with this webhook's secrets.
	if r := f.do(t, "POST", "/api/v1/webhooks/test", f.affKey, `{"webhook_id": "`+wh+`"}`); r.status != 404 || !strings.Contains(r.raw, "no such webhook") {
		t.Fatalf("another company's webhook = %d %s", r.status, r.raw)
	}
	s := f.sample(t, f.advKey, `{"webhook_id": "`+wh+`"}`)
	verify(t, secret, []byte(s.Body), s.Headers)
	if s.Secret != "" || s.Sent != nil || len(f.receiver.requests()) != 0 {
		t.Fatalf("without send nothing is sent and no secret shown: %+v", s)
	}

	// During a rotation both secrets sign, as a delivery's would.
	rot := f.do(t, "PUT", "/api/webhooks/"+wh+"/rotate-secret", f.adv, "")
	if rot.status != 200 {
		t.Fatalf("rotate = %d %s", rot.status, rot.raw)
	}
	s = f.sample(t, f.advKey, `{"webhook_id": "`+wh+`", "send": true}`)
	verify(t, secret, []byte(s.Body), s.Headers)
	verify(t, str(decode[webhook](t, rot).Secret), []byte(s.Body), s.Headers)
	if s.Sent == nil || !s.Sent.Success || s.Sent.StatusCode == nil || *s.Sent.StatusCode != 204 {
		t.Fatalf("sent %+v", s.Sent)
	}
	got := f.receiver.requests()
	if len(got) != 1 || string(got[0].body) != s.Body {
		t.Fatalf("the receiver got %d requests, the first %q; want the body %q", len(got), got[0].body, s.Body)
	}
	headers := map[string]string{}
	for _, k := range []string{"webhook-id", "webhook-timestamp", "webhook-signature", "X-Webhook-Signature", "content-type"} {
		headers[k] = got[0].header.Get(k)
		if headers[k] != s.Headers[k] {
			t.Errorf("the receiver's %s is %q, the answer's %q", k, headers[k], s.Headers[k])
		}
	}
	verify(t, str(decode[webhook](t, rot).Secret), got[0].body, headers)
	// It is one delivery attempt (delivery.Sender, tested there), down to the User-Agent.
	if ua := got[0].header.Get("User-Agent"); !strings.HasPrefix(ua, "PartnerStream-Webhooks/") {
		t.Errorf("the test send's User-Agent is %q, want a delivery's", ua)
	}

	t.Run("an error answer is reported with its excerpt", func(t *testing.T) {
		f.receiver.answer(http.StatusServiceUnavailable)
		s := f.sample(t, f.advKey, `{"webhook_id": "`+wh+`", "send": true}`)
		if s.Sent == nil || s.Sent.Success || s.Sent.StatusCode == nil || *s.Sent.StatusCode != 503 || s.Sent.ResponseExcerpt != "thanks" ||
			s.Sent.Error != "" || len(f.receiver.requests()) != 2 {
			t.Fatalf("sent %+v after %d requests", s.Sent, len(f.receiver.requests()))
		}
	})
	t.Run("an address the client refuses is reported, not sent", func(t *testing.T) {
		far, _ := f.create(t, f.adv, `{"url": "http://127.0.0.1:1/hooks", "events": ["conversion.created"]}`)
		s := f.sample(t, f.advKey, `{"webhook_id": "`+far+`", "send": true}`)
		if s.Sent == nil || s.Sent.Success || s.Sent.StatusCode != nil || !strings.Contains(s.Sent.Error, "refused") {
			t.Fatalf("sent %+v", s.Sent)
		}
	})
}

// fakeTargets signs deliveries to its webhooks (id to company); others are not found.
type fakeTargets map[string]string

func (w fakeTargets) Get(_ context.Context, companyID, id string) (webhooks.Webhook, error) {
	if w[id] != companyID {
		return webhooks.Webhook{}, webhooks.ErrNotFound
	}
	return webhooks.Webhook{ID: id, CompanyID: companyID, URL: "https://receiver.example/hooks", Ready: true}, nil
}

func (w fakeTargets) SigningTarget(_ context.Context, companyID, id string, _ time.Time) (signing.Target, error) {
	if w[id] != companyID {
		return signing.Target{}, webhooks.ErrNotFound
	}
	key, err := signing.Key(signing.NewSecret())
	return signing.Target{ID: id, URL: "https://receiver.example/hooks", Secrets: []signing.HMACKey{{Key: key}}}, err
}

func TestTheTestEndpointRefusesWhatItCannotDo(t *testing.T) {
	f := newFakeFixture(t)
	mine, theirs := ids.New(ids.Webhook), ids.New(ids.Webhook)
	f.srv.MountDeliveries(nil, fakeTargets{mine: f.advID, theirs: f.affID}, httpapi.DeliveriesOptions{})
	advKey := apiKey(f.adv)
	cases := []struct {
		name, body string
		status     int
		message    string
	}{
		{"an event type without a sample", `{"event_type": "click.created"}`, 400, "event_type: must be one of commission.held, commission.released, commission.status_changed, conversion.approved"},
		{"a webhook and a secret", `{"webhook_id": "` + theirs + `", "secret": "` + signing.NewSecret() + `"}`, 400, "not both"},
		{"a malformed secret", `{"secret": "hunter2"}`, 400, "secret: must be a signing secret"},
		{"send without a webhook", `{"send": true}`, 400, "send: needs webhook_id"},
		{"another company's webhook", `{"webhook_id": "` + theirs + `"}`, 404, "no such webhook"},
		{"an unknown field", `{"event": "conversion.created"}`, 400, "unknown field"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := f.do(t, "POST", "/api/v1/webhooks/test", advKey, c.body)
			if r.status != c.status || !strings.Contains(r.raw, c.message) {
				t.Fatalf("= %d %s, want %d %q", r.status, r.raw, c.status, c.message)
			}
		})
	}
	if r := f.do(t, "POST", "/api/v1/webhooks/test", nil, ""); r.status != 401 {
		t.Fatalf("without a key = %d", r.status)
	}

	t.Run("sending without a guarded client is unavailable", func(t *testing.T) {
		if r := f.do(t, "POST", "/api/v1/webhooks/test", advKey, `{"webhook_id": "`+mine+`", "send": true}`); r.status != 503 || r.problem.Code != "sending_unavailable" {
			t.Fatalf("= %d %s", r.status, r.raw)
		}
	})
}

func TestADeliveryListShowsItsTargetsHealth(t *testing.T) {
	f := newDeliveryFixture(t)
	now := time.Now().UTC()
	f.stored(t, f.advID, "postback", f.advID, "succeeded", events.CommissionStatusChanged, now.Add(-time.Hour), 500, 200)
	f.stored(t, f.advID, "postback", f.advID, "pending", events.CommissionStatusChanged, now.Add(-time.Minute), 0)
	f.stored(t, f.advID, "postback", f.advID, "succeeded", events.CommissionStatusChanged, now.Add(-48*time.Hour), 200) // not of the last day
	openUntil := now.Add(time.Minute).Truncate(time.Second)
	if _, err := f.db.Exec(context.Background(), `INSERT INTO delivery_endpoints (kind, target_id, company_id, consecutive_failures, open_until,
		last_success_at, last_failure_at, failing_since, updated_at) VALUES ('postback', $1, $1, 5, $2, $3, $3, $3, $3)`, f.advID, openUntil, now); err != nil {
		t.Fatal(err)
	}
	type health struct {
		Breaker             string   `json:"breaker"`
		ConsecutiveFailures int      `json:"consecutive_failures"`
		OpenUntil           *string  `json:"open_until"`
		Attempts24h         int      `json:"attempts_24h"`
		Succeeded24h        int      `json:"succeeded_24h"`
		SuccessRate24h      *float64 `json:"success_rate_24h"`
	}
	read := func(as map[string]string) health {
		t.Helper()
		r := f.do(t, "GET", "/api/postbacks/deliveries", as, "")
		var v struct {
			Endpoint *health `json:"endpoint"`
		}
		if r.status != 200 || json.Unmarshal([]byte(r.raw), &v) != nil || v.Endpoint == nil {
			t.Fatalf("GET the postback deliveries = %d %s, want 200 with the endpoint's health", r.status, r.raw)
		}
		return *v.Endpoint
	}
	got := read(f.adv)
	if got.Breaker != "open" || got.ConsecutiveFailures != 5 || got.OpenUntil == nil || got.Attempts24h != 3 || got.Succeeded24h != 1 ||
		got.SuccessRate24h == nil || *got.SuccessRate24h < 0.33 || *got.SuccessRate24h > 0.34 {
		t.Errorf("the advertiser's postback health is %+v, want open after 5 failures, 1 of 3 attempts of the day succeeded", got)
	}
	// The affiliate's own postback URL was never attempted: closed, no rate.
	if got := read(f.aff); got.Breaker != "closed" || got.ConsecutiveFailures != 0 || got.Attempts24h != 0 || got.SuccessRate24h != nil {
		t.Errorf("the affiliate's postback health is %+v, want closed and never attempted", got)
	}
}
