package magiccode

import "testing"

func TestNewCodeIsSixDigitsZeroPadded(t *testing.T) {
	t.Parallel()
	seen := map[byte]int{}
	for range 2000 {
		code, err := newCode()
		if err != nil {
			t.Fatal(err)
		}
		if !wellFormed(code) {
			t.Fatalf("newCode() = %q, want 6 digits", code)
		}
		seen[code[0]]++
	}
	// Each leading digit has a 1 in 10 chance: missing one, '0' included (no padding, or a
	// biased draw), in 2000 codes happens about once in 10^90 runs.
	for d := byte('0'); d <= '9'; d++ {
		if seen[d] == 0 {
			t.Errorf("no code starts with %c: %v", d, seen)
		}
	}
}
