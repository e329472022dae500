package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"

	"github.com/partnerstream/partnerstream/internal/kafka"
	"github.com/partnerstream/partnerstream/internal/testenv"
)

func testConfig(brokers []string) kafka.Config {
	return kafka.Config{
		Brokers:           brokers,
		Partitions:        3,
		ReplicationFactor: 1,
		Retention:         36 * time.Hour,
		ClientID:          "partnerstream-test",
	}
}

// newTopic makes topic on the test broker and returns its configuration, a context for the
// test, and a producer to it.
func newTopic(t *testing.T, topic string, o kafka.ProducerOptions) (kafka.Config, context.Context, *kafka.Producer) {
	t.Helper()
	cfg := testConfig(testenv.Kafka(t))
	ctx := testContext(t, 60*time.Second)
	if err := kafka.EnsureTopics(ctx, cfg, topic); err != nil {
		t.Fatal(err)
	}
	p := kafka.NewProducer(cfg, topic, o)
	t.Cleanup(p.Close)
	return cfg, ctx, p
}

func testContext(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestConfigValidate(t *testing.T) {
	valid := testConfig([]string{"127.0.0.1:9092", "kafka-0.kafka:9092"})
	tests := []struct {
		name    string
		mutate  func(*kafka.Config)
		wantErr []string // substrings the error must contain; none means valid
	}{
		{name: "a complete config is valid", mutate: func(*kafka.Config) {}},
		{name: "an empty client id is valid because a default is sent", mutate: func(c *kafka.Config) { c.ClientID = "" }},
		{name: "no brokers is rejected", mutate: func(c *kafka.Config) { c.Brokers = nil }, wantErr: []string{"brokers"}},
		{name: "a broker without a port is rejected", mutate: func(c *kafka.Config) { c.Brokers = []string{"kafka"} }, wantErr: []string{"brokers", `"kafka"`}},
		{name: "a broker without a host is rejected", mutate: func(c *kafka.Config) { c.Brokers = []string{":9092"} }, wantErr: []string{"brokers", "host"}},
		{name: "a broker with a non-numeric port is rejected", mutate: func(c *kafka.Config) { c.Brokers = []string{"kafka:http"} }, wantErr: []string{"brokers", "port"}},
		{name: "a broker with port zero is rejected", mutate: func(c *kafka.Config) { c.Brokers = []string{"kafka:0"} }, wantErr: []string{"brokers", "port"}},
		{name: "one bad broker among good ones is rejected", mutate: func(c *kafka.Config) { c.Brokers = append(c.Brokers, "bad") }, wantErr: []string{`"bad"`}},
		{name: "zero partitions are rejected", mutate: func(c *kafka.Config) { c.Partitions = 0 }, wantErr: []string{"partitions"}},
		{name: "zero replication factor is rejected", mutate: func(c *kafka.Config) { c.ReplicationFactor = 0 }, wantErr: []string{"replication factor"}},
		{name: "zero retention is rejected", mutate: func(c *kafka.Config) { c.Retention = 0 }, wantErr: []string{"retention"}},
		{name: "negative retention is rejected", mutate: func(c *kafka.Config) { c.Retention = -time.Hour }, wantErr: []string{"retention"}},
		{
			name:    "every invalid field is reported at once",
			mutate:  func(c *kafka.Config) { *c = kafka.Config{} },
			wantErr: []string{"brokers", "partitions", "replication factor", "retention"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := valid
			cfg.Brokers = append([]string(nil), valid.Brokers...)
			tt.mutate(&cfg)
			err := cfg.Validate()
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want an error mentioning %q", tt.wantErr)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Validate() = %q, want it to mention %q", err, want)
				}
			}
		})
	}
}

func TestEnsureTopicsCreatesTopicsAndIsIdempotent(t *testing.T) {
	cfg := testConfig(testenv.Kafka(t))
	ctx := testContext(t, 30*time.Second)
	topics := []string{kafka.TopicClicks, kafka.TopicEvents}

	for i := range 2 { // the second run must find the topics and succeed
		if err := kafka.EnsureTopics(ctx, cfg, topics...); err != nil {
			t.Fatalf("EnsureTopics run %d: %v", i+1, err)
		}
	}

	conn, err := kafkago.DialContext(ctx, "tcp", cfg.Brokers[0])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	parts, err := conn.ReadPartitions(topics...)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, p := range parts {
		count[p.Topic]++
	}
	for _, topic := range topics {
		if count[topic] != cfg.Partitions {
			t.Errorf("topic %s has %d partitions, want %d", topic, count[topic], cfg.Partitions)
		}
	}

	// Its own transport, closed at the end: the shared DefaultTransport would keep a
	// metadata goroutine polling this test's broker after it is gone.
	transport := &kafkago.Transport{}
	defer transport.CloseIdleConnections()
	client := &kafkago.Client{Addr: kafkago.TCP(cfg.Brokers...), Transport: transport}
	want := strconv.FormatInt(cfg.Retention.Milliseconds(), 10)
	for _, topic := range topics {
		resp, err := client.DescribeConfigs(ctx, &kafkago.DescribeConfigsRequest{
			Resources: []kafkago.DescribeConfigRequestResource{{
				ResourceType: kafkago.ResourceTypeTopic,
				ResourceName: topic,
				ConfigNames:  []string{"retention.ms"},
			}},
		})
		if err != nil {
			t.Fatalf("describe %s: %v", topic, err)
		}
		got := ""
		for _, r := range resp.Resources {
			for _, e := range r.ConfigEntries {
				if e.ConfigName == "retention.ms" {
					got = e.ConfigValue
				}
			}
		}
		if got != want {
			t.Errorf("topic %s retention.ms = %q, want %q", topic, got, want)
		}
	}
}

