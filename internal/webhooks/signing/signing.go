// Package signing is the one home of delivery signing: the format of signing secrets and of
// the Secret that keeps them, their decoded keys, which keys sign at a given time, the
// signature and its headers. The controller (which writes the Secret), the dashboard API
// (which hands the current secret out and signs test samples), the postback settings and
// the delivery workers (which sign with them) share it; it knows nothing of Kubernetes
// clients, so none of them needs the Kubernetes-facing webhooks package for it.
//
// A secret is "whsec_" followed by the standard base64 of 32 random bytes (Standard
// Webhooks); the HMAC key is the decoded bytes. The Secret's data has "current" and, during
// a rotation's grace period, "previous" and "previous-expires-at" (RFC 3339).
package signing

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/partnerstream/partnerstream/api/v1alpha1"
)

// Prefix starts every signing secret.
const Prefix = "whsec_"

// keyBytes is the size of a generated key; Standard Webhooks accepts 24 to 64.
const keyBytes = 32

// NewSecret returns a fresh random signing secret.
func NewSecret() string {
	b := make([]byte, keyBytes)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (it panics on a broken platform)
	return Prefix + base64.StdEncoding.EncodeToString(b)
}

// Key decodes a signing secret into its HMAC key.
func Key(secret string) ([]byte, error) {
	enc, ok := strings.CutPrefix(secret, Prefix)
	if !ok {
		return nil, fmt.Errorf("signing secret does not start with %q", Prefix)
	}
	key, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		// The error would quote the secret: keep it out of logs.
		return nil, errors.New("signing secret is not valid base64")
	}
	if len(key) < 24 || len(key) > 64 {
		return nil, fmt.Errorf("signing key has %d bytes, want 24 to 64", len(key))
	}
	return key, nil
}

// Keys are the secrets of one Webhook as the Secret holds them.
type Keys struct {
	Current string
	// Previous and PreviousExpiresAt are set together, during a rotation's grace period.
	Previous          string
	PreviousExpiresAt time.Time
}

// ErrNoCurrent says the Secret has no usable current secret.
var ErrNoCurrent = errors.New("signing secret has no valid current key")

// FromData reads the keys of a Secret's data. The previous secret is dropped, not an error,
// when it or its expiry is malformed: signing with the current one alone is always safe.
func FromData(data map[string][]byte) (Keys, error) {
	k := Keys{Current: string(data[v1alpha1.SecretKeyCurrent])}
	if _, err := Key(k.Current); err != nil {
		return Keys{}, fmt.Errorf("%w: %w", ErrNoCurrent, err)
	}
	prev := string(data[v1alpha1.SecretKeyPrevious])
	exp, err := time.Parse(time.RFC3339, string(data[v1alpha1.SecretKeyPreviousExpiresAt]))
	if _, kerr := Key(prev); kerr == nil && err == nil {
		k.Previous, k.PreviousExpiresAt = prev, exp
	}
	return k, nil
}

// Data is the Secret data holding the keys.
func (k Keys) Data() map[string][]byte {
	d := map[string][]byte{v1alpha1.SecretKeyCurrent: []byte(k.Current)}
	if k.Previous != "" {
		d[v1alpha1.SecretKeyPrevious] = []byte(k.Previous)
		d[v1alpha1.SecretKeyPreviousExpiresAt] = []byte(k.PreviousExpiresAt.UTC().Format(time.RFC3339))
	}
	return d
}

// Rotate makes a new current secret; the old one stays as previous until now+grace, or is
// dropped at once when grace is 0 (a leaked secret). An older previous is always dropped.
func (k Keys) Rotate(now time.Time, grace time.Duration) Keys {
	next := Keys{Current: NewSecret()}
	if grace > 0 {
		next.Previous, next.PreviousExpiresAt = k.Current, now.Add(grace).Truncate(time.Second)
	}
	return next
}

// HMACKeys decodes the keys, the current one first, then the previous one, whatever its
// expiry (Live picks the keys that sign at a given time). A previous secret that does not
// decode, or has no expiry, is dropped: signing with the current one alone is always safe.
func (k Keys) HMACKeys() ([]HMACKey, error) {
	cur, err := Key(k.Current)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoCurrent, err)
	}
	all := make([]HMACKey, 1, 2)
	all[0] = HMACKey{Key: cur}
	if k.Previous != "" && !k.PreviousExpiresAt.IsZero() {
		if prev, err := Key(k.Previous); err == nil {
			all = append(all, HMACKey{Key: prev, ExpiresAt: k.PreviousExpiresAt})
		}
	}
	return all, nil
}

// PreviousValid reports whether the previous secret still signs at now.
func (k Keys) PreviousValid(now time.Time) bool {
	return k.Previous != "" && now.Before(k.PreviousExpiresAt)
}

// HMACKey is a decoded signing key. The slices are shared by every caller: never modify them.
type HMACKey struct {
	Key []byte
	// ExpiresAt is zero for the current secret; a previous one signs until, not at, it.
	ExpiresAt time.Time
}

// Live returns the keys that sign at now, in their order: the current one, and the previous
// one until, not at, its expiry. The keys are checked when signing, not when they are read,
// so a cached previous secret stops signing on time. It returns keys itself, or a prefix of
// it, when it can: the usual cases allocate nothing.
func Live(keys []HMACKey, now time.Time) []HMACKey {
	for i, k := range keys {
		if !k.signsAt(now) {
			out := keys[:i:i] // shared: an append copies it
			for _, k := range keys[i+1:] {
				if k.signsAt(now) {
					out = append(out, k)
				}
			}
			return out
		}
	}
	return keys
}

func (k HMACKey) signsAt(now time.Time) bool { return k.ExpiresAt.IsZero() || now.Before(k.ExpiresAt) }

// Target is where a delivery goes and the keys that sign it: a webhook subscription, or a
// company's postback URL.
type Target struct {
	ID  string
	URL string
	// Secrets sign the delivery, one "v1," signature each: the current secret first, then
	// the previous one while its grace period lasts.
	Secrets []HMACKey
}
