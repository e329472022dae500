package money

import "testing"

// Parse reads amounts from JSON bodies and query strings: whatever it accepts must be a
// non-negative amount that Format writes back to the same value, never a rounding.
func FuzzParse(f *testing.F) {
	for _, seed := range []struct{ s, cur string }{
		{"42.50", "EUR"}, {"42.5", "EUR"}, {"1000", "JPY"}, {"1.125", "KWD"}, {"0", "USD"},
		{"5.001", "EUR"}, {"-1", "EUR"}, {"1e3", "EUR"}, {"999999999999999.99", "EUR"}, {" 1", "EUR"},
		{"1.", "EUR"}, {".5", "EUR"}, {"１", "EUR"}, {"12", "eur"}, {"9223372036854775807", "JPY"},
	} {
		f.Add(seed.s, seed.cur)
	}
	f.Fuzz(func(t *testing.T, s, currency string) {
		v, err := Parse(s, currency)
		if err != nil {
			return
		}
		if v < 0 {
			t.Fatalf("Parse(%q, %q) = %d, a negative amount", s, currency, v)
		}
		back, err := Parse(Format(v, currency), currency)
		if err != nil || back != v {
			t.Fatalf("Parse(%q, %q) = %d, but its Format %q reads back as %d, %v", s, currency, v, Format(v, currency), back, err)
		}
	})
}
