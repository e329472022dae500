package signing

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// Key decodes secrets read from Kubernetes Secrets and the database: it never panics, and a
// key it returns is what the secret spells.
func FuzzKey(f *testing.F) {
	for _, s := range []string{NewSecret(), "whsec_", "whsec_====", "whsec_AAAA", "sec_AAAA", "", "whsec_" + string([]byte{0xff})} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, secret string) {
		key, err := Key(secret)
		if err != nil {
			return
		}
		if len(key) == 0 {
			t.Fatalf("Key(%q) accepted an empty key", secret)
		}
	})
}

// The headers Sign produces must be accepted by the Standard Webhooks reference library for
// any message id, body and key, and refused for another body.
func FuzzSignHeaders(f *testing.F) {
	f.Add("msg_01m814cmep", []byte(`{"event":"conversion.created"}`), []byte("0123456789abcdef0123456789abcdef"), int64(1795000000))
	f.Add("msg_1", []byte{}, []byte{1}, int64(0))
	f.Fuzz(func(t *testing.T, msgID string, body, key []byte, unix int64) {
		if len(key) == 0 || msgID == "" {
			return
		}
		// The reference library refuses timestamps more than 5 minutes from now.
		at := time.Now().Add(time.Duration(unix%300) * time.Second).Truncate(time.Second)
		h := http.Header{}
		h.Set("webhook-id", msgID)
		h.Set("webhook-timestamp", strconv.FormatInt(at.Unix(), 10))
		h.Set("webhook-signature", Sign(msgID, at, body, key))
		if h.Get("webhook-id") != msgID {
			return // not representable in a header (e.g. surrounding spaces)
		}
		wh, err := standardwebhooks.NewWebhookRaw(key)
		if err != nil {
			t.Fatalf("reference library refused key %s: %v", base64.StdEncoding.EncodeToString(key), err)
		}
		if err := wh.Verify(body, h); err != nil {
			t.Fatalf("reference library refused our signature of %q: %v", body, err)
		}
		if wh.Verify(append(body, 'x'), h) == nil {
			t.Fatal("a changed body verified")
		}
	})
}
