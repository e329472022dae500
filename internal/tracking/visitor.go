package tracking

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"hash"
	"sync"
)

// A visitor id, the cookie's value and the hash a click carries, is 16 bytes in unpadded
// base64url.
const (
	visitorIDBytes = 16
	visitorIDLen   = 22
)

// Labels keep the two uses of the visitor key apart.
const (
	cookieLabel    = "partnerstream/visitor/cookie\x00"
	visitorIDLabel = "partnerstream/visitor/id\x00"
)

// visitors says who a click's visitor is (docs/tracking.md, "Unique clicks"), under a key
// every api replica shares, so that the answer does not depend on the replica:
//
//   - a visit with a valid visitor cookie is its cookie's visitor;
//   - a visit without one gets the cookie its IP address, user agent and UTC hour make, so
//     its clicks of that hour are one visitor whether it keeps cookies or not, and the next
//     click that brings the cookie back is that visitor too. The hour keeps a person who
//     clears cookies from getting the same id back the next day.
//
// A click carries a keyed hash of the cookie, never the cookie: the analytics store holds
// nothing a browser could replay, and nothing that names an address.
type visitors struct {
	macs sync.Pool // of *visitorMAC
}

// visitorMAC is a keyed HMAC with a buffer for its input and sum: the input and sum would
// escape through the hash.Hash interface and cost allocations on every click.
type visitorMAC struct {
	h   hash.Hash
	in  []byte
	sum [sha256.Size]byte
}

func newVisitors(key []byte) *visitors {
	return &visitors{macs: sync.Pool{New: func() any { return &visitorMAC{h: hmac.New(sha256.New, key)} }}}
}

// cookie is the visitor id of a visit without a cookie: its IP address and user agent in
// the hour since the Unix epoch.
func (v *visitors) cookie(ip, userAgent string, hour int64) (id [visitorIDLen]byte) {
	m := v.macs.Get().(*visitorMAC)
	m.in = append(m.in[:0], cookieLabel...)
	m.in = binary.BigEndian.AppendUint64(m.in, uint64(hour))
	m.in = append(append(append(m.in, ip...), 0), userAgent...)
	m.encode(id[:])
	v.macs.Put(m)
	return id
}

// id is the hash of a visitor cookie that the click carries.
func (v *visitors) id(cookie *[visitorIDLen]byte) string {
	m := v.macs.Get().(*visitorMAC)
	m.in = append(append(m.in[:0], visitorIDLabel...), cookie[:]...)
	var id [visitorIDLen]byte
	m.encode(id[:])
	v.macs.Put(m)
	return string(id[:])
}

// encode writes the MAC of the input, cut to visitorIDBytes, as base64url into dst.
func (m *visitorMAC) encode(dst []byte) {
	m.h.Reset()
	m.h.Write(m.in)
	base64.RawURLEncoding.Encode(dst, m.h.Sum(m.sum[:0])[:visitorIDBytes])
}

// validVisitorID accepts only ids this package could have made, so a forged cookie cannot
// inject arbitrary bytes and an empty one does not collapse every visitor into one.
func validVisitorID(s string) bool {
	if len(s) != visitorIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		b := s[i]
		if !(b >= 'A' && b <= 'Z' || b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '-' || b == '_') {
			return false
		}
	}
	return true
}
