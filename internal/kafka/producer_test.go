package kafka_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/kafka"
	"github.com/partnerstream/partnerstream/internal/testenv"
)

// A request whose answer was lost is sent again, and a spool replays records the broker may
// already have, in other groups than the first try's: every copy of a record must land on
// the partition of its first try, so that the one consumer that owns that partition sees
// every copy and can drop the repeats.
func TestEveryCopyOfARecordLandsOnThePartitionOfItsFirstTry(t *testing.T) {
	cfg, ctx, p := newTopic(t, kafka.TopicClicks, kafka.ProducerOptions{})
	recs := make([]kafka.Record, 40)
	for i := range recs {
		id := fmt.Sprintf("clk_%03d", i)
		recs[i] = kafka.Record{Key: []byte(id), Value: []byte(`{"click_id":"` + id + `"}`)}
	}
	var replay []kafka.Record // every third record, in reverse: another grouping than the first try's
	for i := len(recs) - 1; i >= 0; i -= 3 {
		replay = append(replay, recs[i])
	}
	for name, group := range map[string][]kafka.Record{"first try": recs, "retry": recs, "spool replay": replay} {
		if errs := p.Produce(ctx, group); errs != nil {
			t.Fatalf("%s: %v", name, errs)
		}
	}
	got, err := kafka.ReadAll(ctx, cfg, kafka.TopicClicks)
	if err != nil {
		t.Fatal(err)
	}
	if want := 2*len(recs) + len(replay); len(got) != want {
		t.Fatalf("read %d records, want %d", len(got), want)
	}
	partitionOf, used := map[string]int{}, map[int]bool{}
	for _, m := range got {
		if want := `{"click_id":"` + string(m.Key) + `"}`; string(m.Value) != want {
			t.Fatalf("key %s carries %s", m.Key, m.Value)
		}
		if first, ok := partitionOf[string(m.Key)]; ok && first != m.Partition {
			t.Errorf("copies of %s on partitions %d and %d", m.Key, first, m.Partition)
		}
		partitionOf[string(m.Key)], used[m.Partition] = m.Partition, true
	}
	if len(used) != cfg.Partitions {
		t.Errorf("40 keys used partitions %v of %d: the producer does not spread keys", used, cfg.Partitions)
	}
}

// A group larger than a request may be (the brokers refuse record batches over 1 MB by
// default) goes out in several requests, in order.
func TestALargeGroupIsSplitIntoRequests(t *testing.T) {
	cfg, ctx, p := newTopic(t, kafka.TopicEvents, kafka.ProducerOptions{})
	recs := make([]kafka.Record, 6) // one key, one partition: 1.8 MB in one request would be refused
	for i := range recs {
		recs[i] = kafka.Record{Key: []byte("evt_aggregate"), Value: []byte(fmt.Sprintf("%d:%s", i, strings.Repeat("x", 300<<10)))}
	}
	if errs := p.Produce(ctx, recs); errs != nil {
		t.Fatal(errs)
	}
	got, err := kafka.ReadAll(ctx, cfg, kafka.TopicEvents)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(recs) {
		t.Fatalf("read %d records, want %d", len(got), len(recs))
	}
	for i, m := range got {
		if !strings.HasPrefix(string(m.Value), fmt.Sprintf("%d:", i)) {
			t.Fatalf("record %d is %.10q: out of order", i, m.Value)
		}
	}
}

// A partition's records written before one of its requests failed are reported written:
// only the rest would be sent again.
func TestOnlyTheRecordsAFailedRequestHeldGetItsError(t *testing.T) {
	_, ctx, p := newTopic(t, kafka.TopicEvents, kafka.ProducerOptions{Attempts: 1})
	key := []byte("evt_partial")
	// One key, so one partition: the two small records go in one request, the one over the
	// brokers' 1 MB limit alone in the next, which the broker refuses.
	errs := p.Produce(ctx, []kafka.Record{{Key: key, Value: []byte("a")}, {Key: key, Value: []byte("b")},
		{Key: key, Value: []byte(strings.Repeat("x", 1200<<10))}})
	if len(errs) != 3 || errs[0] != nil || errs[1] != nil || errs[2] == nil {
		t.Fatalf("errors %v, want only the third record's", errs)
	}
}

// A producer that cannot reach the topic says so for every record.
func TestEveryRecordGetsTheErrorOfAFailedProduce(t *testing.T) {
	cfg := testConfig(testenv.Kafka(t))
	p := kafka.NewProducer(cfg, "partnerstream.missing", kafka.ProducerOptions{Attempts: 1, AttemptTimeout: 2 * time.Second})
	defer p.Close()
	errs := p.Produce(testContext(t, 10*time.Second), []kafka.Record{{Key: []byte("a")}, {Key: []byte("b")}})
	if len(errs) != 2 || errs[0] == nil || errs[1] == nil {
		t.Fatalf("errors %v, want one for each record", errs)
	}
}
