package ingest

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/kafka"
	"github.com/partnerstream/partnerstream/internal/testenv"
)

// uniqueStream is clicks of visitors on links over two hours, keyed by visitor as the
// redirect keys them, with what each click's duplicate flag must be: true for all but a
// visitor's first click on a link in an hour, in the order produced.
type uniqueStream struct {
	clicks []events.Click
	dup    map[string]bool // by click id
	unique map[string]int  // by link and hour: distinct visitors
}

func newUniqueStream(seed uint64, n int) *uniqueStream {
	r := rand.New(rand.NewPCG(seed, 3))
	s := &uniqueStream{dup: map[string]bool{}, unique: map[string]int{}}
	seen := map[string]bool{}
	start := time.Date(2026, 11, 2, 9, 40, 0, 0, time.UTC)
	for i := range n {
		// Time moves forward through 09:40-10:20, so both hours and their turn are crossed.
		at := start.Add(time.Duration(i) * 40 * time.Minute / time.Duration(n))
		c := events.Click{ClickID: fmt.Sprintf("clk_u%05d", i), OccurredAt: at,
			Visitor:   fmt.Sprintf("visitor%014d", r.IntN(60)),
			LinkID:    fmt.Sprintf("lnk_%d", r.IntN(3)),
			ProgramID: "prg_a1", AffiliateID: "co_aff_x", AdvertiserID: "co_adv_a",
			IP: "192.0.2.1", UserAgent: "Mozilla/5.0"}
		key := c.LinkID + "|" + c.Visitor + "|" + at.Truncate(time.Hour).Format(time.RFC3339)
		s.dup[c.ClickID] = seen[key]
		if !seen[key] {
			seen[key] = true
			s.unique[c.LinkID+"|"+at.Truncate(time.Hour).Format(time.RFC3339)]++
		}
		s.clicks = append(s.clicks, c)
	}
	return s
}

func uniqueRecords(clicks []events.Click) []kafka.Record {
	out := make([]kafka.Record, len(clicks))
	for i, c := range clicks {
		b, _ := json.Marshal(c)
		out[i] = kafka.Record{Key: []byte(c.Visitor), Value: b}
	}
	return out
}

// Unique clicks do not depend on which ingest replica decides them, on how many there are, or
// on restarts: one replica takes the first half of the stream; then two others take the rest,
// with copies of clicks of the first half (a retried produce, a spool replay) among it, and
// must read the first replica's decisions back. Every click's flag and every link's unique
// clicks per hour come out as one process deciding the stream in order would.
func TestUniqueClicksAreDecidedTheSameAcrossReplicasAndRestarts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := newUniqueStream(1, 3000)
	half := len(s.clicks) / 2
	o := Options{BatchSize: 100, BatchInterval: 20 * time.Millisecond}
	group := DefaultGroupPrefix + "-clicks"

	e.produce(t, kafka.TopicClicks, uniqueRecords(s.clicks[:half]))
	stop := testenv.Run(t, e.service(t, o))
	e.waitCaughtUp(t, group, kafka.TopicClicks, time.Minute)
	stop()

	rest := append([]events.Click(nil), s.clicks[half:]...)
	for i := 0; i < half; i += 7 {
		rest = append(rest, s.clicks[i]) // copies, produced after their visitors' later clicks
	}
	e.produce(t, kafka.TopicClicks, uniqueRecords(rest))
	second := testenv.Run(t, e.service(t, o))
	third := testenv.Run(t, e.service(t, o))
	e.waitCaughtUp(t, group, kafka.TopicClicks, time.Minute)
	second()
	third()

	rows, err := e.conn.Query(context.Background(), "SELECT click_id, is_duplicate FROM "+e.db+".clicks FINAL")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	stored := 0
	for rows.Next() {
		var id string
		var dup uint8
		if err := rows.Scan(&id, &dup); err != nil {
			t.Fatal(err)
		}
		stored++
		if want, ok := s.dup[id]; !ok || want != (dup == 1) {
			t.Errorf("click %s stored with is_duplicate=%d, want %v", id, dup, want)
		}
	}
	if stored != len(s.clicks) {
		t.Errorf("%d clicks stored, want %d", stored, len(s.clicks))
	}
	got := map[string]int{}
	rows2, err := e.conn.Query(context.Background(), "SELECT link_id, toStartOfHour(occurred_at), toUInt64(countIf(is_duplicate = 0)) FROM "+
		e.db+".clicks FINAL GROUP BY link_id, toStartOfHour(occurred_at)")
	if err != nil {
		t.Fatal(err)
	}
	defer rows2.Close()
	for rows2.Next() {
		var link string
		var hour time.Time
		var n uint64
		if err := rows2.Scan(&link, &hour, &n); err != nil {
			t.Fatal(err)
		}
		got[link+"|"+hour.UTC().Format(time.RFC3339)] = int(n)
	}
	if fmt.Sprint(got) != fmt.Sprint(s.unique) {
		t.Errorf("unique clicks by link and hour\n got %v\nwant %v", got, s.unique)
	}
}