func TestEnsureTopicsWrapsBrokerRefusalWithTopicName(t *testing.T) {
	cfg := testConfig(testenv.Kafka(t))
	cfg.ReplicationFactor = 3 // the embedded broker is a single node
	err := kafka.EnsureTopics(testContext(t, 30*time.Second), cfg, kafka.TopicEvents)
	if err == nil {
		t.Fatal("EnsureTopics with replication 3 on one broker succeeded, want an error")
	}
	if !errors.Is(err, kafkago.InvalidReplicationFactor) {
		t.Errorf("error %v does not wrap InvalidReplicationFactor", err)
	}
	if !strings.Contains(err.Error(), "create topic "+kafka.TopicEvents) {
		t.Errorf("error %q does not name the topic", err)
	}
}

func TestEnsureTopicsRejectsInvalidConfigBeforeDialing(t *testing.T) {
	cfg := testConfig([]string{"127.0.0.1:1"})
	cfg.Partitions = 0
	err := kafka.EnsureTopics(testContext(t, 5*time.Second), cfg, kafka.TopicEvents)
	if err == nil || !strings.Contains(err.Error(), "partitions") {
		t.Fatalf("EnsureTopics = %v, want the partitions validation error", err)
	}
}

func TestPingFailsFastOnClosedPort(t *testing.T) {
	start := time.Now()
	err := kafka.Ping(testContext(t, 10*time.Second), kafka.Config{Brokers: []string{"127.0.0.1:1"}})
	if err == nil {
		t.Fatal("Ping on a closed port succeeded")
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Ping took %s to fail, want under 3s", d)
	}
	if !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("error %q does not name the broker", err)
	}
}

func TestPingSucceedsOnBroker(t *testing.T) {
	brokers := testenv.Kafka(t)
	// A dead first address must not hide a live second one.
	if err := kafka.Ping(testContext(t, 10*time.Second), kafka.Config{Brokers: append([]string{"127.0.0.1:1"}, brokers...)}); err != nil {
		t.Fatalf("Ping: %v", err)
	}
}

func TestPingIsBoundedByContextWhenTheBrokerNeverAnswers(t *testing.T) {
	// A listener that accepts and then stays silent: the TCP connect succeeds, so only the
	// context can end the metadata read.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	start := time.Now()
	err = kafka.Ping(testContext(t, 300*time.Millisecond), kafka.Config{Brokers: []string{ln.Addr().String()}})
	if err == nil {
		t.Fatal("Ping on a silent broker succeeded")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Ping took %s, want it cut at the 300ms context deadline", d)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Ping = %v, want it to wrap context.DeadlineExceeded", err)
	}
}

func TestPingHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := kafka.Ping(ctx, kafka.Config{Brokers: testenv.Kafka(t)}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Ping with a canceled context = %v, want context.Canceled", err)
	}
}

func keyedMessages(prefix string, n int) []kafka.Record {
	msgs := make([]kafka.Record, n)
	for i := range msgs {
		msgs[i] = kafka.Record{
			Key:   []byte(fmt.Sprintf("key-%d", i%7)),
			Value: []byte(fmt.Sprintf("%s-%03d", prefix, i)),
		}
	}
	return msgs
}

func produce(ctx context.Context, t *testing.T, p *kafka.Producer, msgs []kafka.Record) {
	t.Helper()
	// One call per record, so each must return at once, without waiting to gather a batch.
	for _, m := range msgs {
		start := time.Now()
		if errs := p.Produce(ctx, []kafka.Record{m}); errs != nil {
			t.Fatalf("write %s: %v", m.Value, errs[0])
		}
		if d := time.Since(start); d > 500*time.Millisecond {
			t.Fatalf("write %s took %s: the producer is waiting out a batch timeout", m.Value, d)
		}
	}
}

func assertSameMessages(t *testing.T, got []kafka.Message, want []kafka.Record) {
	t.Helper()
	wantSet := map[string]string{}
	for _, m := range want {
		wantSet[string(m.Value)] = string(m.Key)
	}
	for _, m := range got {
		key, ok := wantSet[string(m.Value)]
		if !ok {
			t.Errorf("unexpected message %s (key %s)", m.Value, m.Key)
			continue
		}
		if m.Key != nil && key != string(m.Key) { // a consumer hands over values only
			t.Errorf("message %s has key %s, want %s", m.Value, m.Key, key)
		}
		delete(wantSet, string(m.Value))
	}
	for v := range wantSet {
		t.Errorf("message %s not received", v)
	}
}

func assertKeysStayOnOnePartitionInOrder(t *testing.T, got []kafka.Message) {
	t.Helper()
	partition := map[string]int{}
	last := map[string]string{}
	partitionsUsed := map[int]bool{}
	for _, m := range got {
		k := string(m.Key)
		if p, ok := partition[k]; ok && p != m.Partition {
			t.Errorf("key %s on partitions %d and %d", k, p, m.Partition)
		}
		partition[k] = m.Partition
		partitionsUsed[m.Partition] = true
		// Values are zero-padded, so string order is produce order.
		if string(m.Value) < last[k] {
			t.Errorf("key %s: %s arrived after %s", k, m.Value, last[k])
		}
		last[k] = string(m.Value)
	}
	// Seven keys over three partitions: all on one partition would mean no hashing at all.
	if len(partitionsUsed) < 2 {
		t.Errorf("all keys landed on partitions %v; the balancer is not spreading keys", partitionsUsed)
	}
}
