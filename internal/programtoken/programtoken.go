// Package programtoken makes and checks the secret tokens that stand for one program in a
// public URL (the postback token pbt_..., the Stripe endpoint's stp_...). A token is its
// prefix, the 26-character body of its program's id, then 64 hex characters of secret (256
// bits): the program id in it lets a check find the one stored hash to compare, in constant
// time, before anything else is looked at; only the SHA-256 of the whole token is stored.
package programtoken

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/partnerstream/partnerstream/internal/ids"
)

const (
	idLen     = 26
	secretLen = 64
)

// New returns a fresh token of programID with prefix, and the hash to store.
func New(prefix, programID string) (token string, hash []byte, err error) {
	secret := make([]byte, secretLen/2)
	if _, err := rand.Read(secret); err != nil {
		return "", nil, fmt.Errorf("program token: %w", err)
	}
	token = prefix + strings.TrimPrefix(programID, ids.Program+"_") + hex.EncodeToString(secret)
	return token, Hash(token), nil
}

// Hash is the stored form of a token.
func Hash(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// Program returns the program a token with prefix names, false when it cannot be a token.
func Program(prefix, token string) (string, bool) {
	if len(token) != len(prefix)+idLen+secretLen || !strings.HasPrefix(token, prefix) {
		return "", false
	}
	programID := ids.Program + "_" + token[len(prefix):len(prefix)+idLen]
	return programID, ids.Valid(ids.Program, programID)
}

// Matches reports, in constant time, whether token is the one whose hash was stored.
func Matches(token string, stored []byte) bool {
	return subtle.ConstantTimeCompare(Hash(token), stored) == 1
}
