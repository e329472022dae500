package session

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
)

// MinKeyBytes is the shortest signing key accepted: HS256 needs at least the hash size
// (RFC 7518 section 3.2).
const MinKeyBytes = 32

// maxKidLen keeps key ids short: they travel in every token header.
const maxKidLen = 64

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
	var ks Keys
	seen := map[string]bool{}
	for i, entry := range strings.Split(spec, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		id, encoded, ok := strings.Cut(entry, ":")
		if !ok {
			return Keys{}, fmt.Errorf("session keys: entry %d: want kid:<base64 key>", i+1)
		}
		if err := checkKid(id); err != nil {
			return Keys{}, fmt.Errorf("session keys: entry %d: %w", i+1, err)
		}
		if seen[id] {
			return Keys{}, fmt.Errorf("session keys: key id %q appears twice", id)
		}
		seen[id] = true
		secret, err := base64.StdEncoding.DecodeString(encoded)
		if err != nil {
			// The decoder's error quotes no key material, only an offset.
			return Keys{}, fmt.Errorf("session keys: key %q is not standard base64: %w", id, err)
		}
		if len(secret) < MinKeyBytes {
			return Keys{}, fmt.Errorf("session keys: key %q has %d bytes, want at least %d", id, len(secret), MinKeyBytes)
		}
		ks.keys = append(ks.keys, key{id: id, secret: secret, csrf: mac(secret, csrfLabel)})
	}
	if len(ks.keys) == 0 {
		return Keys{}, errors.New("session keys: none given; generate one with `openssl rand -base64 32` and pass kid:<key>")
	}
	return ks, nil
}

func checkKid(id string) error {
	if id == "" || len(id) > maxKidLen {
		return fmt.Errorf("key id %q: want 1 to %d characters", id, maxKidLen)
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("key id %q: want letters, digits, '-', '_' or '.'", id)
		}
	}
	return nil
}

// GenerateKeySpec returns a spec with one fresh random key, for development and tests.
func GenerateKeySpec() string {
	id := make([]byte, 4)
	secret := make([]byte, MinKeyBytes)
	// crypto/rand.Read never fails on supported platforms (it panics instead).
	_, _ = rand.Read(id)
	_, _ = rand.Read(secret)
	return "k" + hex.EncodeToString(id) + ":" + base64.StdEncoding.EncodeToString(secret)
}

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
