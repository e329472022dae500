package ingest

import (
	"context"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/kafka"
	"github.com/partnerstream/partnerstream/internal/testenv"
)

// commitEvery commits offset for every partition of topic in group, as a replica that stopped
// there would have.
func (e *env) commitEvery(t *testing.T, group, topic string, offset int64) {
	t.Helper()
	offsets := map[int]int64{}
	for p := range e.kafka.Partitions {
		offsets[p] = offset
	}
	if err := kafka.CommitOffsets(context.Background(), e.kafka, group, topic, offsets); err != nil {
		t.Fatal(err)
	}
}

// A fetch answers with whole record batches, so resuming from a commit in the middle of one
// gets the messages before it again: they must not be ingested a second time as if new.
func TestResumingInsideARecordBatchSkipsWhatWasCommitted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	d := newDataset(8, 600)
	msgs := d.clickMessages()
	e.produce(t, kafka.TopicClicks, msgs) // one record batch per partition
	const committed = 10
	e.commitEvery(t, DefaultGroupPrefix+"-clicks", kafka.TopicClicks, committed)

	s := e.service(t, Options{})
	testenv.Run(t, s)
	e.waitCaughtUp(t, DefaultGroupPrefix+"-clicks", kafka.TopicClicks, 30*time.Second)
	if got, want := s.clicks.received.Load(), int64(len(msgs)-committed*e.kafka.Partitions); got != want {
		t.Errorf("ingest received %d messages, want %d: those after the commits", got, want)
	}
	if n := e.count(t, "SELECT count() FROM "+e.db+".clicks WHERE kafka_offset < 10"); n != 0 {
		t.Errorf("%d clicks stored from before the committed offsets", n)
	}
}

// A committed offset the partition does not hold (the topic was recreated, or retention
// deleted what was not read yet) restarts the partition from its first message, as Kafka's
// consumers do with auto.offset.reset=earliest, rather than waiting for it forever.
func TestAnOffsetThePartitionDoesNotHoldRestartsFromItsFirst(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	d := newDataset(9, 300)
	e.produce(t, kafka.TopicClicks, d.clickMessages())
	e.commitEvery(t, DefaultGroupPrefix+"-clicks", kafka.TopicClicks, 1_000_000)

	testenv.Run(t, e.service(t, Options{}))
	query := "SELECT count() FROM " + e.db + ".clicks"
	waitFor(t, 30*time.Second, "every click stored", func() bool { return e.count(t, query) == uint64(d.distinctClicks()) })
}
