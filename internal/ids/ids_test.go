package ids

import (
	"sort"
	"testing"
	"time"
)

func TestNewIsValidAndSortsByCreationTime(t *testing.T) {
	var made []string
	for i := 0; i < 50; i++ {
		made = append(made, New(Click))
		if i%10 == 0 {
			time.Sleep(2 * time.Millisecond)
		}
	}
	for _, id := range made {
		if !Valid(Click, id) {
			t.Fatalf("New made an invalid id %q", id)
		}
	}
	if !sort.StringsAreSorted(made) {
		t.Fatalf("ids are not time-sortable: %v", made)
	}
}

func TestValid(t *testing.T) {
	good := New(Company)
	cases := []struct {
		name string
		in   string
		want bool
	}{
		{"a fresh id is valid", good, true},
		{"another prefix is refused", "usr_" + good[3:], false},
		{"a short id is refused", good[:len(good)-1], false},
		{"a character outside the alphabet is refused", good[:len(good)-1] + "u", false},
		{"a dot is refused", good[:len(good)-1] + ".", false},
		{"empty is refused", "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Valid(Company, c.in); got != c.want {
				t.Fatalf("Valid(%q) = %v, want %v", c.in, got, c.want)
			}
		})
	}
}
