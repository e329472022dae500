package ingest

import (
	"context"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/kafka"
	"github.com/partnerstream/partnerstream/internal/testenv"
)

// The click recorder sends a group again when the broker's answer is lost (the first try
// was written), and its spool replays clicks Kafka may already hold, grouped otherwise. With
// two ingest replicas at work, as the chart runs them, every click still counts once:
// the producer puts every copy on the partition of the first try, so one replica owns them
// all and stores one.
func TestTwoReplicasCountEveryCopyOfAClickOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	d := newDataset(4, 3000)
	d.events = nil
	p := kafka.NewProducer(e.kafka, kafka.TopicClicks, kafka.ProducerOptions{})
	defer p.Close()
	ctx := context.Background()
	produce := func(recs []kafka.Record) {
		if err := kafka.FirstError(p.Produce(ctx, recs)); err != nil {
			t.Fatal(err)
		}
	}
	recs := d.clickMessages()
	for from := 0; from < len(recs); from += 64 {
		group := recs[from:min(from+64, len(recs))]
		produce(group) // the first try, written although its answer was lost
		produce(group) // the retry
	}
	var replay []kafka.Record // the spool: every fifth click, in groups of another size
	for i := 0; i < len(recs); i += 5 {
		replay = append(replay, recs[i])
	}
	for from := 0; from < len(replay); from += 100 {
		produce(replay[from:min(from+100, len(replay))])
	}

	// Small batches, so that the replicas plan many at once.
	first := testenv.Run(t, e.service(t, Options{BatchSize: 50, BatchInterval: 20 * time.Millisecond}))
	second := testenv.Run(t, e.service(t, Options{BatchSize: 50, BatchInterval: 20 * time.Millisecond}))
	e.waitCaughtUp(t, DefaultGroupPrefix+"-clicks", kafka.TopicClicks, time.Minute)
	first()
	second()
	if got, want := e.count(t, "SELECT count() FROM "+e.db+".clicks FINAL"), uint64(d.distinctClicks()); got != want {
		t.Errorf("clicks holds %d clicks, want %d: one per click id", got, want)
	}
	assertFigures(t, e.conn, e.db, d)
}
