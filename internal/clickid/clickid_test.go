package clickid

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/ids"
)

func mustKeys(t testing.TB, spec string) Keys {
	t.Helper()
	ks, err := ParseKeys(spec)
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

func TestMintVerifyRoundTrip(t *testing.T) {
	ks := mustKeys(t, GenerateKeySpec())
	link := ids.New(ids.Link)
	at := time.Date(2026, 11, 25, 0, 13, 7, 123_456_789, time.UTC)
	a, err := ks.Mint(link, at)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := ks.Mint(link, at)
	if a == b {
		t.Fatalf("two clicks of one link in one millisecond got the same id %s", a)
	}
	if len(a) != Len || Len > 64 || !strings.HasPrefix(a, "clk_") || !Signed(a) || ids.Valid(ids.Click, a) {
		t.Fatalf("id %q (%d characters): want clk_ and %d characters of the ids' alphabet, not a plain id", a, len(a), Len)
	}
	c, ok := ks.Verify(a)
	if !ok || c.LinkID != link || !c.At.Equal(at.Truncate(time.Millisecond)) {
		t.Fatalf("Verify = %+v, %v; want %s at %s", c, ok, link, at.Truncate(time.Millisecond))
	}
}

func TestVerifyRefuses(t *testing.T) {
	spec := GenerateKeySpec()
	ks := mustKeys(t, spec)
	good, err := ks.Mint(ids.New(ids.Link), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	other := mustKeys(t, GenerateKeySpec())
	foreign, _ := other.Mint(ids.New(ids.Link), time.Now())
	last := good[:len(good)-1] + string(ids.Alphabet[strings.IndexByte(ids.Alphabet, good[len(good)-1])^1])
	for _, c := range []struct{ name, id string }{
		{"empty", ""},
		{"a plain id", ids.New(ids.Click)},
		{"another key's id", foreign},
		{"one character changed", good[:10] + flip(good[10]) + good[11:]},
		{"the unused bits of the last character set", last},
		{"cut short", good[:len(good)-1]},
		{"one too long", good + "0"},
		{"upper case", strings.ToUpper(good)},
		{"another prefix", "cnv_" + good[4:]},
		{"a character outside the alphabet", good[:20] + "u" + good[21:]},
	} {
		if _, ok := ks.Verify(c.id); ok {
			t.Errorf("%s: %q accepted", c.name, c.id)
		}
	}
	if _, ok := (Keys{}).Verify(good); ok {
		t.Error("the zero Keys accepted an id")
	}
}

func flip(b byte) string {
	return string(ids.Alphabet[(strings.IndexByte(ids.Alphabet, b)+1)%32])
}

func TestRotation(t *testing.T) {
	old, fresh := "old:"+base64.StdEncoding.EncodeToString(make([]byte, 32)), GenerateKeySpec()
	before := mustKeys(t, old)
	id, _ := before.Mint(ids.New(ids.Link), time.Now())
	after := mustKeys(t, fresh+","+old)
	if _, ok := after.Verify(id); !ok {
		t.Fatal("an id of the old key is refused after rotation")
	}
	next, _ := after.Mint(ids.New(ids.Link), time.Now())
	if _, ok := mustKeys(t, fresh).Verify(next); !ok {
		t.Fatal("the new first key does not sign")
	}
	if _, ok := before.Verify(next); ok {
		t.Fatal("an id of the new key verifies under the old key alone")
	}
}

func TestMintRefuses(t *testing.T) {
	ks := mustKeys(t, GenerateKeySpec())
	for _, c := range []struct {
		name string
		link string
		at   time.Time
	}{
		{"not a link id", ids.New(ids.Program), time.Now()},
		{"before the epoch", ids.New(ids.Link), epoch.Add(-time.Millisecond)},
		{"after the clock's end", ids.New(ids.Link), epoch.Add((maxMillis + 1) * time.Millisecond)},
	} {
		if id, err := ks.Mint(c.link, c.at); err == nil {
			t.Errorf("%s: minted %s", c.name, id)
		}
	}
	if _, err := (Keys{}).Mint(ids.New(ids.Link), time.Now()); err == nil {
		t.Error("the zero Keys minted")
	}
}

func TestParseKeys(t *testing.T) {
	good := base64.StdEncoding.EncodeToString(make([]byte, 32))
	ks, err := ParseKeys("a:" + good + ",b:" + good)
	if err != nil || strings.Join(ks.IDs(), ",") != "a,b" {
		t.Fatalf("ParseKeys = %v, %v", ks.IDs(), err)
	}
	if s := fmt.Sprintf("%v %+v %s", ks, ks, ks); strings.Contains(s, good) {
		t.Fatalf("printing keys shows a secret: %s", s)
	}
	// Find two key ids whose tags collide.
	seen := map[byte]string{}
	var a, b string
	for i := 0; a == ""; i++ {
		id := fmt.Sprintf("k%d", i)
		if prev, ok := seen[tag(id)]; ok {
			a, b = prev, id
		}
		seen[tag(id)] = id
	}
	for _, spec := range []string{"", "k1", "k1:c2hvcnQ=", a + ":" + good + "," + b + ":" + good} {
		if _, err := ParseKeys(spec); err == nil {
			t.Errorf("ParseKeys(%q) accepted", spec)
		}
	}
}

// The redirect mints an id per click: the id itself is its only allocation.
func TestMintAllocatesOnlyTheID(t *testing.T) {
	ks := mustKeys(t, GenerateKeySpec())
	link, at := ids.New(ids.Link), time.Now()
	random := [RandomLen]byte{1, 2, 3, 4}
	a, err := ks.MintWith(link, at, random)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := ks.MintWith(link, at, random); b != a {
		t.Fatalf("same link, time and random part: %s and %s", a, b)
	}
	if b, _ := ks.MintWith(link, at, [RandomLen]byte{1, 2, 3, 5}); b == a {
		t.Fatal("another random part gave the same id")
	}
	if c, ok := ks.Verify(a); !ok || c.LinkID != link {
		t.Fatalf("Verify(%s) = %+v, %v", a, c, ok)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = ks.MintWith(link, at, random) }); n > 1 && !raceEnabled {
		t.Fatalf("MintWith allocates %.0f times, want 1 (the id)", n)
	}
}

func BenchmarkMint(b *testing.B) {
	ks := mustKeys(b, GenerateKeySpec())
	link, at := ids.New(ids.Link), time.Now()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ks.Mint(link, at); err != nil {
			b.Fatal(err)
		}
	}
}

// The visitor key comes from the ring's last key: a signing key added in front keeps it, and
// retiring the last key changes it.
func TestVisitorKeyFollowsTheOldestKey(t *testing.T) {
	old, fresh := "old:"+base64.StdEncoding.EncodeToString(make([]byte, 32)), "new:"+base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 32))
	before, rotated, retired := mustKeys(t, old), mustKeys(t, fresh+","+old), mustKeys(t, fresh)
	if len(before.VisitorKey()) != 32 {
		t.Fatalf("visitor key of %d bytes", len(before.VisitorKey()))
	}
	if !bytes.Equal(before.VisitorKey(), rotated.VisitorKey()) {
		t.Error("adding a signing key changed the visitor key")
	}
	if bytes.Equal(before.VisitorKey(), retired.VisitorKey()) {
		t.Error("retiring the last key kept the visitor key")
	}
	if (Keys{}).VisitorKey() != nil {
		t.Error("the zero Keys has a visitor key")
	}
}
