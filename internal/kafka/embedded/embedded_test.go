package embedded_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/kafka"
	"github.com/partnerstream/partnerstream/internal/kafka/embedded"
)

func start(t *testing.T, opts embedded.Options) *embedded.Broker {
	t.Helper()
	b, err := embedded.Start(opts)
	if err != nil {
		t.Fatalf("Start(%+v): %v", opts, err)
	}
	t.Cleanup(b.Close)
	return b
}

func config(b *embedded.Broker) kafka.Config {
	return kafka.Config{Brokers: b.Addrs(), Partitions: 2, ReplicationFactor: 1, Retention: time.Hour}
}

func TestBrokerListensOnLoopbackOnly(t *testing.T) {
	b := start(t, embedded.Options{Addr: "127.0.0.1:0"})
	addrs := b.Addrs()
	if len(addrs) != 1 {
		t.Fatalf("Addrs() = %v, want one address", addrs)
	}
	host, port, err := net.SplitHostPort(addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	if host != "127.0.0.1" || port == "0" {
		t.Errorf("Addrs() = %v, want 127.0.0.1 with the picked port", addrs)
	}
}

func TestStartRefusesNonLoopbackAddresses(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "192.0.2.1:0", "example.com:0", "127.0.0.1"} {
		t.Run(addr, func(t *testing.T) {
			b, err := embedded.Start(embedded.Options{Addr: addr})
			if err == nil {
				b.Close()
				t.Fatalf("Start(%q) succeeded, want a refusal", addr)
			}
		})
	}
}

func TestStartAcceptsLocalhostAndDefault(t *testing.T) {
	for _, addr := range []string{"localhost:0", ""} {
		b := start(t, embedded.Options{Addr: addr})
		if !strings.HasPrefix(b.Addrs()[0], "127.0.0.1:") {
			t.Errorf("Start(%q).Addrs() = %v, want 127.0.0.1", addr, b.Addrs())
		}
	}
}

// TestDataDirKeepsMessagesAcrossRestart is what `partnerstream dev` relies on: stop it,
// start it again, and the clicks and events produced before are still there.
func TestDataDirKeepsMessagesAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	first, err := embedded.Start(embedded.Options{Addr: "127.0.0.1:0", DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config(first)
	if err := kafka.EnsureTopics(ctx, cfg, kafka.TopicClicks); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	w := kafka.NewProducer(cfg, kafka.TopicClicks, kafka.ProducerOptions{})
	for i := range 20 {
		v := fmt.Sprintf("click-%02d", i)
		if err := kafka.FirstError(w.Produce(ctx, []kafka.Record{kafka.Record{Key: []byte(v), Value: []byte(v)}})); err != nil {
			t.Fatalf("write %s: %v", v, err)
		}
		want[v] = true
	}
	w.Close()
	first.Close()

	second := start(t, embedded.Options{Addr: "127.0.0.1:0", DataDir: dir})
	cfg.Brokers = second.Addrs()
	// Fail with a clear message rather than a reader waiting out the deadline on a topic
	// that was not restored.
	parts, err := kafka.Partitions(ctx, cfg, kafka.TopicClicks)
	if err != nil || len(parts) != cfg.Partitions {
		t.Fatalf("after restart topic %s has partitions %v (err %v), want %d", kafka.TopicClicks, parts, err, cfg.Partitions)
	}
	got, err := kafka.ReadAll(ctx, cfg, kafka.TopicClicks)
	if err != nil {
		t.Fatalf("read after restart: %v", err)
	}
	for _, m := range got {
		if !want[string(m.Value)] {
			t.Fatalf("unexpected or duplicate message %s", m.Value)
		}
		delete(want, string(m.Value))
	}
	if len(want) > 0 {
		t.Fatalf("after restart %d messages are missing", len(want))
	}
}

func TestInMemoryBrokerStartsEmpty(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first := start(t, embedded.Options{})
	if err := kafka.EnsureTopics(ctx, config(first), kafka.TopicEvents); err != nil {
		t.Fatal(err)
	}
	first.Close()

	second := start(t, embedded.Options{})
	if parts, err := kafka.Partitions(ctx, config(second), kafka.TopicEvents); err == nil {
		t.Errorf("a fresh in-memory broker has %s with partitions %v, want no such topic", kafka.TopicEvents, parts)
	}
}

func TestDataDirIsExclusive(t *testing.T) {
	dir := t.TempDir()
	first, err := embedded.Start(embedded.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := embedded.Start(embedded.Options{DataDir: dir}); err == nil {
		b.Close()
		first.Close()
		t.Fatal("a second broker started on a data dir in use")
	}
	first.Close()
	first.Close() // idempotent, and must not release someone else's lock
	start(t, embedded.Options{DataDir: dir})
}

func TestTopicsAreNotAutoCreated(t *testing.T) {
	b := start(t, embedded.Options{})
	w := kafka.NewProducer(config(b), "partnerstream.typo", kafka.ProducerOptions{})
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := kafka.FirstError(w.Produce(ctx, []kafka.Record{kafka.Record{Value: []byte("x")}}))
	if err == nil {
		t.Fatal("write to a topic nobody created succeeded")
	}
}
