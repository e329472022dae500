package money

import (
	"errors"
	"testing"
)

func TestParseRateIsCanonicalAndRefusesWhatIsNotARate(t *testing.T) {
	for in, want := range map[string]string{
		"1.0845": "1.0845", "0161.20": "161.2", "1": "1", "0.000000000001": "0.000000000001",
		"999999999999.5": "999999999999.5", "2.500000000000000": "2.5",
	} {
		if got, err := ParseRate(in); err != nil || got != want {
			t.Errorf("ParseRate(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0", "0.000", "-1", "1e3", "1,5", ".5", "5.", "1.0000000000001", "1000000000000", " 1", "NaN"} {
		if got, err := ParseRate(in); !errors.Is(err, ErrAmount) {
			t.Errorf("ParseRate(%q) = %q, %v; want ErrAmount", in, got, err)
		}
	}
}

// Each currency rounds to its own minor unit, half up: JPY has none, EUR two, KWD three.
func TestConvertRoundsHalfUpToTheTargetMinorUnit(t *testing.T) {
	cases := []struct {
		name, amount, from, to, rate, want string
	}{
		{"USD to EUR", "100.00", "USD", "EUR", "0.92", "92.00"},
		{"EUR half a cent rounds up", "10.01", "USD", "EUR", "0.5", "5.01"},          // 5.005
		{"EUR just below half rounds down", "10.01", "USD", "EUR", "0.4995", "5.00"}, // 4.999995
		{"USD to JPY half a yen rounds up", "0.05", "USD", "JPY", "150", "8"},        // 7.5
		{"USD to JPY below half rounds down", "10.00", "USD", "JPY", "149.94", "1499"},
		{"JPY to EUR", "1234", "JPY", "EUR", "0.0061", "7.53"},                        // 7.5274
		{"EUR to KWD half a fils rounds up", "1.01", "EUR", "KWD", "0.3335", "0.337"}, // 0.336835 -> 0.337
		{"EUR to KWD exactly half", "0.10", "EUR", "KWD", "0.32705", "0.033"},         // 0.032705 -> 0.033
		{"KWD to EUR", "10.005", "KWD", "EUR", "2.98", "29.81"},                       // 29.8149
		{"zero", "0", "USD", "EUR", "0.92", "0.00"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			minor, err := Parse(c.amount, c.from)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Convert(minor, c.from, c.to, c.rate)
			if err != nil || Format(got, c.to) != c.want {
				t.Fatalf("Convert(%s %s at %s) = %s, %v; want %s %s", c.amount, c.from, c.rate, Format(got, c.to), err, c.want, c.to)
			}
		})
	}
	if _, err := Convert(9_000_000_000_000_000_000, "USD", "JPY", "150"); !errors.Is(err, ErrAmount) {
		t.Fatalf("an overflowing conversion: %v, want ErrAmount", err)
	}
}
