package session

import (
	"crypto/hmac"
	"encoding/base64"
)

// CSRFToken returns the CSRF token of a session: an HMAC of the session id under a key derived
// from the signing key. It needs no storage and stays the same across refreshes; after a key
// rotation the next refresh hands out the token under the new key.
func (m *Manager) CSRFToken(sessionID string) string {
	return base64.RawURLEncoding.EncodeToString(mac(m.codec.keys.signing().csrf, sessionID))
}

// CheckCSRF reports whether token is the CSRF token of the session under any of the keys, so a
// token handed out before a rotation stays good while its key is in the set.
func (m *Manager) CheckCSRF(sessionID, token string) error {
	if token == "" {
		return ErrCSRF
	}
	got, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return ErrCSRF
	}
	for _, k := range m.codec.keys.keys {
		if hmac.Equal(got, mac(k.csrf, sessionID)) {
			return nil
		}
	}
	return ErrCSRF
}
