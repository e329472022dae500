package tracking

import (
	"context"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/partnerstream/partnerstream/internal/kafka"
	"github.com/partnerstream/partnerstream/internal/testenv"
)

// TestReplaySkipsAClickWhoseLateFirstWriteSucceeded is the case that keeps a slow broker
// from receiving a click twice: the redirect stopped waiting, spooled the click, and only
// then did Kafka acknowledge the first write.
func TestReplaySkipsAClickWhoseLateFirstWriteSucceeded(t *testing.T) {
	cfg := kafka.Config{Brokers: testenv.Kafka(t), Partitions: 1, ReplicationFactor: 1, Retention: time.Hour}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := kafka.EnsureTopics(ctx, cfg, kafka.TopicClicks); err != nil {
		t.Fatal(err)
	}
	r, err := NewRecorder(RecorderOptions{Kafka: cfg, SpoolDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	it := item{id: "clk_late", payload: []byte(`{"click_id":"clk_late"}`)}
	// What deliver does when AckTimeout expires first: track the write under way, spool.
	ds, err := r.submit(ctx, []item{it})
	if err != nil {
		t.Fatal(err)
	}
	r.track(ds)
	if err := r.toSpool([]item{it}); err != nil {
		t.Fatal(err)
	}
	if err := r.replay(ctx); err != nil {
		t.Fatal(err)
	}
	if r.spool.Size() != 0 {
		t.Fatalf("spool holds %d bytes after the replay", r.spool.Size())
	}
	runCtx, stop := context.WithCancel(context.Background())
	stop()
	if err := r.Run(runCtx); err != nil {
		t.Fatal(err)
	}

	conn, err := kafkago.DialLeader(ctx, "tcp", cfg.Brokers[0], kafka.TopicClicks, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	last, err := conn.ReadLastOffset()
	if err != nil {
		t.Fatal(err)
	}
	if last != 1 {
		t.Fatalf("the topic holds %d messages, want the first write's only", last)
	}
}
