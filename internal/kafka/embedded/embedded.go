// Package embedded runs a Kafka-protocol broker inside the process, built on franz-go's
// kfake. It exists so that `partnerstream dev` and the test suites have a Kafka without a
// JVM, a container or a network: this machine class has neither a Kafka package nor Docker.
// Production never uses it; there the components point at a real Kafka cluster through
// their configuration.
//
// By default the broker is a single node (so topics need replication factor 1) without TLS
// or authentication, and therefore listens on loopback only. Options can make it a cluster
// of several brokers (to create topics with replication factor 3), serve TLS, and require
// SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512): what the tests of those settings run against.
// Its replicas are bookkeeping only (one process holds every copy), so it proves that
// topics are created and written as configured, not that a lost broker loses nothing. Topics are not auto-created,
// exactly like a production cluster configured for PartnerStream: run kafka.EnsureTopics
// first. With a DataDir it persists topics, messages and committed group offsets across a
// Close and Start on the same directory; without one everything lives in memory.
//
// kfake implements the wire protocol faithfully enough for segmentio/kafka-go, but the
// package kafka rules still apply: no transactions, no idempotent producer, no
// ReadCommitted.
package embedded

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kfake"
)

// DefaultAddr is used when Options.Addr is empty: a free loopback port, so parallel tests
// and a running `partnerstream dev` never collide.
const DefaultAddr = "127.0.0.1:0"

// Options configure Start.
type Options struct {
	// Addr is the loopback host:port to listen on, e.g. "127.0.0.1:9092"; port 0 picks a
	// free one (read it back with Addrs). Hosts other than 127.0.0.1 / localhost are
	// refused.
	Addr string
	// AnyHost lets Addr name an address other than loopback: a local cluster's node
	// address, which only this machine and its pods reach. The broker has no
	// authentication: never give it an address another machine can reach.
	AnyHost bool
	// DataDir makes the broker durable across restarts. Empty keeps all data in memory.
	// One broker at a time may use a directory.
	DataDir string
	// Logger receives kfake's logs; nil discards them. kfake logs every request at its info
	// level, so that level is mapped to slog Debug.
	Logger *slog.Logger
	// Brokers is how many brokers the cluster has (default 1). They listen on consecutive
	// ports from Addr's, or on free ports when it is 0.
	Brokers int
	// TLS makes every broker serve TLS with this configuration (its Certificates).
	TLS *tls.Config
	// Users turns SASL on: a client must authenticate as one of them.
	Users []User
}

// User is a SASL user of the embedded broker.
type User struct {
	// Mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
	Mechanism, Name, Password string
}

// Broker is a running embedded broker.
type Broker struct {
	cluster *kfake.Cluster
	unlock  func()
	once    sync.Once
}

// Start launches the broker and returns once it accepts connections.
func Start(opts Options) (*Broker, error) {
	host, port, err := listenAddr(opts.Addr, opts.AnyHost)
	if err != nil {
		return nil, err
	}
	n := max(opts.Brokers, 1)
	ports := make([]int, n)
	for i := range ports {
		if port != 0 {
			ports[i] = port + i
		}
	}
	if ports[n-1] > 65535 {
		return nil, fmt.Errorf("embedded: %d brokers from port %d run past port 65535", n, port)
	}
	kopts := []kfake.Opt{
		kfake.NumBrokers(n),
		kfake.Ports(ports...),
		// kfake binds 127.0.0.1 today; binding it ourselves keeps the loopback-only
		// guarantee independent of kfake's default.
		kfake.ListenFn(func(network, address string) (net.Listener, error) {
			_, p, err := net.SplitHostPort(address)
			if err != nil {
				return nil, err
			}
			return net.Listen(network, net.JoinHostPort(host, p))
		}),
	}
	if opts.Logger != nil {
		kopts = append(kopts, kfake.WithLogger(slogAdapter{opts.Logger}))
	}
	if opts.TLS != nil {
		kopts = append(kopts, kfake.TLS(opts.TLS))
	}
	if len(opts.Users) > 0 {
		kopts = append(kopts, kfake.EnableSASL())
		for _, u := range opts.Users {
			switch u.Mechanism {
			case "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512":
			default:
				return nil, fmt.Errorf("embedded: user %q: mechanism %q is not PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", u.Name, u.Mechanism)
			}
			// Superusers: ACLs are off, and a plain user would be refused everything.
			kopts = append(kopts, kfake.Superuser(u.Mechanism, u.Name, u.Password))
		}
	}

	unlock := func() {}
	if opts.DataDir != "" {
		// kfake does not guard its directory: two brokers on one DataDir would interleave
		// writes to the same segment files and corrupt the log.
		if err := os.MkdirAll(opts.DataDir, 0o750); err != nil {
			return nil, fmt.Errorf("embedded: create data dir: %w", err)
		}
		if unlock, err = lockDir(opts.DataDir); err != nil {
			return nil, fmt.Errorf("embedded: data dir %s: %w", opts.DataDir, err)
		}
		kopts = append(kopts, kfake.DataDir(opts.DataDir))
	}

	cluster, err := kfake.NewCluster(kopts...)
	if err != nil {
		unlock()
		return nil, fmt.Errorf("embedded: start broker on %s: %w", net.JoinHostPort(host, strconv.Itoa(port)), err)
	}
	return &Broker{cluster: cluster, unlock: unlock}, nil
}

// Addrs returns the host:port of each broker, with the real ports when Addr asked for port
// 0. Pass them as kafka.Config.Brokers.
func (b *Broker) Addrs() []string { return b.cluster.ListenAddrs() }

// Close stops the broker and, with a DataDir, flushes its state to disk; a later Start on
// the same directory resumes from it. Close is idempotent.
func (b *Broker) Close() {
	b.once.Do(func() {
		b.cluster.Close()
		b.unlock()
	})
}

// listenAddr splits addr and, unless anyHost, refuses anything that is not IPv4 loopback:
// the broker has no authentication, so reachable from the network it would accept anyone's
// messages.
func listenAddr(addr string, anyHost bool) (host string, port int, err error) {
	if addr == "" {
		addr = DefaultAddr
	}
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, fmt.Errorf("embedded: address %q: %w", addr, err)
	}
	port, err = strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("embedded: address %q: port is not a number in 0..65535", addr)
	}
	if h == "localhost" {
		h = "127.0.0.1"
	}
	// Only IPv4 loopback: it is what kfake binds by default and advertises in metadata,
	// and the only path the tests exercise.
	if ip := net.ParseIP(h); ip == nil || ip.To4() == nil || (!ip.IsLoopback() && !anyHost) {
		return "", 0, fmt.Errorf("embedded: address %q: host must be 127.0.0.1 or localhost; the embedded broker has no authentication and only listens on loopback", addr)
	}
	return h, port, nil
}

// slogAdapter forwards kfake's printf-style logs to slog.
type slogAdapter struct{ l *slog.Logger }

func (a slogAdapter) Logf(level kfake.LogLevel, format string, args ...any) {
	var lvl slog.Level
	switch level {
	case kfake.LogLevelError:
		lvl = slog.LevelError
	case kfake.LogLevelWarn:
		lvl = slog.LevelWarn
	default:
		lvl = slog.LevelDebug
	}
	// Formatting every request log line is the expensive part; skip it when the level is off.
	if !a.l.Enabled(context.Background(), lvl) {
		return
	}
	a.l.Log(context.Background(), lvl, fmt.Sprintf(format, args...), slog.String("component", "kafka-embedded"))
}

// errLocked is returned when another broker holds the data dir.
var errLocked = errors.New("in use by another embedded broker")
