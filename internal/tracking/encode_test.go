package tracking

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/events"
)

func TestEncodeClickMatchesEncodingJSON(t *testing.T) {
	full := events.Click{ClickID: "clk_1", OccurredAt: time.Date(2026, 5, 1, 12, 0, 3, 120_000_000, time.UTC), LinkID: "lnk_1",
		ProgramID: "prg_1", AffiliateID: "co_a", AdvertiserID: "co_b", PromotionID: "prm_1", Sub1: "a", Sub2: "b", Sub3: "c", Sub4: "d", Sub5: "e",
		IP: "2001:db8::1", UserAgent: "Mozilla/5.0 <script>&\"\\\t\n\r\x01\x7f é 😀 \u2028\u2029", Referrer: "https://r.test/?a=1&b=2",
		Country: "ES", IsBot: true, IsDuplicate: true, LandingURL: "https://shop.test/?x=1&y=<2>"}
	cases := map[string]events.Click{
		"every field set":       full,
		"optional fields empty": {ClickID: "clk_2", OccurredAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), IP: "127.0.0.1"},
		"invalid UTF-8":         {ClickID: "clk_3", UserAgent: "a\xffb\xc3", Sub1: "\xe2\x28\xa1"},
		"a zone offset":         {ClickID: "clk_4", OccurredAt: time.Date(2026, 1, 1, 0, 0, 0, 1, time.FixedZone("x", 3600))},
		"every field marked":    events.MarkedClick(),
	}
	// Each field of the wire format alone: a field the encoder leaves out, writes twice or
	// takes from another differs from encoding/json's, which follows events.Click.
	for f, spec := range events.ClickFields {
		cases["only "+spec.JSON] = events.MarkedClick(events.ClickField(f))
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			want, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			if got := encodeClick(nil, &c); string(got) != string(want) {
				t.Fatalf("encodeClick:\n%s\nencoding/json:\n%s", got, want)
			}
		})
	}
}

func FuzzEncodeClick(f *testing.F) {
	f.Add("Mozilla/5.0", "https://r.test/", "sub", "1.2.3.4")
	f.Add("<>&\"\\\x00\u2028", "\xff", "é😀", "")
	f.Fuzz(func(t *testing.T, ua, ref, sub, ip string) {
		c := events.Click{ClickID: "clk", OccurredAt: time.Unix(1700000000, 5).UTC(), UserAgent: ua, Referrer: ref, Sub3: sub, IP: ip, LandingURL: ref + sub}
		want, _ := json.Marshal(c)
		if got := encodeClick(nil, &c); string(got) != string(want) {
			t.Fatalf("encodeClick:\n%q\nencoding/json:\n%q", got, want)
		}
	})
}

func BenchmarkEncodeClick(b *testing.B) {
	c := events.Click{ClickID: "clk_06f2d1x0k8m9q0000000000000", OccurredAt: time.Now().UTC(), LinkID: "lnk_06f2d1x0k8m9q0000000000000",
		ProgramID: "prg_06f2d1x0k8m9q0000000000000", AffiliateID: "co_06f2d1x0k8m9q0000000000000", AdvertiserID: "co_06f2d1x0k8m9q0000000000001",
		Sub1: "newsletter", IP: "203.0.113.9", UserAgent: "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36",
		Referrer: "https://blog.example.com/post", LandingURL: "https://shop.example.com/landing?utm_source=affiliate"}
	b.Run("encodeClick", func(b *testing.B) {
		for b.Loop() {
			encodeClick(make([]byte, 0, 768), &c)
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		for b.Loop() {
			_, _ = json.Marshal(c)
		}
	})
}

// A click's message key is its visitor, taken from the encoded payload without a copy; a
// click without a visitor (spooled by a redirect of before) is keyed by its id, and a payload
// that does not start with the id (an id that needed escaping) gets a copy of the id.
func TestItemKeyIsTheVisitorOrElseTheClickID(t *testing.T) {
	const signed, visitor = "clk_06f2d1x0k8m9q06f2d1x0k8m9q06f2d1x0k8m9q06f2d1x0k8m9q06f2d1x0", "AAAAAAAAAAAAAAAAAAAAAA"
	cases := []struct {
		name  string
		click events.Click
		want  string
	}{
		{"a click with a visitor", events.Click{ClickID: signed, Visitor: visitor}, visitor},
		{"a signed id without a visitor", events.Click{ClickID: signed}, signed},
		{"a plain id", events.Click{ClickID: "clk_06f2d1x0k8m9q0000000000000"}, "clk_06f2d1x0k8m9q0000000000000"},
		{"a visitor of another length", events.Click{ClickID: signed, Visitor: "short"}, signed},
		{"an id with a quote", events.Click{ClickID: `clk_"x`, Visitor: visitor}, `clk_"x`},
		{"an id with no field", events.Click{}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			it := item{id: c.click.ClickID, payload: encodeClick(nil, &c.click)}
			if got := string(it.key()); got != c.want {
				t.Fatalf("key %q, want %q", got, c.want)
			}
		})
	}
	c := events.Click{ClickID: signed, Visitor: visitor}
	it := item{id: signed, payload: encodeClick(nil, &c)}
	if k := it.key(); &k[0] != &it.payload[bytes.Index(it.payload, []byte(visitor))] {
		t.Fatal("the key of an encoded click is a copy, not a slice of its payload")
	}
}

// special8 agrees with plainASCII for every byte at every position of the word.
func TestSpecial8MatchesPlainASCII(t *testing.T) {
	for b := range 256 {
		for pos := range 8 {
			word := []byte("abcdefgh")
			word[pos] = byte(b)
			if got := special8(load8(string(word), 0)); got != !plainASCII[b] {
				t.Fatalf("special8 with byte %#x at %d = %v, want %v", b, pos, got, !plainASCII[b])
			}
		}
	}
}
