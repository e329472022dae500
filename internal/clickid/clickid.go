// Package clickid makes and reads signed click ids: "clk_" and 60 characters of the ids'
// base32 alphabet that carry the tracking link, the click time, a random part and a MAC
// under a server key. A conversion can then be attributed from the id alone (and the link in
// Postgres), without waiting for the click to reach the analytics store.
//
// The 37 bytes under the base32:
//
//	version (1) | key tag (1) | link id (16) | click time, ms since 2025-01-01 UTC (5) |
//	random (4) | MAC (10)
//
// The MAC is HMAC-SHA256 of the first 27 bytes, under a domain label, cut to 80 bits. A forger
// can only try ids against the API, one request each, with an API key of the advertiser whose
// link the id names; at 2^-80 a guess that is not even worth trying. The random part makes
// two clicks of one link in one millisecond differ (a collision is a 2^-32 event per pair,
// and only merges two clicks of the same link at the same time).
package clickid

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"fmt"
	"hash"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/keyring"
)

// Len is the length of a signed click id.
const Len = len(prefix) + 60

const (
	prefix  = ids.Click + "_"
	version = 1
	macLen  = 10
	bodyLen = 1 + 1 + 16 + 5 + 4 // what the MAC covers
	rawLen  = bodyLen + macLen   // 37 bytes, 296 bits: 60 characters, the last 4 bits zero
	label   = "partnerstream/clickid/v1\x00"
	// maxMillis is the 40-bit clock's end: about 34.8 years after the epoch.
	maxMillis = 1<<40 - 1
)

// epoch is the zero of the id's clock; clicks before it cannot be minted.
var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

var enc = base32.NewEncoding(ids.Alphabet).WithPadding(base32.NoPadding)

// Click is what a verified id says.
type Click struct {
	LinkID string
	At     time.Time // millisecond precision, UTC
}

// Keys are the click-id keys. The first one signs; every one verifies, for as long as the
// longest attribution window (365 days) after it stopped signing. The zero Keys verifies
// nothing and cannot mint. Printing or logging Keys shows the key ids only.
type Keys struct {
	keys []key
	// visitor is the key of visitor hashes (VisitorKey).
	visitor []byte
}

type key struct {
	id  string
	tag byte
	// macs keeps keyed HMAC states: one per call would cost the redirect the key schedule
	// and a handful of allocations per click.
	macs *sync.Pool
}

// ParseKeys reads a spec "kid1:<base64>,kid2:<base64>" (package keyring). An id carries one
// byte derived from its key's id, not the id itself, so two key ids with the same byte
// cannot be in one ring: the error says to pick another id.
func ParseKeys(spec string) (Keys, error) {
	ring, err := keyring.Parse("click-id keys", spec)
	if err != nil {
		return Keys{}, err
	}
	var ks Keys
	byTag := map[byte]string{}
	for _, k := range ring {
		t := tag(k.ID)
		if other, ok := byTag[t]; ok {
			return Keys{}, fmt.Errorf("click-id keys: key ids %q and %q share a tag; rename one", other, k.ID)
		}
		byTag[t] = k.ID
		secret := k.Secret
		ks.keys = append(ks.keys, key{id: k.ID, tag: t, macs: &sync.Pool{New: func() any { return newMACState(secret) }}})
	}
	if len(ring) > 0 {
		mac := hmac.New(sha256.New, ring[len(ring)-1].Secret)
		mac.Write([]byte(visitorLabel))
		ks.visitor = mac.Sum(nil)
	}
	return ks, nil
}

// visitorLabel separates the visitor key from the click-id MACs made with the same secret.
const visitorLabel = "partnerstream/visitor/v1"

// VisitorKey is the key every api replica hashes visitors with (package tracking): derived
// from the ring's last key, the oldest, so that adding a signing key in front changes no
// visitor; only retiring the last key does, which counts a visitor who clicks on both sides
// of the change twice in that hour. Nil for the zero Keys.
func (ks Keys) VisitorKey() []byte { return ks.visitor }

// tag is the byte of a key id that travels in the click id.
func tag(kid string) byte {
	sum := sha256.Sum256([]byte("partnerstream/clickid/kid\x00" + kid))
	return sum[0]
}

// IDs returns the key ids, the signing key first.
func (ks Keys) IDs() []string {
	out := make([]string, len(ks.keys))
	for i, k := range ks.keys {
		out[i] = k.id
	}
	return out
}

// CanMint reports whether there is a key to sign with.
func (ks Keys) CanMint() bool { return len(ks.keys) > 0 }

