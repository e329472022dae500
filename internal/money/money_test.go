package money

import (
	"errors"
	"testing"
)

func TestParseAndFormatAreExactInEveryKindOfCurrency(t *testing.T) {
	cases := []struct {
		name, in, cur string
		minor         int64
		out           string
	}{
		{"two decimals", "42.50", "EUR", 4250, "42.50"},
		{"one decimal is padded", "42.5", "USD", 4250, "42.50"},
		{"a whole amount", "1000", "GBP", 100000, "1000.00"},
		{"a zero-decimal currency", "1500", "JPY", 1500, "1500"},
		{"a three-decimal currency", "1.234", "KWD", 1234, "1.234"},
		{"zero", "0", "EUR", 0, "0.00"},
		{"a cent", "0.01", "EUR", 1, "0.01"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Parse(c.in, c.cur)
			if err != nil || got != c.minor {
				t.Fatalf("Parse(%q, %s) = %d, %v; want %d", c.in, c.cur, got, err, c.minor)
			}
			if f := Format(got, c.cur); f != c.out {
				t.Fatalf("Format(%d, %s) = %q, want %q", got, c.cur, f, c.out)
			}
		})
	}
}

func TestParseRefusesWhatIsNotAnExactAmount(t *testing.T) {
	for _, c := range []struct{ in, cur string }{
		{"1.001", "EUR"}, {"1.5", "JPY"}, {"-1", "EUR"}, {"1e3", "EUR"}, {"", "EUR"}, {".5", "EUR"},
		{"5.", "EUR"}, {"1,50", "EUR"}, {"12345678901234567", "EUR"}, {"10", "XXX"}, {"10", "eur"},
	} {
		if v, err := Parse(c.in, c.cur); err == nil {
			t.Errorf("Parse(%q, %s) = %d, want an error", c.in, c.cur, v)
		} else if !errors.Is(err, ErrAmount) && !errors.Is(err, ErrCurrency) {
			t.Errorf("Parse(%q, %s): unexpected error kind %v", c.in, c.cur, err)
		}
	}
}

func TestPercentRoundsHalfUpToTheMinorUnit(t *testing.T) {
	for _, c := range []struct{ minor, bps, want int64 }{
		{10000, 1000, 1000}, // 10 % of 100.00 = 10.00
		{999, 1250, 125},    // 12.5 % of 9.99 = 1.24875 -> 1.25
		{1, 5000, 1},        // 50 % of 0.01 = 0.005 -> 0.01
		{0, 1000, 0},
	} {
		if got := Percent(c.minor, c.bps); got != c.want {
			t.Errorf("Percent(%d, %d) = %d, want %d", c.minor, c.bps, got, c.want)
		}
	}
}

func TestFormatNegative(t *testing.T) {
	if got := Format(-5, "EUR"); got != "-0.05" {
		t.Fatalf("Format(-5) = %q", got)
	}
}
