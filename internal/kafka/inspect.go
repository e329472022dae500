package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
)

// Message is a record as stored on a partition.
type Message struct {
	Partition  int
	Offset     int64
	Key, Value []byte
}

// inspectTimeout bounds each request of the inspection calls below.
const inspectTimeout = 10 * time.Second

// client is a kafka-go client for one inspection; done closes its connections, which would
// otherwise stay open, each with its goroutines.
func (c Config) client() (client *kafkago.Client, done func()) {
	t := c.transport()
	return &kafkago.Client{Addr: kafkago.TCP(c.Brokers...), Timeout: inspectTimeout, Transport: t}, t.CloseIdleConnections
}

// Partitions lists the partitions of topic.
func Partitions(ctx context.Context, cfg Config, topic string) ([]int, error) {
	c, done := cfg.client()
	defer done()
	md, err := c.Metadata(ctx, &kafkago.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return nil, fmt.Errorf("kafka: read the partitions of %s: %w", topic, err)
	}
	for _, t := range md.Topics {
		if t.Name != topic {
			continue
		}
		if t.Error != nil {
			return nil, fmt.Errorf("kafka: read the partitions of %s: %w", topic, t.Error)
		}
		parts := make([]int, len(t.Partitions))
		for i, p := range t.Partitions {
			parts[i] = p.ID
		}
		return parts, nil
	}
	return nil, fmt.Errorf("kafka: read the partitions of %s: %w", topic, kafkago.UnknownTopicOrPartition)
}

// Offsets returns, per partition of topic, the offset its next message will get (-1 for a
// partition the broker answered with an error) and the offset group has committed (absent
// when it has committed none): what an operator or a test compares to see a consumer group
// caught up.
func Offsets(ctx context.Context, cfg Config, group, topic string) (ends, committed map[int]int64, err error) {
	parts, err := Partitions(ctx, cfg, topic)
	if err != nil {
		return nil, nil, err
	}
	reqs := make([]kafkago.OffsetRequest, len(parts))
	for i, p := range parts {
		reqs[i] = kafkago.LastOffsetOf(p)
	}
	c, done := cfg.client()
	defer done()
	listed, err := c.ListOffsets(ctx, &kafkago.ListOffsetsRequest{Topics: map[string][]kafkago.OffsetRequest{topic: reqs}})
	if err != nil {
		return nil, nil, fmt.Errorf("kafka: list the offsets of %s: %w", topic, err)
	}
	ends = map[int]int64{}
	for _, p := range listed.Topics[topic] {
		ends[p.Partition] = p.LastOffset
		if p.Error != nil {
			ends[p.Partition] = -1
		}
	}
	fetched, err := c.OffsetFetch(ctx, &kafkago.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: parts}})
	if err == nil {
		err = fetched.Error
	}
	if err != nil {
		return nil, nil, fmt.Errorf("kafka: read the offsets %s committed on %s: %w", group, topic, err)
	}
	committed = map[int]int64{}
	for _, p := range fetched.Topics[topic] {
		if p.Error == nil && p.CommittedOffset >= 0 {
			committed[p.Partition] = p.CommittedOffset
		}
	}
	return ends, committed, nil
}

// CommitOffsets commits offsets for group on topic from outside the group, as an operator
// resetting a group does; the group must have no members.
func CommitOffsets(ctx context.Context, cfg Config, group, topic string, offsets map[int]int64) error {
	commits := make([]kafkago.OffsetCommit, 0, len(offsets))
	for p, o := range offsets {
		commits = append(commits, kafkago.OffsetCommit{Partition: p, Offset: o})
	}
	c, done := cfg.client()
	defer done()
	res, err := c.OffsetCommit(ctx, &kafkago.OffsetCommitRequest{
		GroupID: group, GenerationID: -1, Topics: map[string][]kafkago.OffsetCommit{topic: commits}})
	if err != nil {
		return fmt.Errorf("kafka: commit offsets of %s on %s: %w", group, topic, err)
	}
	var errs []error
	for _, p := range res.Topics[topic] {
		if p.Error != nil {
			errs = append(errs, fmt.Errorf("kafka: commit partition %d of %s for %s: %w", p.Partition, topic, group, p.Error))
		}
	}
	return errors.Join(errs...)
}

// ReadAll returns every message topic holds now, partition by partition in offset order.
func ReadAll(ctx context.Context, cfg Config, topic string) ([]Message, error) {
	parts, err := Partitions(ctx, cfg, topic)
	if err != nil {
		return nil, err
	}
	c, done := cfg.client()
	defer done()
	var out []Message
	for _, p := range parts {
		listed, err := c.ListOffsets(ctx, &kafkago.ListOffsetsRequest{Topics: map[string][]kafkago.OffsetRequest{
			topic: {kafkago.FirstOffsetOf(p), kafkago.LastOffsetOf(p)}}})
		if err != nil {
			return nil, fmt.Errorf("kafka: list the offsets of %s/%d: %w", topic, p, err)
		}
		first, last := int64(0), int64(0)
		for _, o := range listed.Topics[topic] {
			if o.Error != nil {
				return nil, fmt.Errorf("kafka: list the offsets of %s/%d: %w", topic, p, o.Error)
			}
			first, last = o.FirstOffset, o.LastOffset
		}
		for offset := first; offset < last; {
			res, err := c.Fetch(ctx, &kafkago.FetchRequest{Topic: topic, Partition: p, Offset: offset,
				MinBytes: 1, MaxBytes: 10 << 20, MaxWait: 100 * time.Millisecond})
			if err == nil {
				err = res.Error
			}
			if err != nil {
				return nil, fmt.Errorf("kafka: fetch %s/%d at %d: %w", topic, p, offset, err)
			}
			for {
				r, err := res.Records.ReadRecord()
				if err != nil {
					break
				}
				m := Message{Partition: p, Offset: r.Offset}
				if r.Key != nil {
					m.Key, _ = protocol.ReadAll(r.Key)
				}
				if r.Value != nil {
					m.Value, _ = protocol.ReadAll(r.Value)
				}
				if r.Offset >= offset {
					out = append(out, m)
					offset = r.Offset + 1
				}
			}
		}
	}
	return out, nil
}
