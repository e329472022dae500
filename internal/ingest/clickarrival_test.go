package ingest

import (
	"context"
	"encoding/json"
	"maps"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/clickid"
	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/kafka"
	"github.com/partnerstream/partnerstream/internal/money"
	"github.com/partnerstream/partnerstream/internal/stats"
	"github.com/partnerstream/partnerstream/internal/testenv"
)

func newClickKeys(t *testing.T) clickid.Keys {
	t.Helper()
	keys, err := clickid.ParseKeys(clickid.GenerateKeySpec())
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// signClickIDs gives every click of d a signed id (as the redirect mints them), in the
// clicks and in the conversions that name them.
func signClickIDs(t *testing.T, d dataset) dataset {
	t.Helper()
	keys := newClickKeys(t)
	link := ids.New(ids.Link)
	signed := map[string]string{}
	for i, c := range d.clicks {
		id, ok := signed[c.ClickID]
		if !ok {
			var err error
			if id, err = keys.Mint(link, c.OccurredAt); err != nil {
				t.Fatal(err)
			}
			signed[c.ClickID] = id
		}
		d.clicks[i].ClickID = id
	}
	for i, e := range d.events {
		var data events.ConversionData
		if json.Unmarshal(e.Data, &data) != nil || data.ClickID == "" {
			continue
		}
		data.ClickID = signed[data.ClickID]
		var err error
		if d.events[i].Data, err = json.Marshal(data); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// arrivals are the events.ClickArrived of every conversion of d whose click d holds, as the
// click watcher publishes them.
func (d dataset) arrivals(t *testing.T) []kafka.Record {
	t.Helper()
	clicks := map[string]events.Click{}
	for _, c := range d.clicks {
		clicks[c.ClickID] = c
	}
	var out []kafka.Record
	for _, e := range d.events {
		var data events.ConversionData
		if !conversionTypes[e.Type] || json.Unmarshal(e.Data, &data) != nil {
			continue
		}
		c, ok := clicks[data.ClickID]
		if !ok {
			continue
		}
		rec, err := arrivalRecord(events.ClickArrivedData{ConversionID: data.ID, ClickID: c.ClickID, LinkID: c.LinkID,
			Sub1: c.Sub1, Since: time.Now().Truncate(time.Second)}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, rec)
	}
	return out
}

// distinctConversions is how many conversions (by id) the dataset's events hold.
func (d dataset) distinctConversions() int {
	seen := map[string]bool{}
	for _, e := range d.events {
		var data events.ConversionData
		if conversionTypes[e.Type] && json.Unmarshal(e.Data, &data) == nil {
			seen[data.ID] = true
		}
	}
	return len(seen)
}

func TestConversionsAreWrittenBeforeTheirClicksAndMovedToTheClicksSub1WhenTheyArrive(t *testing.T) {
	// Not parallel: it reads the package's metrics.
	e := newEnv(t)
	d := signClickIDs(t, newDataset(21, 400))
	if d.distinctConversions() == 0 {
		t.Fatal("the dataset has no conversion")
	}
	moved := metric(t, "partnerstream_ingest_conversions_moved_to_click_total", "", "")
	// Two replicas, as the chart runs them: both watch for the clicks and publish arrivals.
	o := Options{BatchInterval: 100 * time.Millisecond}
	testenv.Run(t, e.service(t, o))
	testenv.Run(t, e.service(t, o))

	// A signed id converts milliseconds after its redirect: the conversion's event can reach
	// ingest before the click does. No partition waits for a click: every event is stored,
	// the conversions under no sub1 and no link.
	e.produce(t, kafka.TopicEvents, d.eventMessages())
	e.waitCaughtUp(t, DefaultGroupPrefix+"-events", kafka.TopicEvents, 30*time.Second)
	lost := d
	lost.clicks = nil
	assertFiguresBy(t, e.conn, e.db, lost, stats.Day, stats.Sub1)
	waitFor(t, 10*time.Second, "the conversions awaiting their clicks", func() bool {
		return metric(t, "partnerstream_ingest_conversions_awaiting_click", "", "") == float64(d.distinctConversions())
	})

	e.produce(t, kafka.TopicClicks, d.clickMessages())
	waitFor(t, 30*time.Second, "the conversions under their clicks' link and sub1", func() bool {
		return figuresDiff(t, e.conn, e.db, d, ingestGroupings...) == ""
	})
	waitFor(t, 10*time.Second, "no conversion awaiting its click", func() bool {
		return metric(t, "partnerstream_ingest_conversions_awaiting_click", "", "") == 0
	})

	// Arrivals published again (a replica's retry, the other replica) change nothing.
	e.produce(t, kafka.TopicEvents, d.arrivals(t))
	e.waitCaughtUp(t, DefaultGroupPrefix+"-events", kafka.TopicEvents, 30*time.Second)
	assertFigures(t, e.conn, e.db, d)
	if got, want := metric(t, "partnerstream_ingest_conversions_moved_to_click_total", "", "")-moved, float64(d.distinctConversions()); got != want {
		t.Errorf("%v conversions moved to their clicks, want %v: each once", got, want)
	}
}

// signedClick is a click whose id the redirect signed; click(id) is its click, with sub1 email.
type signedClick struct{ link, id string }

func newSignedClick(t *testing.T) signedClick {
	t.Helper()
	link := ids.New(ids.Link)
	id, err := newClickKeys(t).Mint(link, day1)
	if err != nil {
		t.Fatal(err)
	}
	return signedClick{link, id}
}

// state is a state of conversion id on the click, with the link the signed id names.
func (k signedClick) state(id string, version uint64, status string) Conversion {
	c := conversion(version, status)
	c.ID, c.ClickID, c.LinkID = id, k.id, k.link
	return c
}

// arrival is the click's arrival for conversion id, as the watcher publishes it.
func (k signedClick) arrival(id string, since time.Time) Conversion {
	return Conversion{EventID: "evt_arrived", ID: id, ClickID: k.id, LinkID: k.link, Sub1: "email",
		ClickArrived: true, AwaitingSince: since}
}

func TestAConversionMovesToItsClicksSub1OnceAndKeepsIt(t *testing.T) {
	t.Parallel()
	w, q := newWriterDB(t)
	ctx := context.Background()
	k := newSignedClick(t)
	watcher := &clickWatcher{w: w}
	since := map[string]time.Time{} // by conversion, as the watcher read it first
	arrival := func(id string) Conversion {
		if _, ok := since[id]; !ok {
			awaiting, err := watcher.awaiting(ctx, day1.AddDate(-1, 0, 0))
			if err != nil || awaiting[id].since.IsZero() {
				t.Fatalf("%s awaiting its click: %v, %v", id, awaiting, err)
			}
			since[id] = awaiting[id].since
		}
		return k.arrival(id, since[id])
	}
	type figures struct {
		conversions, approved int64
		sale, commission      money.Sum
	}
	bySub1 := func() map[string]figures {
		out := map[string]figures{}
		for _, r := range totals(t, q, stats.Sub1) {
			if r.Conversions.Total != 0 {
				out[r.Sub1] = figures{r.Conversions.Total, r.Conversions.Approved, r.SaleAmount, r.Commission}
			}
		}
		return out
	}
	one, two := figures{1, 0, money.SumOf(10000), money.SumOf(1000)}, figures{2, 0, money.SumOf(20000), money.SumOf(2000)}
	steps := []struct {
		name  string
		batch func() []Conversion
		want  WriteResult
		then  map[string]figures
	}{
		{"conversions whose click is not stored are written at once, under no sub1",
			func() []Conversion {
				return []Conversion{k.state("cnv_1", 1, events.CommissionPending), k.state("cnv_2", 1, events.CommissionPending)}
			},
			WriteResult{Written: 2, WithoutClick: 2}, map[string]figures{"": two}},
		{"the click's arrival moves a conversion to its sub1",
			func() []Conversion { return []Conversion{arrival("cnv_1")} },
			WriteResult{Written: 1, Moved: 1}, map[string]figures{"": one, "email": one}},
		{"the arrival again changes nothing",
			func() []Conversion { return []Conversion{arrival("cnv_1"), arrival("cnv_1")} },
			WriteResult{Duplicates: 2}, map[string]figures{"": one, "email": one}},
		{"a status change keeps the moved sub1",
			func() []Conversion { return []Conversion{k.state("cnv_1", 2, events.CommissionApproved)} },
			WriteResult{Written: 1}, map[string]figures{"": one, "email": {1, 1, money.SumOf(10000), money.SumOf(1000)}}},
		{"an arrival after it changes nothing",
			func() []Conversion { return []Conversion{arrival("cnv_1")} },
			WriteResult{Duplicates: 1}, map[string]figures{"": one, "email": {1, 1, money.SumOf(10000), money.SumOf(1000)}}},
		{"an arrival beside a status change moves the new state",
			func() []Conversion {
				return []Conversion{k.state("cnv_2", 2, events.CommissionApproved), arrival("cnv_2")}
			},
			WriteResult{Written: 1, Moved: 1}, map[string]figures{"email": {2, 2, money.SumOf(20000), money.SumOf(2000)}}},
	}
	for i, s := range steps {
		if i == 1 {
			if _, err := w.WriteClicks(ctx, []Click{click(k.id)}); err != nil {
				t.Fatal(err)
			}
		}
		got, err := w.WriteConversions(ctx, s.batch())
		if err != nil || got != s.want {
			t.Fatalf("%s: got %+v, %v; want %+v", s.name, got, err, s.want)
		}
		if have := bySub1(); !maps.Equal(have, s.then) {
			t.Fatalf("%s: figures by sub1 %+v, want %+v", s.name, have, s.then)
		}
	}
	awaiting, err := watcher.awaiting(ctx, day1.AddDate(-1, 0, 0))
	if err != nil || len(awaiting) != 0 {
		t.Errorf("awaiting their clicks: %v, %v; want none", awaiting, err)
	}
}

// Ingest plans a batch while the one before it is being inserted: an arrival again in the
// next batch must find the conversion moved by the batch before, although the move has the
// version of the state it moves.
func TestAnArrivalAgainFindsTheMoveThePlanBeforeItInserts(t *testing.T) {
	t.Parallel()
	w, q := newWriterDB(t)
	ctx := context.Background()
	k := newSignedClick(t)
	if _, err := w.WriteConversions(ctx, []Conversion{k.state("cnv_1", 1, events.CommissionPending)}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteClicks(ctx, []Click{click(k.id)}); err != nil {
		t.Fatal(err)
	}
	arrival := k.arrival("cnv_1", day1)
	moved, err := w.planConversions(ctx, []Conversion{arrival}, nil)
	if err != nil {
		t.Fatal(err)
	}
	again, err := w.planConversions(ctx, []Conversion{arrival}, moved)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := again.result(), (WriteResult{Duplicates: 1}); got != want {
		t.Errorf("the arrival again: %+v, want %+v", got, want)
	}
	for _, p := range []plan{moved, again} {
		if err := p.apply(ctx); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]int64{}
	for _, r := range totals(t, q, stats.Sub1) {
		if r.Conversions.Total != 0 {
			got[r.Sub1] = r.Conversions.Total
		}
	}
	if want := map[string]int64{"email": 1}; !maps.Equal(got, want) {
		t.Errorf("conversions by sub1 = %v, want %v", got, want)
	}
}
