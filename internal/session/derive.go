package session

import (
	"crypto/hmac"
	"crypto/sha256"
)

// Derive returns a 32-byte secret for another purpose (e.g. the magic-code pepper), derived
// from the signing key with a label, so operators manage one secret. It changes when the
// signing key rotates; callers must only use it for short-lived values.
func (ks Keys) Derive(purpose string) []byte {
	if len(ks.keys) == 0 {
		return nil
	}
	m := hmac.New(sha256.New, ks.keys[0].secret)
	m.Write([]byte("partnerstream/derive/" + purpose))
	return m.Sum(nil)
}