// A click of a redirect from before visitors has none: it keeps the flag its redirect set.
func TestAClickWithoutAVisitorKeepsItsFlag(t *testing.T) {
	u := newUniques(0, func(context.Context, int32, time.Time, func(string, string, string)) error {
		t.Fatal("a click without a visitor read the hour's decisions")
		return nil
	}, quiet)
	for _, flag := range []bool{true, false} {
		r := newClickRecord(Click{Click: events.Click{ClickID: "clk_old", LinkID: "lnk_1", OccurredAt: time.Now(), IsDuplicate: flag}})
		if err := u.decide(context.Background(), &r); err != nil || r.bools[events.FieldIsDuplicate] != flag {
			t.Fatalf("flag %v became %v (err %v)", flag, r.bools[events.FieldIsDuplicate], err)
		}
	}
}

// An hour is read back once while it is in hand, the least recently used one is forgotten
// for a new one, and a failed read is retried without deciding anything meanwhile.
func TestUniquesReadEachHourOnceAndRetryAFailedRead(t *testing.T) {
	loads := map[int64]int{}
	failures := 1
	u := newUniques(3, func(_ context.Context, partition int32, start time.Time, add func(string, string, string)) error {
		if partition != 3 {
			t.Fatalf("read partition %d, want 3", partition)
		}
		if failures > 0 {
			failures--
			add("lnk_1", "v1", "clk_half_read") // a read that fails half way leaves nothing behind
			return fmt.Errorf("connection refused")
		}
		loads[start.Unix()/3600]++
		if start.Hour() == 10 {
			add("lnk_1", "v1", "clk_earlier") // a click an earlier owner stored as unique
		}
		return nil
	}, quiet)
	day := time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)
	decide := func(id string, hour int) bool {
		t.Helper()
		r := newClickRecord(Click{Click: events.Click{ClickID: id, Visitor: "v1", LinkID: "lnk_1", OccurredAt: day.Add(time.Duration(hour)*time.Hour + time.Minute)}})
		if err := u.decide(context.Background(), &r); err != nil {
			t.Fatal(err)
		}
		return r.bools[events.FieldIsDuplicate]
	}
	if decide("clk_a", 9) {
		t.Fatal("the first click of hour 9 is a duplicate: the failed read left a decision behind")
	}
	if !decide("clk_b", 10) {
		t.Fatal("a click of hour 10 is unique although an earlier owner stored the visitor's first")
	}
	if decide("clk_earlier", 10) {
		t.Fatal("a copy of the unique click an earlier owner stored is a duplicate")
	}
	for hour := 11; hour <= 13; hour++ {
		decide(fmt.Sprintf("clk_h%d", hour), hour)
	}
	if !decide("clk_c", 13) {
		t.Fatal("a repeat in hour 13 is unique")
	}
	hour := day.Unix() / 3600
	if loads[hour+9] != 1 || loads[hour+10] != 1 || loads[hour+13] != 1 {
		t.Errorf("hours 9, 10 and 13 read %d, %d and %d times, want once each", loads[hour+9], loads[hour+10], loads[hour+13])
	}
	// Five hours came up: hour 9, the least recently used, was forgotten for hour 13.
	decide("clk_again", 9)
	if loads[hour+9] != 2 {
		t.Errorf("hour 9 read %d times, want twice", loads[hour+9])
	}
}
