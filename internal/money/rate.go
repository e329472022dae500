package money

import (
	"fmt"
	"math/big"
	"strings"
)

// Limits of an exchange rate: what Postgres NUMERIC(24, 12) holds.
const (
	RateIntDigits  = 12
	RateFracDigits = 12
)

// ParseRate reads an exchange rate, a positive decimal string ("1.0845", "161.2") of at most
// RateIntDigits digits before the point and RateFracDigits after it, and returns it in its
// canonical form: no leading zeros before the point, no trailing zeros after it ("0161.20"
// -> "161.2"). The canonical form is what is stored and shown, so a rate reads back as set.
func ParseRate(s string) (string, error) {
	whole, frac, hasDot := strings.Cut(s, ".")
	if whole == "" || (hasDot && frac == "") || !digits(whole) || !digits(frac) {
		return "", fmt.Errorf("%q is not a decimal rate: %w", s, ErrAmount)
	}
	whole = strings.TrimLeft(whole, "0")
	frac = strings.TrimRight(frac, "0")
	switch {
	case len(whole) > RateIntDigits:
		return "", fmt.Errorf("%q has more than %d digits before the point: %w", s, RateIntDigits, ErrAmount)
	case len(frac) > RateFracDigits:
		return "", fmt.Errorf("%q has more than %d decimals: %w", s, RateFracDigits, ErrAmount)
	case whole == "" && frac == "":
		return "", fmt.Errorf("%q: a rate must be more than 0: %w", s, ErrAmount)
	}
	if whole == "" {
		whole = "0"
	}
	if frac == "" {
		return whole, nil
	}
	return whole + "." + frac, nil
}

// Convert converts minor units of currency from into minor units of currency to at rate (a
// ParseRate string: one unit of from is worth rate units of to), rounded half up to the
// minor unit of to. The product is exact (big rationals); only that one rounding happens.
// A result beyond 64 bits is an error.
func Convert(minor int64, from, to, rate string) (int64, error) {
	r, ok := new(big.Rat).SetString(rate)
	if !ok || r.Sign() <= 0 {
		return 0, fmt.Errorf("rate %q: %w", rate, ErrAmount)
	}
	// minor / 10^exp(from) * rate * 10^exp(to)
	v := new(big.Rat).Mul(new(big.Rat).SetInt64(minor), r)
	v.Mul(v, new(big.Rat).SetFrac(pow10(Exponent(to)), pow10(Exponent(from))))
	out := divHalfUp(v.Num(), v.Denom())
	if !out.IsInt64() {
		return 0, fmt.Errorf("%s %s at %s is too large: %w", Format(minor, from), from, rate, ErrAmount)
	}
	return out.Int64(), nil
}

// divHalfUp is n / d for d > 0: the quotient truncated toward zero, plus one when twice the
// remainder reaches d. For n >= 0 that is rounding half up, the one rounding amounts here use
// (a conversion's product, an average per click).
func divHalfUp(n, d *big.Int) *big.Int {
	q, r := new(big.Int).QuoRem(n, d, new(big.Int))
	if r.Lsh(r, 1).Cmp(d) >= 0 {
		q.Add(q, big.NewInt(1))
	}
	return q
}

func pow10(n int) *big.Int {
	return new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n)), nil)
}
