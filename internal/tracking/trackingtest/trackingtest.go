// Package trackingtest holds test helpers for the click path: an embedded Kafka broker that
// a test can stop and start again on the same address with the same data, a reader of every
// click on the clicks topic, the exactly-once check, and a recorder runner.
package trackingtest

import (
	"cmp"
	"context"
	"encoding/json"
	"net"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/events"
	"github.com/partnerstream/partnerstream/internal/kafka"
	"github.com/partnerstream/partnerstream/internal/kafka/embedded"
	"github.com/partnerstream/partnerstream/internal/tracking"
)

// Broker is an embedded Kafka with a data dir and the clicks topic.
type Broker struct {
	Config kafka.Config
	t      testing.TB
	dir    string
	addr   string
	b      *embedded.Broker
}

// StartBroker starts a broker for the test, with the clicks topic in 3 partitions.
func StartBroker(t testing.TB) *Broker {
	t.Helper()
	k := &Broker{t: t, dir: t.TempDir(), addr: "127.0.0.1:0"}
	k.Start()
	k.addr = k.b.Addrs()[0]
	k.Config = kafka.Config{Brokers: []string{k.addr}, Partitions: 3, ReplicationFactor: 1, Retention: time.Hour}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := kafka.EnsureTopics(ctx, k.Config, kafka.TopicClicks); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if k.b != nil {
			k.b.Close()
		}
	})
	return k
}

// Start starts the broker again after Stop, on the same address with the same data.
func (k *Broker) Start() {
	k.t.Helper()
	b, err := embedded.Start(embedded.Options{Addr: k.addr, DataDir: k.dir})
	if err != nil {
		k.t.Fatalf("start broker on %s: %v", k.addr, err)
	}
	k.b = b
}

// Stop stops the broker; its port refuses connections until Start.
func (k *Broker) Stop() {
	k.b.Close()
	k.b = nil
}

// DeadBroker is a Kafka config pointing at a loopback port nobody listens on.
func DeadBroker(t testing.TB) kafka.Config {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return kafka.Config{Brokers: []string{addr}, Partitions: 3, ReplicationFactor: 1, Retention: time.Hour}
}

// Message is a click as read from the topic, with its key.
type Message struct {
	Key   string
	Click events.Click
}

// ReadClicks returns every message of the clicks topic once at least want are there, or
// what there is when wait has passed.
func ReadClicks(t testing.TB, cfg kafka.Config, want int, wait time.Duration) []Message {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		got := ReadClicksOnce(t, cfg)
		if len(got) >= want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ReadClicksOnce returns every message of the clicks topic now.
func ReadClicksOnce(t testing.TB, cfg kafka.Config) []Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	msgs, err := kafka.ReadAll(ctx, cfg, kafka.TopicClicks)
	if err != nil {
		t.Fatalf("read the clicks topic: %v", err)
	}
	out := make([]Message, 0, len(msgs))
	for _, m := range msgs {
		var c events.Click
		if err := json.Unmarshal(m.Value, &c); err != nil {
			t.Fatalf("message %s is not a click: %v", m.Value, err)
		}
		out = append(out, Message{Key: string(m.Key), Click: c})
	}
	return out
}

// ExactlyOnce fails unless the messages hold each of the click ids once, keyed by the
// click's visitor (its id without one), and nothing else.
func ExactlyOnce(t testing.TB, got []Message, want []string) {
	t.Helper()
	seen := map[string]int{}
	for _, m := range got {
		if key := cmp.Or(m.Click.Visitor, m.Click.ClickID); m.Key != key {
			t.Errorf("message key %q, want %q (click %s)", m.Key, key, m.Click.ClickID)
		}
		seen[m.Click.ClickID]++
	}
	for _, id := range want {
		if seen[id] != 1 {
			t.Errorf("click %s is on the topic %d times", id, seen[id])
		}
		delete(seen, id)
	}
	if len(seen) > 0 {
		t.Errorf("unexpected clicks on the topic: %v", seen)
	}
	if len(got) != len(want) {
		t.Fatalf("%d messages, want exactly %d", len(got), len(want))
	}
}

// RunRecorder runs r until the test ends or stop is called; stop waits for Run to return.
func RunRecorder(t testing.TB, r *tracking.Recorder) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var stopped bool
	var err error
	stop = func() error {
		if !stopped {
			stopped = true
			cancel()
			err = <-done
		}
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// WaitForEmptySpool fails unless the recorder's spool empties within wait.
func WaitForEmptySpool(t testing.TB, r *tracking.Recorder, wait time.Duration) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for r.SpoolBytes() != 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := r.SpoolBytes(); n != 0 {
		t.Fatalf("the spool still holds %d bytes after %s", n, wait)
	}
}
