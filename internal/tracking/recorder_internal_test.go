package tracking

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/kafka"
	"github.com/partnerstream/partnerstream/internal/testenv"
)

// TestReplaySkipsAClickWhoseLateFirstWriteSucceeded is the case that keeps a slow broker
// from receiving a click twice: the redirect stopped waiting, spooled the click, and only
// then did Kafka acknowledge the first write.
func TestReplaySkipsAClickWhoseLateFirstWriteSucceeded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, cfg := newKafkaRecorder(t, RecorderOptions{})
	it := item{id: "clk_late", payload: []byte(`{"click_id":"clk_late"}`)}
	// What deliver does when AckTimeout expires first: track the write under way, spool.
	ds := r.submit([]item{it})
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
	if n := stopAndCount(t, r, cfg); n != 1 {
		t.Fatalf("the topic holds %d messages, want the first write's only", n)
	}
}

// newKafkaRecorder returns a recorder (not running) on a one-partition clicks topic.
func newKafkaRecorder(t *testing.T, o RecorderOptions) (*Recorder, kafka.Config) {
	t.Helper()
	cfg := kafka.Config{Brokers: testenv.Kafka(t), Partitions: 1, ReplicationFactor: 1, Retention: time.Hour}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := kafka.EnsureTopics(ctx, cfg, kafka.TopicClicks); err != nil {
		t.Fatal(err)
	}
	o.Kafka, o.SpoolDir = cfg, t.TempDir()
	r, err := NewRecorder(o)
	if err != nil {
		t.Fatal(err)
	}
	return r, cfg
}

// stopAndCount shuts r down and returns how many messages the clicks topic holds.
func stopAndCount(t *testing.T, r *Recorder, cfg kafka.Config) int64 {
	t.Helper()
	runCtx, stop := context.WithCancel(context.Background())
	stop()
	if err := r.Run(runCtx); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	msgs, err := kafka.ReadAll(ctx, cfg, kafka.TopicClicks)
	if err != nil {
		t.Fatal(err)
	}
	return int64(len(msgs))
}

// BenchmarkRecordAsync is the redirect's share of recording a click in async mode: encoding
// it into a pooled buffer and queueing it (a goroutine stands for the workers and releases
// the buffers, as they do once Kafka has the click). -benchmem shows what stays allocated.
func BenchmarkRecordAsync(b *testing.B) {
	r, err := NewRecorder(RecorderOptions{Kafka: kafka.Config{Brokers: []string{"127.0.0.1:9"}, Partitions: 1, ReplicationFactor: 1,
		Retention: time.Hour},
		Mode: ModeAsync, SpoolDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case it := <-r.queue:
				it.release()
			case <-stop:
				return
			}
		}
	}()
	c := events.Click{ClickID: "clk_06f2d1x0k8m9q06f2d1x0k8m9q06f2d1x0k8m9q06f2d1x0k8m9q06f2d1x0", OccurredAt: time.Now().UTC(),
		LinkID: "lnk_06f2d1x0k8m9q0000000000000", ProgramID: "prg_06f2d1x0k8m9q0000000000000", AffiliateID: "co_06f2d1x0k8m9q0000000000000",
		AdvertiserID: "co_06f2d1x0k8m9q0000000000001", Sub1: "newsletter", IP: "203.0.113.9",
		UserAgent:  "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36",
		Referrer:   "https://blog.example.com/post",
		LandingURL: "https://shop.example.com/landing?utm_source=affiliate"}
	b.ReportAllocs()
	for b.Loop() {
		if err := r.Record(context.Background(), c); err != nil {
			b.Fatal(err)
		}
	}
	if n := r.SpoolBytes(); n > 0 {
		b.Logf("%d bytes spooled (the queue was full)", n)
	}
}

// Ack-mode clicks that arrive while a delivery is under way wait together and are handed to
// the producer in one group when it ends; each is answered once Kafka has it.
func TestAckModeDeliversConcurrentClicksAsOneGroup(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, cfg := newKafkaRecorder(t, RecorderOptions{AckTimeout: 5 * time.Second})
	// As if a delivery were under way: the clicks gather in the next group.
	r.ackMu.Lock()
	r.ackBusy = true
	r.ackMu.Unlock()
	const n = 50
	errs := make(chan error, n)
	for i := range n {
		go func() {
			errs <- r.Record(ctx, events.Click{ClickID: fmt.Sprintf("clk_group%02d", i), OccurredAt: time.Now().UTC()})
		}()
	}
	for {
		r.ackMu.Lock()
		gathered := 0
		if r.ackNext != nil {
			gathered = len(r.ackNext.items)
		}
		r.ackMu.Unlock()
		if gathered == n {
			break
		}
		select {
		case err := <-errs:
			t.Fatalf("a click was answered (%v) before its group was delivered", err)
		case <-time.After(time.Millisecond):
		}
	}
	// The delivery under way ends: it starts the gathered group.
	r.ackMu.Lock()
	next := r.ackNext
	r.ackNext = nil
	r.ackMu.Unlock()
	go r.deliverAck(next)
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if r.spool.Size() != 0 {
		t.Fatalf("spool holds %d bytes: the group was not acknowledged", r.spool.Size())
	}
	r.ackMu.Lock()
	busy := r.ackBusy
	r.ackMu.Unlock()
	if busy {
		t.Fatal("still delivering with no click waiting")
	}
	if got := stopAndCount(t, r, cfg); got != n {
		t.Fatalf("the topic holds %d messages, want %d", got, n)
	}
}

// The producer's transport is the recorder's own: once Run returns, none of its connections
// or metadata goroutines is left.
func TestRecorderLeavesNoProducerGoroutines(t *testing.T) {
	r, cfg := newKafkaRecorder(t, RecorderOptions{})
	if err := r.Record(context.Background(), events.Click{ClickID: "clk_goroutines", OccurredAt: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
	if n := stopAndCount(t, r, cfg); n != 1 {
		t.Fatalf("the topic holds %d messages, want 1", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		if !strings.Contains(stacks, "segmentio/kafka-go.(*connPool)") && !strings.Contains(stacks, "segmentio/kafka-go.(*conn)") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("kafka-go goroutines left after Run returned:\n%s", stacks)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
