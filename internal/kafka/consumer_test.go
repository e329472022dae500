package kafka_test

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/kafka"
)

// collector is a consumer's caller that keeps the first want messages, commits them when
// told to, and then leaves the group.
type collector struct {
	want   int
	commit bool
	leave  context.CancelFunc

	mu       sync.Mutex
	got      []kafka.Message
	session  *kafka.Session
	revoked  int
	commitEr error
}

func (c *collector) assigned(s *kafka.Session) kafka.Claim {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.session = s
	return c
}

func (c *collector) Fetched(_ context.Context, f *kafka.Fetch) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for offset, value := range f.Records() {
		if len(c.got) < c.want {
			c.got = append(c.got, kafka.Message{Partition: f.Partition, Offset: offset, Value: bytes.Clone(value)})
		}
	}
	if len(c.got) < c.want {
		return
	}
	if c.commit {
		next := map[int]int64{}
		for _, m := range c.got {
			next[m.Partition] = max(next[m.Partition], m.Offset+1)
		}
		c.commitEr = c.session.Commit(next)
	}
	c.leave()
}

func (c *collector) Revoked() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.revoked++
}

// consume joins group and returns the first n messages it is handed, committed when
// commit, once the consumer has left the group.
func consume(ctx context.Context, t *testing.T, cfg kafka.Config, topic, group string, n int, commit bool) []kafka.Message {
	t.Helper()
	c, err := kafka.NewConsumer(cfg, kafka.ConsumerOptions{Group: group, Topic: topic, MinBytes: 1, MaxBytes: 1 << 20,
		MaxWait: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	col := &collector{want: n, commit: commit, leave: cancel}
	if err := c.Run(cctx, col.assigned); err != nil {
		t.Fatalf("run the consumer: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatalf("got %d of %d messages before the deadline", len(col.got), n)
	}
	if col.commitEr != nil {
		t.Fatalf("commit: %v", col.commitEr)
	}
	if col.revoked == 0 {
		t.Fatal("the consumer left without revoking its partitions")
	}
	return col.got
}

// Keyed messages come back intact, in order per key and on one partition per key, and a
// group's committed offsets survive its members: a new member sees only what was produced
// after the commit.
func TestConsumerRoundTripAndGroupResume(t *testing.T) {
	cfg, ctx, w := newTopic(t, kafka.TopicEvents, kafka.ProducerOptions{})
	const group = "roundtrip"

	first := keyedMessages("first", 30)
	produce(ctx, t, w, first)
	assertSameMessages(t, consume(ctx, t, cfg, kafka.TopicEvents, group, len(first), true), first)
	stored, err := kafka.ReadAll(ctx, cfg, kafka.TopicEvents)
	if err != nil {
		t.Fatal(err)
	}
	assertSameMessages(t, stored, first)
	assertKeysStayOnOnePartitionInOrder(t, stored)

	second := keyedMessages("second", 10)
	produce(ctx, t, w, second)
	// Only len(second) messages exist past the commit; had the commit not held, the
	// consumer would restart at the first offset and return "first" messages here.
	assertSameMessages(t, consume(ctx, t, cfg, kafka.TopicEvents, group, len(second), true), second)
	ends, committed, err := kafka.Offsets(ctx, cfg, group, kafka.TopicEvents)
	if err != nil {
		t.Fatal(err)
	}
	for p, end := range ends {
		if end > 0 && committed[p] != end {
			t.Errorf("partition %d: committed %d of %d", p, committed[p], end)
		}
	}
}

// What a member was handed but did not commit goes to the next member.
func TestConsumerRedeliversUncommittedMessages(t *testing.T) {
	cfg, ctx, w := newTopic(t, kafka.TopicClicks, kafka.ProducerOptions{})
	msgs := keyedMessages("click", 5)
	produce(ctx, t, w, msgs)

	consume(ctx, t, cfg, kafka.TopicClicks, "uncommitted", len(msgs), false)
	assertSameMessages(t, consume(ctx, t, cfg, kafka.TopicClicks, "uncommitted", len(msgs), true), msgs)
}

func TestANewConsumerIsRefusedBadOptions(t *testing.T) {
	cfg := testConfig([]string{"127.0.0.1:9092"})
	for _, o := range []kafka.ConsumerOptions{
		{Topic: kafka.TopicClicks, MinBytes: 1, MaxBytes: 1, MaxWait: time.Second},
		{Group: "g", MinBytes: 1, MaxBytes: 1, MaxWait: time.Second},
		{Group: "g", Topic: kafka.TopicClicks, MinBytes: 2, MaxBytes: 1, MaxWait: time.Second},
		{Group: "g", Topic: kafka.TopicClicks, MinBytes: 1, MaxBytes: 1},
	} {
		if _, err := kafka.NewConsumer(cfg, o); err == nil {
			t.Errorf("options %+v accepted", o)
		}
	}
}
