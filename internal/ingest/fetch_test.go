package ingest

import (
	"context"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/partnerstream/partnerstream/internal/kafka"
	"github.com/partnerstream/partnerstream/internal/testenv"
)

// commitEvery commits offset for every partition of topic in group, as a replica that stopped
// there would have.
func (e *env) commitEvery(t *testing.T, group, topic string, offset int64) {
	t.Helper()
	client := &kafkago.Client{Addr: kafkago.TCP(e.kafka.Brokers...), Timeout: 5 * time.Second}
	commits := make([]kafkago.OffsetCommit, e.kafka.Partitions)
	for p := range commits {
		commits[p] = kafkago.OffsetCommit{Partition: p, Offset: offset}
	}
	res, err := client.OffsetCommit(context.Background(), &kafkago.OffsetCommitRequest{
		GroupID: group, GenerationID: -1, Topics: map[string][]kafkago.OffsetCommit{topic: commits}})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range res.Topics[topic] {
		if p.Error != nil {
			t.Fatalf("commit partition %d: %v", p.Partition, p.Error)
		}
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
