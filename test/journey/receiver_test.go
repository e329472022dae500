package journey

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// receiver is an integrator's endpoint on loopback: it verifies every delivery with the
// Standard Webhooks reference library and keeps what it accepted, by webhook-id. A fault can
// make it answer 500 or hang for a while.
type receiver struct {
	name      string
	url       string
	sigHeader string // X-Webhook-Signature (webhooks) or x-svc-signature (postbacks)

	mu       sync.Mutex
	verifier *standardwebhooks.Webhook
	accepted map[string]*receipt // by webhook-id
	attempts int
	invalid  []string // why deliveries failed verification
	failing  func(now time.Time) (status int, hang time.Duration, fail bool)
}

// receipt is one webhook-id as the receiver saw it.
type receipt struct {
	id    string
	count int // times the receiver took it: more than one is a duplicate (allowed, same webhook-id)
	event struct {
		Event     string      `json:"event"`
		Data      receiptData `json:"data"`
		Timestamp string      `json:"timestamp"`
	}
}

// receiptData is the data of a delivery as a receiver took it.
type receiptData struct {
	ID     string `json:"id"`
	Type   string `json:"type"`
	Amount string `json:"amount"`
	Status string `json:"status"`
	// What attributed a conversion: added beside the fields above.
	Attribution string `json:"attribution"`
	CouponCode  string `json:"coupon_code"`
	CustomerID  string `json:"customer_id"`
	// The fraud verdict, on a conversion a rule acted on.
	Risk *risk `json:"risk"`
}

func newReceiver(t testing.TB, name, sigHeader string) *receiver {
	t.Helper()
	return newReceiverOn(t, name, sigHeader, "127.0.0.1:0", nil)
}

// newReceiverOn listens on addr, over TLS when cfg is not nil (https:// receivers, as a
// cluster's Webhooks require).
func newReceiverOn(t testing.TB, name, sigHeader, addr string, cfg *tls.Config) *receiver {
	t.Helper()
	r := &receiver{name: name, sigHeader: sigHeader, accepted: map[string]*receipt{}}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("journey: receiver listen: %v", err)
	}
	scheme := "http"
	if cfg != nil {
		l, scheme = tls.NewListener(l, cfg), "https"
	}
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 5 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	r.url = scheme + "://" + l.Addr().String() + "/hooks/" + name
	return r
}

// setSecret arms verification with the secret the API showed once.
func (r *receiver) setSecret(t testing.TB, secret string) {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatalf("journey: receiver %s: secret: %v", r.name, err)
	}
	r.mu.Lock()
	r.verifier = wh
	r.mu.Unlock()
}

// failUntil makes the receiver answer status until the time given, or, when hang > 0, take
// each delivery and answer only after hang (past the sender's timeout).
func (r *receiver) failUntil(until time.Time, status int, hang time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failing = func(now time.Time) (int, time.Duration, bool) { return status, hang, now.Before(until) }
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, "read", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.attempts++
	verifier, failing := r.verifier, r.failing
	r.mu.Unlock()
	// A failing receiver answers an error at once; a hanging one processes the delivery and
	// answers too late, the classic source of duplicates (the sender retries what was done).
	var hang time.Duration
	if failing != nil {
		if status, h, fail := failing(time.Now()); fail {
			if h == 0 {
				w.WriteHeader(status)
				return
			}
			hang = h
		}
	}
	reject := func(why string) {
		r.mu.Lock()
		r.invalid = append(r.invalid, why)
		r.mu.Unlock()
		http.Error(w, why, http.StatusBadRequest)
	}
	switch {
	case req.Method != http.MethodPost:
		reject("method " + req.Method)
		return
	case verifier == nil:
		reject("delivery before the secret was known")
		return
	case req.Header.Get(r.sigHeader) != req.Header.Get("webhook-signature"):
		reject(r.sigHeader + " differs from webhook-signature")
		return
	}
	if err := verifier.Verify(body, req.Header); err != nil {
		reject("signature: " + err.Error())
		return
	}
	id := req.Header.Get("webhook-id")
	r.mu.Lock()
	rc := r.accepted[id]
	if rc == nil {
		rc = &receipt{id: id}
		if err := json.Unmarshal(body, &rc.event); err != nil {
			r.invalid = append(r.invalid, "body: "+err.Error())
		}
		r.accepted[id] = rc
	}
	rc.count++
	r.mu.Unlock()
	if hang > 0 {
		select {
		case <-time.After(hang):
		case <-req.Context().Done():
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// snapshot copies what the receiver accepted.
func (r *receiver) snapshot() (accepted map[string]receipt, attempts int, invalid []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	accepted = make(map[string]receipt, len(r.accepted))
	for id, rc := range r.accepted {
		accepted[id] = *rc
	}
	return accepted, r.attempts, append([]string(nil), r.invalid...)
}
