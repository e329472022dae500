// Package kafka holds PartnerStream's Kafka plumbing: the topic names, the connection
// settings, topic provisioning, a readiness probe, and the producer and consumer every
// component builds on, so that all of them agree on acks, partitioning and commit semantics.
//
// The clients are segmentio/kafka-go. They run against a real Kafka in production and
// against the embedded kfake broker (package embedded) in `partnerstream dev` and in tests,
// so nothing here may depend on features kfake lacks or kafka-go gets wrong: no
// transactions, no idempotent producer, no ReadCommitted isolation. Consumers therefore see
// at-least-once delivery and must deduplicate on the message id.
package kafka

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"time"

	kafkago "github.com/segmentio/kafka-go"
)

// Topic names are fixed (docs/architecture.md, "Topics"); they are constants rather than
// configuration so producers and consumers cannot drift apart.
const (
	TopicClicks = "partnerstream.clicks"
	TopicEvents = "partnerstream.events"
)

// DefaultClientID is sent when Config.ClientID is empty, so broker logs and quotas can still
// tell PartnerStream apart from other clients.
const DefaultClientID = "partnerstream"

// dialTimeout caps a TCP connect when the caller's context has no deadline: an unroutable
// broker address must not hang a component forever.
const dialTimeout = 10 * time.Second

// Config is how a component reaches Kafka and how the topics it provisions are shaped.
type Config struct {
	// Brokers are bootstrap addresses (host:port); any reachable one is enough.
	Brokers []string
	// Partitions bounds the parallelism of every consumer group, so it is set for the
	// largest number of ingest or deliver replicas expected.
	Partitions int
	// ReplicationFactor must not exceed the number of brokers (1 for the embedded broker).
	ReplicationFactor int
	// MinInsyncReplicas is the topic config min.insync.replicas of the topics created: how
	// many replicas must hold a record before an acks=all produce succeeds. 0 takes
	// ReplicationFactor-1, at least 1 and at most 2: one broker may be down and a record
	// acknowledged is still on two brokers whenever there are three or more.
	MinInsyncReplicas int
	// Retention is how long the brokers keep messages (topic config retention.ms).
	Retention time.Duration
	// ClientID identifies the component to the brokers; DefaultClientID when empty.
	ClientID string
	// Compression of produced record batches: none (the default), gzip, snappy, lz4 or zstd.
	Compression string
	// Security is TLS and SASL (NewSecurity); nil is plaintext without authentication.
	Security *Security
}

// Compressions are the values Config.Compression takes.
var Compressions = []string{"none", "gzip", "snappy", "lz4", "zstd"}

// compression is the codec of Config.Compression (validated); 0 is none.
func (c Config) compression() kafkago.Compression {
	var codec kafkago.Compression
	if c.Compression != "" && c.Compression != "none" {
		_ = codec.UnmarshalText([]byte(c.Compression))
	}
	return codec
}

// Validate reports every invalid field at once, each message naming its field, so an
// operator fixes the configuration in one round.
func (c Config) Validate() error {
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("kafka: brokers: at least one broker address is required"))
	}
	for _, b := range c.Brokers {
		if err := validateHostPort(b); err != nil {
			errs = append(errs, fmt.Errorf("kafka: brokers: %q: %w", b, err))
		}
	}
	if c.Partitions < 1 {
		errs = append(errs, fmt.Errorf("kafka: partitions: must be at least 1, got %d", c.Partitions))
	}
	if c.ReplicationFactor < 1 {
		errs = append(errs, fmt.Errorf("kafka: replication factor: must be at least 1, got %d", c.ReplicationFactor))
	}
	if c.MinInsyncReplicas < 0 || c.MinInsyncReplicas > max(c.ReplicationFactor, 1) {
		errs = append(errs, fmt.Errorf("kafka: min insync replicas: must be between 0 (automatic) and the replication factor %d, got %d",
			c.ReplicationFactor, c.MinInsyncReplicas))
	}
	if c.Retention <= 0 {
		errs = append(errs, fmt.Errorf("kafka: retention: must be positive, got %s", c.Retention))
	}
	if c.Compression != "" && !slices.Contains(Compressions, c.Compression) {
		errs = append(errs, fmt.Errorf("kafka: compression: must be one of %v, got %q", Compressions, c.Compression))
	}
	return errors.Join(errs...)
}

func validateHostPort(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("not host:port: %w", err)
	}
	if host == "" {
		return errors.New("host is empty")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("port %q is not a number in 1..65535", port)
	}
	return nil
}

func (c Config) clientID() string {
	if c.ClientID == "" {
		return DefaultClientID
	}
	return c.ClientID
}

// minInsyncReplicas is MinInsyncReplicas with 0 resolved.
func (c Config) minInsyncReplicas() int {
	if c.MinInsyncReplicas > 0 {
		return c.MinInsyncReplicas
	}
	return min(max(c.ReplicationFactor-1, 1), 2)
}

// Ping checks that Kafka answers: it dials cfg's brokers in turn (with its TLS and SASL) and
// reads the cluster metadata from the first that accepts. It is the /readyz probe, so it is
// bounded by ctx and a refused connection fails at once rather than retrying.
func Ping(ctx context.Context, cfg Config) error {
	conn, err := dialAny(ctx, cfg.dialer(), cfg.Brokers)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := withConn(ctx, conn, conn.Brokers); err != nil {
		return fmt.Errorf("kafka: ping %s: read metadata: %w", conn.RemoteAddr(), err)
	}
	return nil
}

// dialAny connects to the first broker that accepts. The error names every broker tried, so
// a readiness failure says which addresses were wrong.
func dialAny(ctx context.Context, d *kafkago.Dialer, brokers []string) (*kafkago.Conn, error) {
	if len(brokers) == 0 {
		return nil, errors.New("kafka: no broker addresses")
	}
	var errs []error
	for _, b := range brokers {
		conn, err := d.DialContext(ctx, "tcp", b)
		if err == nil {
			return conn, nil
		}
		errs = append(errs, fmt.Errorf("kafka: dial %s: %w", b, err))
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// withConn runs a blocking kafka-go Conn operation under ctx. Conn methods take no context,
// only socket deadlines, so the ctx deadline becomes the socket deadline and a cancellation
// forces an immediate one.
func withConn[T any](ctx context.Context, conn *kafkago.Conn, op func() (T, error)) (T, error) {
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	v, err := op()
	if err != nil {
		if cerr := contextErr(ctx); cerr != nil {
			// Name the context, not just "i/o timeout", so callers can errors.Is it.
			err = fmt.Errorf("%w: %w", cerr, err)
		}
	}
	return v, err
}

// contextErr is ctx.Err(), except that it already reports DeadlineExceeded when the socket
// deadline (the same instant) fired before the context's own timer did.
func contextErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}
