package clickid

import (
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/ids"
)

// FuzzVerify: Verify never panics, accepts only what Mint made, and refuses an id with any
// byte changed.
func FuzzVerify(f *testing.F) {
	ks := mustKeys(f, GenerateKeySpec())
	good, err := ks.Mint(ids.New(ids.Link), time.Now())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good, 10, byte(1))
	f.Add(good, Len-1, byte(1))
	f.Add(ids.New(ids.Click), 0, byte(0))
	f.Add("clk_", 3, byte(7))
	f.Fuzz(func(t *testing.T, s string, pos int, delta byte) {
		if c, ok := ks.Verify(s); ok && s != good {
			t.Fatalf("accepted %q (%+v), which was never minted", s, c)
		}
		if delta == 0 {
			return
		}
		if pos < 0 {
			pos = -pos
		}
		pos %= len(good)
		b := []byte(good)
		b[pos] += delta
		if c, ok := ks.Verify(string(b)); ok {
			t.Fatalf("accepted %q, the id with byte %d changed (%+v)", b, pos, c)
		}
	})
}
