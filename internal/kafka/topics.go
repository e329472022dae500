package kafka

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	kafkago "github.com/segmentio/kafka-go"
)

// topicPollInterval paces the metadata polling after a create: a broker learns of a new
// topic within milliseconds, and the poll is bounded by the caller's context anyway.
const topicPollInterval = 50 * time.Millisecond

// EnsureTopics creates the topics that do not exist yet with cfg's partitions, replication
// factor and retention, then waits until the cluster metadata lists every one of them with a
// leader for each partition, so a writer started right after does not fail with an unknown
// topic. It is safe to run on every start of every component.
//
// An existing topic is left exactly as it is, even if its partitions or retention differ
// from cfg: changing a live topic (partitions only grow, and regrowing moves keys between
// partitions) is an operator decision, not something a pod restart should do.
func EnsureTopics(ctx context.Context, cfg Config, topics ...string) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if len(topics) == 0 {
		return nil
	}
	d := cfg.dialer()
	conn, err := dialAny(ctx, d, cfg.Brokers)
	if err != nil {
		return err
	}
	defer conn.Close()

	// Only the controller accepts CreateTopics; any other broker answers NOT_CONTROLLER.
	ctrl, err := withConn(ctx, conn, conn.Controller)
	if err != nil {
		return fmt.Errorf("kafka: find controller: %w", err)
	}
	ctrlAddr := net.JoinHostPort(ctrl.Host, strconv.Itoa(ctrl.Port))
	ctrlConn, err := d.DialContext(ctx, "tcp", ctrlAddr)
	if err != nil {
		return fmt.Errorf("kafka: dial controller %s: %w", ctrlAddr, err)
	}
	defer ctrlConn.Close()

	configs := []kafkago.ConfigEntry{
		{ConfigName: "retention.ms", ConfigValue: strconv.FormatInt(cfg.Retention.Milliseconds(), 10)},
		// Producers write with acks=all; without this a leader alone in its ISR would
		// acknowledge, and losing it would lose records the outbox already marked published.
		{ConfigName: "min.insync.replicas", ConfigValue: strconv.Itoa(cfg.minInsyncReplicas())},
	}
	for _, t := range topics {
		tc := kafkago.TopicConfig{
			Topic:             t,
			NumPartitions:     cfg.Partitions,
			ReplicationFactor: cfg.ReplicationFactor,
			ConfigEntries:     configs,
		}
		// One topic per request so the error names the topic that failed; kafka-go already
		// treats TOPIC_ALREADY_EXISTS as success, which is what makes this idempotent.
		if _, err := withConn(ctx, ctrlConn, func() (struct{}, error) {
			return struct{}{}, ctrlConn.CreateTopics(tc)
		}); err != nil {
			return fmt.Errorf("kafka: create topic %s: %w", t, err)
		}
	}
	return waitForTopics(ctx, conn, topics)
}

// waitForTopics polls the bootstrap broker, not the controller, because that is where
// clients look topics up and a real cluster propagates metadata to it with a delay.
func waitForTopics(ctx context.Context, conn *kafkago.Conn, topics []string) error {
	tick := time.NewTicker(topicPollInterval)
	defer tick.Stop()
	for {
		// A metadata error (e.g. UNKNOWN_TOPIC_OR_PARTITION while the topic propagates) is
		// the condition being waited out, so it only matters when the wait ends.
		parts, err := withConn(ctx, conn, func() ([]kafkago.Partition, error) {
			return conn.ReadPartitions(topics...)
		})
		if err == nil {
			missing := missingTopics(topics, parts)
			if len(missing) == 0 {
				return nil
			}
			err = fmt.Errorf("not yet in metadata: %v", missing)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kafka: wait for topics %v: %w", topics, errors.Join(ctx.Err(), err))
		case <-tick.C:
		}
	}
}

// missingTopics returns the topics that have no partition yet, or a partition without a
// leader (a produce to it would fail).
func missingTopics(topics []string, parts []kafkago.Partition) []string {
	ready := make(map[string]bool, len(topics))
	for _, p := range parts {
		ok, seen := ready[p.Topic]
		ready[p.Topic] = (ok || !seen) && p.Leader.Host != ""
	}
	var missing []string
	for _, t := range topics {
		if !ready[t] {
			missing = append(missing, t)
		}
	}
	return missing
}
