package kafka_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

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

// BenchmarkProduceCompression produces groups of 64 click-like records (what an async
// redirect worker hands over) with each codec of --kafka-compression, and reports the time
// per record (the producer and the in-process broker together) and the bytes per record the
// codec leaves of the group's values.
func BenchmarkProduceCompression(b *testing.B) {
	// Click ids, addresses and landing pages differ from click to click; a handful of user
	// agents and one program's ids repeat, as in one worker's group.
	rng := rand.New(rand.NewPCG(1, 2))
	agents := []string{
		"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36",
		"Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1",
		"Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0",
		"Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Mobile Safari/537.36",
	}
	recs := make([]kafka.Record, 64)
	var values bytes.Buffer
	for i := range recs {
		id := fmt.Sprintf("clk_%016x%08x", rng.Uint64(), rng.Uint32())
		v := fmt.Sprintf(`{"click_id":%q,"occurred_at":"2026-11-27T05:%02d:%02d.%09dZ","link_id":"lnk_01JD3K8ZQ5","program_id":"prg_01JD3K8ZQ5",`+
			`"affiliate_id":"aff_01JD3K8Z%02d","advertiser_id":"adv_01JD3K8ZQ5","sub1":"c%x","ip":"%d.%d.%d.%d","user_agent":%q,`+
			`"country":"DE","is_bot":false,"is_duplicate":false,"landing_url":"https://shop.example.com/p/%d?utm_source=aff&ref=%x"}`,
			id, rng.IntN(60), rng.IntN(60), rng.IntN(1e9), rng.IntN(20), rng.Uint32(), rng.IntN(223)+1, rng.IntN(256), rng.IntN(256),
			rng.IntN(256), agents[rng.IntN(len(agents))], rng.IntN(100000), rng.Uint64())
		recs[i] = kafka.Record{Key: []byte(id), Value: []byte(v)}
		values.WriteString(v)
	}
	for _, codec := range kafka.Compressions {
		b.Run(codec, func(b *testing.B) {
			cfg := testConfig(testenv.Kafka(b))
			cfg.Compression = codec
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			if err := kafka.EnsureTopics(ctx, cfg, kafka.TopicClicks); err != nil {
				b.Fatal(err)
			}
			p := kafka.NewProducer(cfg, kafka.TopicClicks, kafka.ProducerOptions{})
			defer p.Close()
			b.ResetTimer()
			for range b.N {
				if err := kafka.FirstError(p.Produce(ctx, recs)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/record")
			b.ReportMetric(float64(compressedLen(b, codec, values.Bytes()))/float64(len(recs)), "bytes/record")
		})
	}
}

func compressedLen(b *testing.B, codec string, data []byte) int {
	var c kafkago.Compression
	if codec == "none" {
		return len(data)
	}
	if err := c.UnmarshalText([]byte(codec)); err != nil {
		b.Fatal(err)
	}
	var out bytes.Buffer
	w := c.Codec().NewWriter(&out)
	if _, err := w.Write(data); err != nil {
		b.Fatal(err)
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	return out.Len()
}
