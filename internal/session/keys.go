package session

import (
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"strings"

	"github.com/partnerstream/partnerstream/internal/keyring"
)

// MinKeyBytes is the shortest signing key accepted.
const MinKeyBytes = keyring.MinKeyBytes

// csrfLabel derives the CSRF key from a signing key, so a CSRF token is never an HMAC made with
// the very key that signs tokens (domain separation).
const csrfLabel = "partnerstream/session/csrf/v1"

// Keys are the session signing keys. The first one signs; every one verifies, which is what
// lets keys rotate without signing anybody out. Printing or logging Keys shows the key ids
// only.
type Keys struct {
	keys []key
}

type key struct {
	id     string
	secret []byte
	csrf   []byte
}

// ParseKeys reads a spec "kid1:<base64>,kid2:<base64>": key ids with standard base64 (padded)
// of at least MinKeyBytes random bytes each. The first key signs.
func ParseKeys(spec string) (Keys, error) {
	ring, err := keyring.Parse("session keys", spec)
	if err != nil {
		return Keys{}, err
	}
	var ks Keys
	for _, k := range ring {
		ks.keys = append(ks.keys, key{id: k.ID, secret: k.Secret, csrf: mac(k.Secret, csrfLabel)})
	}
	return ks, nil
}

// GenerateKeySpec returns a spec with one fresh random key, for development and tests.
func GenerateKeySpec() string { return keyring.GenerateSpec() }

// IDs returns the key ids, the signing key first.
func (ks Keys) IDs() []string {
	out := make([]string, len(ks.keys))
	for i, k := range ks.keys {
		out[i] = k.id
	}
	return out
}

func (ks Keys) signing() key { return ks.keys[0] }

func (ks Keys) byID(id string) (key, bool) {
	for _, k := range ks.keys {
		if k.id == id {
			return k, true
		}
	}
	return key{}, false
}

// String, LogValue and Format keep the secrets out of logs and error messages, whatever the verb.
func (ks Keys) String() string             { return "session keys " + strings.Join(ks.IDs(), ",") }
func (ks Keys) LogValue() slog.Value       { return slog.StringValue(ks.String()) }
func (ks Keys) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(ks.String())) }

func mac(secret []byte, msg string) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(msg))
	return h.Sum(nil)
}
