package money

import (
	"math"
	"testing"
)

func TestSumsAreExactBeyondInt64(t *testing.T) {
	var s Sum
	for range 96 {
		s = s.Add(SumOf(99999999999999999)) // 999,999,999,999,999.99
	}
	if got := FormatSum(s, "EUR"); got != "95999999999999999.04" {
		t.Fatalf("96 x 999999999999999.99 = %s", got)
	}
	if got := FormatSum(s.DivRound(96), "EUR"); got != "999999999999999.99" {
		t.Fatalf("per click %s", got)
	}
	max := SumOf(math.MaxInt64).Add(SumOf(math.MaxInt64))
	if max.String() != "18446744073709551614" || max.Cmp(SumOf(math.MaxInt64)) != 1 || SumOf(-1).Cmp(SumOf(0)) != -1 {
		t.Fatalf("2 x MaxInt64 = %s", max)
	}
	for _, v := range []string{"0", "1", "-1", "18446744073709551616", "-18446744073709551617", "170141183460469231731687303715884105727"} {
		got, err := ParseSum(v)
		if err != nil || got.String() != v {
			t.Errorf("ParseSum(%s) = %s, %v", v, got, err)
		}
	}
	for _, v := range []string{"", "1.5", "x", "170141183460469231731687303715884105728"} {
		if _, err := ParseSum(v); err == nil {
			t.Errorf("ParseSum(%q) accepted", v)
		}
	}
	if got, want := SumOf(-1250).Add(SumOf(1000)), SumOf(-250); got != want || FormatSum(got, "JPY") != "-250" || FormatSum(got, "EUR") != "-2.50" {
		t.Errorf("-1250 + 1000 = %s (%s)", got, FormatSum(got, "EUR"))
	}
	for _, c := range []struct {
		sum, n int64
		want   string
	}{{1250, 4, "313"}, {1000, 3, "333"}, {5, 2, "3"}, {0, 7, "0"}} {
		if got := SumOf(c.sum).DivRound(c.n).String(); got != c.want {
			t.Errorf("%d / %d = %s, want %s", c.sum, c.n, got, c.want)
		}
	}
}
