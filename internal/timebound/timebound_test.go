package timebound

import (
	"testing"
	"time"
)

func TestContains(t *testing.T) {
	for _, tt := range []struct {
		at   string
		want bool
	}{
		{"0001-01-01T00:00:00Z", false},
		{"1900-01-01T00:00:00Z", false},
		{"1969-12-31T23:59:59Z", false},
		{"1999-12-31T23:59:59Z", false},
		{"2000-01-01T00:00:00Z", true},
		{"2026-11-27T10:00:00+09:00", true},
		{"2099-12-31T23:59:59Z", true},
		{"2100-01-01T00:00:00Z", false},
		{"9999-12-01T00:00:00Z", false},
	} {
		at, err := time.Parse(time.RFC3339, tt.at)
		if err != nil {
			t.Fatal(err)
		}
		if got := Contains(at); got != tt.want {
			t.Errorf("Contains(%s) = %v, want %v", tt.at, got, tt.want)
		}
	}
}
