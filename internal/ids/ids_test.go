package ids

import (
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
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

func TestTimeRecoversTheCreationTime(t *testing.T) {
	before := time.Now().Truncate(time.Millisecond)
	id := New(Click)
	after := time.Now()
	got, ok := Time(id)
	if !ok || got.Before(before) || got.After(after) || got.Location() != time.UTC {
		t.Fatalf("Time(%q) = %v, %v; want a UTC time in [%v, %v]", id, got, ok, before, after)
	}
}

func TestTimeOfAKnownUUID(t *testing.T) {
	at := time.Date(2026, 3, 14, 15, 9, 26, 535_000_000, time.UTC)
	u := uuid.Must(uuid.NewV7())
	ms := uint64(at.UnixMilli())
	for i := 0; i < 6; i++ {
		u[i] = byte(ms >> (8 * (5 - i)))
	}
	got, ok := Time(Conversion + "_" + encode(u))
	if !ok || !got.Equal(at) {
		t.Fatalf("Time = %v, %v; want %v", got, ok, at)
	}
}

func TestTimeRefusesWhatIsNotAnID(t *testing.T) {
	good := New(Click)
	v4 := Click + "_" + encode(uuid.New())
	for name, in := range map[string]string{
		"empty":                        "",
		"no prefix":                    good[4:],
		"a short body":                 good[:len(good)-1],
		"a character outside alphabet": good[:len(good)-1] + "u",
		"a random UUIDv4":              v4,
		"top bits set":                 Click + "_z" + good[5:],
	} {
		if got, ok := Time(in); ok {
			t.Errorf("%s: Time(%q) = %v, true; want false", name, in, got)
		}
	}
}

func TestBytesRoundTrips(t *testing.T) {
	for range 100 {
		id := New(Link)
		b, ok := Bytes(Link, id)
		if !ok || FromBytes(Link, b) != id {
			t.Fatalf("Bytes(%q) = %x, %v; back: %q", id, b, ok, FromBytes(Link, b))
		}
	}
	for _, bad := range []string{"", "lnk_", "prg_06f2d1x0k8m9q0000000000", "lnk_46f2d1x0k8m9q0000000000a", "lnk_06f2d1x0k8m9q000000000u0", "lnk_06f2d1x0k8m9q00000000000"} {
		if _, ok := Bytes(Link, bad); ok {
			t.Errorf("Bytes(%q) accepted", bad)
		}
	}
}

func TestDigitIsTheAlphabetsIndex(t *testing.T) {
	for b := range 256 {
		if got, want := Digit(byte(b)), strings.IndexByte(Alphabet, byte(b)); got != want {
			t.Fatalf("Digit(%q) = %d, want %d", byte(b), got, want)
		}
	}
}

func TestFloorSortsBetweenIDsMadeBeforeAndAfterIt(t *testing.T) {
	before := New(Delivery)
	time.Sleep(2 * time.Millisecond)
	cut := time.Now()
	floor := Floor(Delivery, cut)
	time.Sleep(time.Millisecond)
	after := New(Delivery)
	if !(before < floor && floor < after) {
		t.Fatalf("want %s < %s < %s", before, floor, after)
	}
	if !Valid(Delivery, floor) {
		t.Fatalf("Floor made an invalid id %q", floor)
	}
	if at, ok := Time(floor); !ok || !at.Equal(cut.Truncate(time.Millisecond)) {
		t.Fatalf("Time(Floor(t)) = %s, %v; want %s", at, ok, cut.Truncate(time.Millisecond))
	}
}
