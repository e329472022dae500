package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/clickid"
	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/ids"
	"github.com/partnerstream/partnerstream/internal/kafka"
	"github.com/partnerstream/partnerstream/internal/stats"
	"github.com/partnerstream/partnerstream/internal/testenv"
)

// signClickIDs gives every click of d a signed id (as the redirect mints them), in the
// clicks and in the conversions that name them.
func signClickIDs(t *testing.T, d dataset) dataset {
	t.Helper()
	keys, err := clickid.ParseKeys(clickid.GenerateKeySpec())
	if err != nil {
		t.Fatal(err)
	}
	link := ids.New(ids.Link)
	signed := map[string]string{}
	for i, c := range d.clicks {
		id, ok := signed[c.ClickID]
		if !ok {
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
		if d.events[i].Data, err = json.Marshal(data); err != nil {
			t.Fatal(err)
		}
	}
	return d
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

func TestConversionsProducedBeforeTheirClicksCountUnderTheClicksSub1(t *testing.T) {
	// Not parallel: it reads the package's metrics.
	e := newEnv(t)
	d := signClickIDs(t, newDataset(21, 400))
	if d.distinctConversions() == 0 {
		t.Fatal("the dataset has no conversion")
	}
	without := metric(t, "partnerstream_ingest_conversions_without_click_total", "", "")
	o := Options{BatchInterval: 100 * time.Millisecond}
	stop := testenv.Run(t, e.service(t, o))
	// A signed id converts milliseconds after its redirect: the conversion's event can reach
	// ingest before the click does.
	e.produce(t, kafka.TopicEvents, d.eventMessages())
	waitFor(t, 20*time.Second, "the conversions held for their clicks", func() bool {
		return metric(t, "partnerstream_ingest_conversions_awaiting_click", "", "") > 0
	})

	// A shutdown while the batch waits is prompt and leaves the batch to Kafka, uncommitted.
	stopped := time.Now()
	stop()
	if took := time.Since(stopped); took > 10*time.Second {
		t.Errorf("shutting down while a batch waits for its clicks took %v", took)
	}
	if n := e.count(t, "SELECT count() FROM "+e.db+".conversion_changes"); n != 0 {
		t.Fatalf("%d conversion changes stored without their clicks, want none", n)
	}

	testenv.Run(t, e.service(t, o))
	e.produce(t, kafka.TopicClicks, d.clickMessages())
	e.waitCaughtUp(t, DefaultGroupPrefix+"-clicks", kafka.TopicClicks, 30*time.Second)
	e.waitCaughtUp(t, DefaultGroupPrefix+"-events", kafka.TopicEvents, 30*time.Second)
	assertFigures(t, e.conn, e.db, d)
	if n := metric(t, "partnerstream_ingest_conversions_awaiting_click", "", ""); n != 0 {
		t.Errorf("%v conversions still awaiting their clicks, want 0", n)
	}
	if n := metric(t, "partnerstream_ingest_conversions_without_click_total", "", "") - without; n != 0 {
		t.Errorf("%v conversions written without their clicks, want 0", n)
	}
}

func TestAConversionWaitsForItsClickOnlyAsLongAsTheSetting(t *testing.T) {
	// Not parallel: it reads the package's metrics.
	e := newEnv(t)
	d := signClickIDs(t, newDataset(22, 200))
	d.clicks = nil // lost: the redirect's spool was full
	without := metric(t, "partnerstream_ingest_conversions_without_click_total", "", "")
	testenv.Run(t, e.service(t, Options{BatchInterval: 100 * time.Millisecond, ClickWait: time.Second}))
	e.produce(t, kafka.TopicEvents, d.eventMessages())
	e.waitCaughtUp(t, DefaultGroupPrefix+"-events", kafka.TopicEvents, 30*time.Second)
	// Counted, without the click's link and sub1.
	assertFiguresBy(t, e.conn, e.db, d, stats.Day, stats.Sub1)
	if got, want := metric(t, "partnerstream_ingest_conversions_without_click_total", "", "")-without, float64(d.distinctConversions()); got != want {
		t.Errorf("%v conversions written without their clicks, want %v", got, want)
	}
}

func TestTheClickWaitCountsFromTheEndOfAClickHouseOutage(t *testing.T) {
	t.Parallel()
	w, _ := newWriterDB(t)
	now := time.Now()
	w.now, w.clickWait = func() time.Time { return now }, time.Minute
	keys, err := clickid.ParseKeys(clickid.GenerateKeySpec())
	if err != nil {
		t.Fatal(err)
	}
	c := conversion(1, events.CommissionPending)
	if c.ClickID, err = keys.Mint(ids.New(ids.Link), now.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	c.Published = now.Add(-time.Hour) // reached Kafka during an hour-long ClickHouse outage
	w.answered(errors.New("connection refused"))
	now = now.Add(time.Second)
	w.answered(nil) // ClickHouse is back: the click may be in the clicks consumer's backlog
	if _, err := w.WriteConversions(context.Background(), []Conversion{c}); !errors.Is(err, errClickPending) {
		t.Fatalf("right after the outage: %v, want the batch held for the click", err)
	}
	now = now.Add(time.Minute)
	res, err := w.WriteConversions(context.Background(), []Conversion{c})
	if err != nil || res != (WriteResult{Written: 1, WithoutClick: 1}) {
		t.Fatalf("a minute after the outage: %+v, %v; want it written without its click", res, err)
	}
}
