package money

import (
	"cmp"
	"fmt"
	"math/big"
	"math/bits"
)

// Sum is an exact total of minor units. Totals add up many amounts of up to 2^63-1 minor
// units each (the largest Parse accepts), which int64 cannot hold: 96 commissions of
// 999,999,999,999,999.99 already wrap it. 128 bits hold 2^64 such amounts. The zero value
// is 0, and Sums compare with ==.
type Sum struct {
	hi int64
	lo uint64
}

// SumOf is the Sum of one amount in minor units.
func SumOf(minor int64) Sum {
	return Sum{hi: minor >> 63, lo: uint64(minor)}
}

// ParseSum reads a Sum written as a decimal integer of minor units, such as ClickHouse's
// toString of a Decimal(38, 0).
func ParseSum(s string) (Sum, error) {
	b, ok := new(big.Int).SetString(s, 10)
	if !ok || b.BitLen() > 127 {
		return Sum{}, fmt.Errorf("%q is not a sum of minor units: %w", s, ErrAmount)
	}
	var abs Sum
	words := new(big.Int).Abs(b)
	abs.lo = new(big.Int).And(words, new(big.Int).SetUint64(^uint64(0))).Uint64()
	abs.hi = int64(new(big.Int).Rsh(words, 64).Uint64())
	if b.Sign() < 0 {
		return Sum{}.sub(abs), nil
	}
	return abs, nil
}

// Add returns s + o.
func (s Sum) Add(o Sum) Sum {
	lo, carry := bits.Add64(s.lo, o.lo, 0)
	return Sum{hi: s.hi + o.hi + int64(carry), lo: lo}
}

func (s Sum) sub(o Sum) Sum {
	lo, borrow := bits.Sub64(s.lo, o.lo, 0)
	return Sum{hi: s.hi - o.hi - int64(borrow), lo: lo}
}

// Cmp is -1, 0 or +1 as s is less than, equal to or greater than o.
func (s Sum) Cmp(o Sum) int {
	if c := cmp.Compare(s.hi, o.hi); c != 0 {
		return c
	}
	return cmp.Compare(s.lo, o.lo)
}

// DivRound is s / n rounded half up, for n > 0 (an average per click).
func (s Sum) DivRound(n int64) Sum {
	out, _ := ParseSum(divHalfUp(s.big(), big.NewInt(n)).String()) // a quotient by n >= 1 is no larger than s
	return out
}

func (s Sum) big() *big.Int {
	b := new(big.Int).Lsh(big.NewInt(s.hi), 64)
	return b.Add(b, new(big.Int).SetUint64(s.lo))
}

// String writes the minor units as a decimal integer.
func (s Sum) String() string { return s.big().String() }

// FormatSum writes a Sum as Format writes an amount: with the currency's decimals.
func FormatSum(s Sum, currency string) string {
	b := s.big()
	sign := ""
	if b.Sign() < 0 {
		sign = "-"
	}
	return decimal(sign, b.Abs(b).String(), Exponent(currency))
}
