// Package keyring reads the platform's key rings: "kid1:<base64>,kid2:<base64>", key ids with
// standard base64 (padded) secrets. The first key signs and every key verifies, which is what
// lets a key rotate without invalidating what the old one signed. The session keys and the
// click-id keys are both such rings.
package keyring

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// MinKeyBytes is the shortest key accepted: an HMAC-SHA256 key needs at least the hash size
// (RFC 7518 section 3.2).
const MinKeyBytes = 32

// maxKidLen keeps key ids short: they travel in every token header.
const maxKidLen = 64

// Key is one key of a ring.
type Key struct {
	ID     string
	Secret []byte
}

// Parse reads spec; name ("session keys") begins every error. Errors never quote key material.
func Parse(name, spec string) ([]Key, error) {
	var out []Key
	seen := map[string]bool{}
	for i, entry := range strings.Split(spec, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		id, encoded, ok := strings.Cut(entry, ":")
		if !ok {
			return nil, fmt.Errorf("%s: entry %d: want kid:<base64 key>", name, i+1)
		}
		if err := checkKid(id); err != nil {
			return nil, fmt.Errorf("%s: entry %d: %w", name, i+1, err)
		}
		if seen[id] {
			return nil, fmt.Errorf("%s: key id %q appears twice", name, id)
		}
		seen[id] = true
		secret, err := base64.StdEncoding.DecodeString(encoded)
		if err != nil {
			// The decoder's error quotes no key material, only an offset.
			return nil, fmt.Errorf("%s: key %q is not standard base64: %w", name, id, err)
		}
		if len(secret) < MinKeyBytes {
			return nil, fmt.Errorf("%s: key %q has %d bytes, want at least %d", name, id, len(secret), MinKeyBytes)
		}
		out = append(out, Key{ID: id, Secret: secret})
	}
	if len(out) == 0 {
		return nil, errors.New(name + ": none given; generate one with `openssl rand -base64 32` and pass kid:<key>")
	}
	return out, nil
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

// GenerateSpec returns a spec with one fresh random key, for development and tests.
func GenerateSpec() string {
	id := make([]byte, 4)
	secret := make([]byte, MinKeyBytes)
	// crypto/rand.Read never fails on supported platforms (it panics instead).
	_, _ = rand.Read(id)
	_, _ = rand.Read(secret)
	return "k" + hex.EncodeToString(id) + ":" + base64.StdEncoding.EncodeToString(secret)
}
