package signing

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// The reference library of the specification must accept what Sign produces, with either
// secret of a rotation.
func TestSignIsAcceptedByTheStandardWebhooksLibrary(t *testing.T) {
	current, previous := NewSecret(), NewSecret()
	ck, _ := Key(current)
	pk, _ := Key(previous)
	body := []byte(`{"event":"conversion.created","data":{"id":"cnv_1"},"timestamp":"2026-11-22T10:00:00Z"}`)
	at := time.Now()
	h := http.Header{}
	h.Set("webhook-id", "msg_1")
	h.Set("webhook-timestamp", strconv.FormatInt(at.Unix(), 10))
	h.Set("webhook-signature", Sign("msg_1", at, body, ck, pk))
	for _, secret := range []string{current, previous} {
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		if err := wh.Verify(body, h); err != nil {
			t.Errorf("verify with one of the secrets: %v", err)
		}
	}
	other, _ := standardwebhooks.NewWebhook(NewSecret())
	if other.Verify(body, h) == nil {
		t.Error("a secret that did not sign verified the delivery")
	}
	if wh, _ := standardwebhooks.NewWebhook(current); wh.Verify(append(body, ' '), h) == nil {
		t.Error("a changed body verified")
	}
}

// Headers names every signature header as documented, the legacy one with the same value.
func TestHeaders(t *testing.T) {
	key, _ := Key(NewSecret())
	at := time.Unix(1795000000, 0)
	body := []byte(`{}`)
	h := Headers(PostbackSignatureHeader, "msg_1", at, body, []HMACKey{{Key: key}})
	sig := Sign("msg_1", at, body, key)
	want := map[string]string{"webhook-id": "msg_1", "webhook-timestamp": "1795000000", "webhook-signature": sig, "x-svc-signature": sig}
	if len(h) != len(want) {
		t.Errorf("headers %v, want %v", h, want)
	}
	for k, v := range want {
		if h[k] != v {
			t.Errorf("%s = %q, want %q", k, h[k], v)
		}
	}
}
