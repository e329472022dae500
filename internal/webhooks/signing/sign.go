package signing

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"strings"
	"time"
)

// The legacy signature headers: each carries the webhook-signature value again, for
// receivers written before Standard Webhooks (docs/webhooks.md, "Verifying a delivery").
const (
	WebhookSignatureHeader  = "X-Webhook-Signature"
	PostbackSignatureHeader = "x-svc-signature"
)

// Headers returns the signature headers of a message, by their documented names:
// webhook-id, webhook-timestamp and webhook-signature (Standard Webhooks), and legacy (one
// of the legacy signature headers) with the same signature. Every key given signs.
func Headers(legacy, msgID string, at time.Time, body []byte, keys []HMACKey) map[string]string {
	raw := make([][]byte, len(keys))
	for i, k := range keys {
		raw[i] = k.Key
	}
	sig := Sign(msgID, at, body, raw...)
	return map[string]string{
		"webhook-id":        msgID,
		"webhook-timestamp": strconv.FormatInt(at.Unix(), 10),
		"webhook-signature": sig,
		legacy:              sig,
	}
}

// Sign returns the value of the webhook-signature header (Standard Webhooks): one
// "v1,<base64 HMAC-SHA256>" entry per key, separated by spaces, over
// "<msgID>.<unix seconds>.<body>". Several keys are for a rotation: receivers accept the
// delivery when any entry verifies with the secret they hold.
func Sign(msgID string, at time.Time, body []byte, keys ...[]byte) string {
	content := make([]byte, 0, len(msgID)+len(body)+24)
	content = append(content, msgID...)
	content = append(content, '.')
	content = strconv.AppendInt(content, at.Unix(), 10)
	content = append(content, '.')
	content = append(content, body...)
	var b strings.Builder
	for i, key := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		m := hmac.New(sha256.New, key)
		m.Write(content)
		b.WriteString("v1,")
		b.WriteString(base64.StdEncoding.EncodeToString(m.Sum(nil)))
	}
	return b.String()
}
