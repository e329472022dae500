package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	kafkago "github.com/segmentio/kafka-go"
)

// Consumer group timings. A crashed member's partitions move to the others after
// sessionTimeout. When a generation ends, heartbeats stop until the member rejoins, so its
// caller must store and commit what it holds and return from Revoked within sessionTimeout,
// or the group would go on without it while it still writes.
const (
	heartbeatInterval = time.Second
	sessionTimeout    = 10 * time.Second
	rebalanceTimeout  = 30 * time.Second
)

// fetchTimeout is how long a broker may take to answer a fetch, beyond the wait it was
// allowed.
const fetchTimeout = 10 * time.Second

// ConsumerOptions shape a Consumer.
type ConsumerOptions struct {
	// Group is the consumer group; Topic the one topic it reads.
	Group, Topic string
	// MinBytes and MaxWait shape each fetch from a partition: the broker answers once it has
	// MinBytes or once MaxWait has passed. MaxBytes bounds one fetch, and so what a
	// partition's handler gets at once.
	MinBytes, MaxBytes int
	MaxWait            time.Duration
	// Failed hears of each failure to join the group or to fetch, and, with nil, of the first
	// success after some. The consumer retries either way.
	Failed func(error)
	Log    *slog.Logger
}

// Consumer reads one topic as a member of a consumer group. It hands its caller whole fetches,
// one goroutine per assigned partition, and commits only what the caller says is done. A
// partition changes hands only after the caller has let go of it (Claim.Revoked returned),
// so a caller that stores a batch before committing it never has a partition's messages in
// two members' hands at once.
//
// It uses kafka-go's ConsumerGroup rather than the group Reader because the Reader cannot tell
// its caller that a partition moved to another member, and reads partitions through a Conn of
// its own because the partition Reader hands over every message through a channel, sets a
// read deadline for each, and allocates its key and value: here a fetch's values are read
// into one reused buffer.
type Consumer struct {
	cfg Config
	o   ConsumerOptions
}

// A Claim is what the caller does with one generation's partitions.
type Claim interface {
	// Fetched hands over one fetch of one partition, from that partition's goroutine; the
	// partition's next fetch waits until it returns. The fetch's records must be read
	// during the call. ctx ends when the generation does.
	Fetched(ctx context.Context, f *Fetch)
	// Revoked ends the generation, once no Fetched call is running. It returns when
	// everything the caller will commit of the generation is committed: the partitions move
	// on after that.
	Revoked()
}

// Session is one generation of the group: the partitions this member reads until it ends.
type Session struct {
	// Partitions are the ones this member reads in this generation.
	Partitions []int
	ctx        context.Context
	gen        *kafkago.Generation
	topic      string
}

// Context ends when the generation does.
func (s *Session) Context() context.Context { return s.ctx }

// Commit records, per partition, the offset of the next message to read: everything before
// it is done.
func (s *Session) Commit(offsets map[int]int64) error {
	if err := s.gen.CommitOffsets(map[string]map[int]int64{s.topic: offsets}); err != nil {
		return fmt.Errorf("kafka: commit %s: %w", s.topic, err)
	}
	return nil
}

// NewConsumer validates the configuration; Run joins the group.
func NewConsumer(cfg Config, o ConsumerOptions) (*Consumer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if o.Group == "" || o.Topic == "" {
		return nil, errors.New("kafka: a consumer needs a group and a topic")
	}
	if o.MinBytes < 1 || o.MaxBytes < o.MinBytes || o.MaxWait < time.Millisecond {
		return nil, fmt.Errorf("kafka: consumer of %s: min bytes %d, max bytes %d and max wait %s are out of range",
			o.Topic, o.MinBytes, o.MaxBytes, o.MaxWait)
	}
	if o.Failed == nil {
		o.Failed = func(error) {}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return &Consumer{cfg: cfg, o: o}, nil
}

// Run takes part in the group until ctx ends. For each generation it calls assigned, then
// hands each fetch to the claim it returned, and calls its Revoked once the generation ends;
// after ctx ends it does so for the generation in hand and leaves the group.
func (c *Consumer) Run(ctx context.Context, assigned func(*Session) Claim) error {
	group, err := kafkago.NewConsumerGroup(kafkago.ConsumerGroupConfig{
		ID: c.o.Group, Brokers: c.cfg.Brokers, Dialer: c.cfg.dialer(), Topics: []string{c.o.Topic},
		HeartbeatInterval: heartbeatInterval, SessionTimeout: sessionTimeout, RebalanceTimeout: rebalanceTimeout,
		JoinGroupBackoff: time.Second, WatchPartitionChanges: true, StartOffset: kafkago.FirstOffset,
		// Committed offsets must outlive the messages (kafka-go asks for 24 h), or a topic idle
		// for a day would be read again from its start.
		RetentionTime: max(c.cfg.Retention, 24*time.Hour),
	})
	if err != nil {
		return fmt.Errorf("kafka: consumer group %s: %w", c.o.Group, err)
	}
	// Close ends the generation in hand and waits for its goroutines (Revoked included),
	// then leaves the group.
	stop := context.AfterFunc(ctx, func() { _ = group.Close() })
	defer stop()
	failing := false
	for {
		gen, err := group.Next(context.WithoutCancel(ctx))
		switch {
		case errors.Is(err, kafkago.ErrGroupClosed):
			return group.Close()
		case err != nil:
			failing = true
			c.o.Failed(fmt.Errorf("kafka: join group %s: %w", c.o.Group, err))
			c.o.Log.Warn("joining the consumer group failed; retrying", "err", err)
			continue
		}
		if failing {
			failing = false
			c.o.Failed(nil)
		}
		c.start(gen, assigned)
	}
}

// start runs one generation: the claim's partitions are fetched in parallel, and Revoked is
// called inside the generation so that kafka-go rejoins only after it returned.
func (c *Consumer) start(gen *kafkago.Generation, assigned func(*Session) Claim) {
	parts := gen.Assignments[c.o.Topic]
	gen.Start(func(ctx context.Context) {
		s := &Session{ctx: ctx, gen: gen, topic: c.o.Topic}
		for _, a := range parts {
			s.Partitions = append(s.Partitions, a.ID)
		}
		c.o.Log.Info("consuming", "generation", gen.ID, "partitions", len(parts))
		claim := assigned(s)
		var wg sync.WaitGroup
		for _, a := range parts {
			wg.Go(func() { c.fetchLoop(ctx, a.ID, a.Offset, claim) })
		}
		wg.Wait()
		claim.Revoked()
	})
}
