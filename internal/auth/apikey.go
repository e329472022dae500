package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"math/big"
	"strings"
)

// API keys are "ps_" followed by 40 random base62 characters (about 238 bits). Only their
// SHA-256 is stored: a key is high-entropy, so a fast hash is enough and lookups stay O(1);
// the comparison itself happens in the database on the hash, never on the key.
const (
	KeyPrefix     = "ps_"
	keyBodyLen    = 40
	keyLen        = len(KeyPrefix) + keyBodyLen
	displayPrefix = len(KeyPrefix) + 6
)

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// ErrMalformedKey is returned for anything that cannot be a key; callers answer 401.
var ErrMalformedKey = errors.New("malformed API key")

// NewKey returns a fresh key, the prefix shown in lists and the hash to store.
func NewKey() (key, display string, hash []byte) {
	var b strings.Builder
	b.Grow(keyLen)
	b.WriteString(KeyPrefix)
	max := big.NewInt(int64(len(base62)))
	for i := 0; i < keyBodyLen; i++ {
		n, err := rand.Int(rand.Reader, max)
		if err != nil {
			panic("crypto/rand failed: " + err.Error())
		}
		b.WriteByte(base62[n.Int64()])
	}
	key = b.String()
	return key, key[:displayPrefix], HashKey(key)
}

// HashKey is the stored form of a key.
func HashKey(key string) []byte {
	h := sha256.Sum256([]byte(key))
	return h[:]
}

// ParseKey checks the shape of a presented key before any lookup.
func ParseKey(s string) (string, error) {
	if len(s) != keyLen || !strings.HasPrefix(s, KeyPrefix) {
		return "", ErrMalformedKey
	}
	for i := len(KeyPrefix); i < len(s); i++ {
		if strings.IndexByte(base62, s[i]) < 0 {
			return "", ErrMalformedKey
		}
	}
	return s, nil
}

// A publishable key is "ps_pk_" and 40 base62 characters. It is meant to be seen (a web page
// carries it) and authenticates only the tracking script's clicks of its one program, so its
// shape differs from a secret key's: neither parses as the other.
const (
	PublishableKeyPrefix = "ps_pk_"
	publishableKeyLen    = len(PublishableKeyPrefix) + keyBodyLen
)

// NewPublishableKey returns a fresh publishable key, the prefix shown in lists and the hash
// to store.
func NewPublishableKey() (key, display string, hash []byte) {
	key, _, _ = NewKey()
	key = PublishableKeyPrefix + key[len(KeyPrefix):]
	return key, key[:len(PublishableKeyPrefix)+6], HashKey(key)
}

// ParsePublishableKey checks the shape of a presented publishable key before any lookup.
func ParsePublishableKey(s string) (string, error) {
	if len(s) != publishableKeyLen || !strings.HasPrefix(s, PublishableKeyPrefix) {
		return "", ErrMalformedKey
	}
	if _, err := ParseKey(KeyPrefix + s[len(PublishableKeyPrefix):]); err != nil {
		return "", err
	}
	return s, nil
}
