package tracking

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/partnerstream/partnerstream/internal/kafka"
	"github.com/partnerstream/partnerstream/internal/testenv"
)

// Each group goes to the next partition in one request, split when it would exceed
// produceMaxBytes, with every click's id as key and its payload as value.
func TestProducerSendsEachGroupToTheNextPartition(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := kafka.Config{Brokers: testenv.Kafka(t), Partitions: 3, ReplicationFactor: 1, Retention: time.Hour}
	if err := kafka.EnsureTopics(ctx, cfg, kafka.TopicClicks); err != nil {
		t.Fatal(err)
	}
	p := newProducer(cfg, kafka.TopicClicks)
	group := func(name string, n, size int) []item {
		items := make([]item, n)
		for i := range items {
			id := fmt.Sprintf("clk_%s%03d", name, i)
			items[i] = item{id: id, payload: []byte(`{"click_id":"` + id + `","pad":"` + strings.Repeat("x", size) + `"}`)}
		}
		return items
	}
	// Two clicks of the third group fill a request: it goes in two, to two partitions.
	groups := [][]item{group("a", 5, 10), group("b", 1, 10), group("c", 4, produceMaxBytes/2-100), group("d", 2, 10)}
	for _, g := range groups {
		if written, err := p.produce(g); err != nil || written != len(g) {
			t.Fatalf("produce: %d of %d written, %v", written, len(g), err)
		}
	}
	p.shutdown()

	var got [3][]string // per partition: "key=value-prefix"
	for partition := range 3 {
		conn, err := kafkago.DialLeader(ctx, "tcp", cfg.Brokers[0], kafka.TopicClicks, partition)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		last, err := conn.ReadLastOffset()
		if err != nil {
			t.Fatal(err)
		}
		batch := conn.ReadBatch(1, 10<<20)
		for range last {
			m, err := batch.ReadMessage()
			if err != nil {
				t.Fatalf("partition %d: %v", partition, err)
			}
			if want := `{"click_id":"` + string(m.Key) + `"`; !strings.HasPrefix(string(m.Value), want) {
				t.Fatalf("partition %d: key %q with value %.40q", partition, m.Key, m.Value)
			}
			got[partition] = append(got[partition], string(m.Key))
		}
		_ = batch.Close()
		conn.Close()
	}
	// Requests in turn from partition 1: a, b, c's first two, c's last two, d.
	idsOf := func(items []item) (ids []string) {
		for _, it := range items {
			ids = append(ids, it.id)
		}
		return ids
	}
	a, b, c, d := idsOf(groups[0]), idsOf(groups[1]), idsOf(groups[2]), idsOf(groups[3])
	want := [3][]string{
		0: c[:2],
		1: append(append([]string{}, a...), c[2:]...),
		2: append(append([]string{}, b...), d...),
	}
	for partition := range 3 {
		if strings.Join(got[partition], ",") != strings.Join(want[partition], ",") {
			t.Errorf("partition %d holds %v, want %v", partition, got[partition], want[partition])
		}
	}
}