// String, LogValue and Format keep the secrets out of logs and error messages, whatever the verb.
func (ks Keys) String() string             { return "click-id keys " + strings.Join(ks.IDs(), ",") }
func (ks Keys) LogValue() slog.Value       { return slog.StringValue(ks.String()) }
func (ks Keys) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(ks.String())) }

// RandomLen is the length of an id's random part.
const RandomLen = 4

// Mint returns a signed id for a click of linkID at at. It fails without a key, for a link
// id that is not one, and for a time outside the id's clock (before 2025 or after 2059).
func (ks Keys) Mint(linkID string, at time.Time) (string, error) {
	var random [RandomLen]byte
	_, _ = rand.Read(random[:]) // crypto/rand.Read never fails on supported platforms
	return ks.MintWith(linkID, at, random)
}

// MintWith is Mint with the random part given: the redirect draws it together with the
// visitor id, one read of the random source per click. random must be fresh from
// crypto/rand, or two clicks of a link in one millisecond get the same id. The id is the only
// allocation.
func (ks Keys) MintWith(linkID string, at time.Time, random [RandomLen]byte) (string, error) {
	if len(ks.keys) == 0 {
		return "", fmt.Errorf("mint click id: no click-id key")
	}
	link, ok := ids.Bytes(ids.Link, linkID)
	if !ok {
		return "", fmt.Errorf("mint click id: %q is not a link id", linkID)
	}
	ms := at.Sub(epoch).Milliseconds()
	if ms < 0 || ms > maxMillis {
		return "", fmt.Errorf("mint click id: time %s is outside the id's clock", at.UTC().Format(time.RFC3339))
	}
	k := ks.keys[0]
	var raw [rawLen]byte
	raw[0], raw[1] = version, k.tag
	copy(raw[2:18], link[:])
	var t [8]byte
	binary.BigEndian.PutUint64(t[:], uint64(ms))
	copy(raw[18:23], t[3:])
	copy(raw[23:bodyLen], random[:])
	k.mac(raw[:bodyLen], (*[macLen]byte)(raw[bodyLen:]))
	var out [Len]byte
	copy(out[:], prefix)
	enc.Encode(out[len(prefix):], raw[:])
	return string(out[:]), nil
}

// Signed reports whether s has the shape of a signed id (not whether it verifies): the
// caller tells signed ids from the plain ones of before (ids.Valid) with it.
func Signed(s string) bool {
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok || len(s) != Len {
		return false
	}
	for i := 0; i < len(rest); i++ {
		if ids.Digit(rest[i]) < 0 {
			return false
		}
	}
	return true
}

// Verify returns what a signed id says when one of the keys signed it. Anything else, a
// plain id, garbage, an id altered in any character, is false.
func (ks Keys) Verify(s string) (Click, bool) {
	if !Signed(s) {
		return Click{}, false
	}
	var raw [rawLen]byte
	n, err := enc.Decode(raw[:], []byte(s[len(prefix):]))
	// The last character has 4 unused bits; only the encoding with them zero is the id, so
	// changing them is an alteration like any other.
	if err != nil || n != rawLen || enc.EncodeToString(raw[:]) != s[len(prefix):] || raw[0] != version {
		return Click{}, false
	}
	for _, k := range ks.keys {
		if k.tag != raw[1] {
			continue
		}
		var mac [macLen]byte
		k.mac(raw[:bodyLen], &mac)
		if hmac.Equal(mac[:], raw[bodyLen:]) {
			var link [16]byte
			copy(link[:], raw[2:18])
			var t [8]byte
			copy(t[3:], raw[18:23])
			ms := binary.BigEndian.Uint64(t[:])
			return Click{LinkID: ids.FromBytes(ids.Link, link), At: epoch.Add(time.Duration(ms) * time.Millisecond)}, true
		}
	}
	return Click{}, false
}

// mac writes the MAC of body into out.
func (k key) mac(body []byte, out *[macLen]byte) {
	st := k.macs.Get().(*macState)
	copy(st.in[len(label):], body)
	st.h.Reset()
	st.h.Write(st.in[:])
	copy(out[:], st.h.Sum(st.sum[:0]))
	k.macs.Put(st)
}

// macState is a keyed HMAC with room for its input and sum: buffers on the stack would
// escape through the hash.Hash interface, allocations on every click.
type macState struct {
	h   hash.Hash
	in  [len(label) + bodyLen]byte // label, then the body
	sum [sha256.Size]byte
}

func newMACState(secret []byte) *macState {
	st := &macState{h: hmac.New(sha256.New, secret)}
	copy(st.in[:], label)
	return st
}

// GenerateKeySpec returns a spec with one fresh random key, for development and tests.
func GenerateKeySpec() string { return keyring.GenerateSpec() }
