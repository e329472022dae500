// Package delivery sends signed webhooks and postbacks with durable retries
// (docs/architecture.md, "Delivery: retries, limits and the SSRF guard"; docs/webhooks.md,
// "Delivery").
//
// The deliver component consumes partnerstream.events in its own consumer group. For each
// event it records one deliveries row per target (the webhooks of both companies subscribed
// to the type; for commission.status_changed also both companies' postback URLs), in one
// batch insert per batch of events, before it commits the batch's offsets: a crash replays
// the batch and the unique (event_id, kind, target_id) makes the replay record nothing.
//
// Workers then claim due rows (FOR UPDATE SKIP LOCKED; the claim moves next_attempt_at one
// lease ahead, so the rows of a killed worker come back when the lease ends), send them
// signed with every live key of the target as it is at send time, and record each attempt.
// Retries are rows with a due time, never timers in memory.
package delivery

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/partnerstream/partnerstream/internal/health"
	"github.com/partnerstream/partnerstream/internal/kafka"
	"github.com/partnerstream/partnerstream/internal/run"
	"github.com/partnerstream/partnerstream/internal/webhooks/signing"
)

// Defaults of Options.
const (
	DefaultGroup        = "partnerstream-deliver"
	DefaultWorkers      = 64
	DefaultPerTarget    = 8
	DefaultClaimBatch   = 256
	DefaultLease        = 2 * time.Minute
	DefaultPollInterval = 250 * time.Millisecond
	DefaultConsumeBatch = 1000
)

// Subscriptions finds the webhook subscriptions of a company to an event type, with their
// live signing keys; *webhooks.Cache is one.
type Subscriptions interface {
	Targets(companyID, eventType string) []signing.Target
	// WaitForSync blocks until the subscriptions are all known: before, a company would
	// seem to have none and its events would be dropped.
	WaitForSync(ctx context.Context) error
}

// PostbackKeys finds a company's postback URL and the keys that sign it at now;
// *postbacks.Service is one. It returns postbacks.ErrNotConfigured when the company has no
// postback URL.
type PostbackKeys interface {
	SigningKeys(ctx context.Context, companyID string, now time.Time) (string, []signing.HMACKey, error)
}

// Suspender disables a webhook subscription whose receiver answered 410 Gone or stayed dead
// (disable.go), saying why: "<Reason>: <message>". NewKubeSuspender sets spec.suspend and
// the reason on the Webhook resource.
type Suspender interface {
	SuspendWebhook(ctx context.Context, companyID, webhookID, reason string) error
}

// Options configure the deliver component.
type Options struct {
	DB    *pgxpool.Pool
	Kafka kafka.Config
	// Group is the consumer group on partnerstream.events (DefaultGroup when empty).
	Group string
	// Subscriptions are the webhook subscriptions; nil when there is no Kubernetes API
	// (`dev` without a kubeconfig): only postbacks are delivered.
	Subscriptions Subscriptions
	// Postbacks are the companies' postback URLs; nil delivers no postbacks.
	Postbacks PostbackKeys
	// Suspender disables a subscription answered with 410; nil only fails the delivery.
	Suspender Suspender
	// AllowList are the address ranges a receiver may resolve to although they are not
	// public (loopback, private, ...): the SSRF guard refuses every other such address.
	AllowList []netip.Prefix
	// RootCAs are the CAs receivers' certificates are verified with; nil means the system's.
	// An operator adds a private CA here for receivers inside its own network.
	RootCAs *x509.CertPool
	// Workers is how many attempts run at once in this process (DefaultWorkers).
	Workers int
	// PerTarget is how many attempts to one target (webhook or postback URL) run at once
	// in this process (DefaultPerTarget), so one slow receiver cannot take every worker.
	PerTarget int
	// ClaimBatch is the most due deliveries claimed by one query (DefaultClaimBatch).
	ClaimBatch int
	// Lease is how long a claimed delivery stays invisible to other workers; it comes back
	// after that if its worker died (DefaultLease). It must exceed an attempt (15 s).
	Lease time.Duration
	// PollInterval is how often workers look for due deliveries when nothing woke them
	// (DefaultPollInterval): it bounds the lateness of a retry.
	PollInterval time.Duration
	// DisableAfter is how long a target may fail without a success before it is disabled
	// (DefaultDisableAfter); negative never disables one.
	DisableAfter time.Duration
	// ConsumeBatch is the most events recorded in one insert (DefaultConsumeBatch).
	ConsumeBatch int
	// Now is the clock of due times, signatures and key expiry; time.Now when nil.
	Now func() time.Time
	// Jitter returns a number in [0, 1) that spreads retries (up to +20%); rand when nil.
	Jitter func() float64
	Log    *slog.Logger
	// Health, when set, receives the "deliver" readiness check: the subscriptions are
	// synced and the consumer can store what it reads.
	Health *health.Registry
}

// Service is the deliver component (run.Component "deliver").
type Service struct {
	o      Options
	sender *Sender
	limit  *targetLimiter
	wake   chan struct{}

	breakers breakers

	synced   atomic.Bool
	failure  atomic.Pointer[error] // of the last store of consumed events; nil once one succeeds
	inflight atomic.Int64
	freed    chan struct{}

	// Test hooks: afterAttempt runs after each attempt, before it is saved; afterRecord
	// after a batch of events is stored, before its offsets are committed.
	afterAttempt func(r outcome)
	afterRecord  func(events int)
}

// New validates the options and builds the service.
func New(o Options) (*Service, error) {
	if o.DB == nil {
		return nil, errors.New("deliver: a Postgres pool is required")
	}
	if err := o.Kafka.Validate(); err != nil {
		return nil, fmt.Errorf("deliver: %w", err)
	}
	if o.Group == "" {
		o.Group = DefaultGroup
	}
	o.Workers = orDefault(o.Workers, DefaultWorkers)
	o.PerTarget = orDefault(o.PerTarget, DefaultPerTarget)
	o.ClaimBatch = orDefault(o.ClaimBatch, DefaultClaimBatch)
	o.ConsumeBatch = orDefault(o.ConsumeBatch, DefaultConsumeBatch)
	o.Lease = orDefault(o.Lease, DefaultLease)
	o.PollInterval = orDefault(o.PollInterval, DefaultPollInterval)
	o.DisableAfter = orDefault(o.DisableAfter, DefaultDisableAfter)
	if o.Workers < 1 || o.PerTarget < 1 || o.ClaimBatch < 1 || o.ConsumeBatch < 1 {
		return nil, fmt.Errorf("deliver: workers (%d), per-target concurrency (%d), claim batch (%d) and consume batch (%d) must be positive",
			o.Workers, o.PerTarget, o.ClaimBatch, o.ConsumeBatch)
	}
	if o.Lease <= attemptTimeout {
		return nil, fmt.Errorf("deliver: lease %s must be longer than an attempt (%s)", o.Lease, attemptTimeout)
	}
	if o.PollInterval <= 0 {
		return nil, fmt.Errorf("deliver: poll interval %s must be positive", o.PollInterval)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Jitter == nil {
		o.Jitter = rand.Float64
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	presetMetrics()
	s := &Service{o: o, sender: NewSender(NewHTTPClient(o.AllowList, o.RootCAs)), limit: newTargetLimiter(o.PerTarget),
		breakers: newBreakers(), wake: make(chan struct{}, 1), freed: make(chan struct{}, 1)}
	if o.Subscriptions == nil {
		s.synced.Store(true)
	}
	if o.Health != nil {
		o.Health.Add("deliver", s.check)
	}
	return s, nil
}

func orDefault[T int | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// Name implements run.Component.
func (s *Service) Name() string { return "deliver" }

// Run waits for the subscriptions to sync, then consumes events and sends deliveries until
// ctx ends; it then stops claiming, finishes and records the attempts in flight, and stores
// and commits the batch of events in hand.
func (s *Service) Run(ctx context.Context) error {
	if s.o.Subscriptions != nil {
		if err := s.o.Subscriptions.WaitForSync(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("deliver: %w", err)
		}
		s.synced.Store(true)
	}
	errs := make(chan error, 4)
	go func() { errs <- s.consume(ctx) }()
	go func() { errs <- s.dispatch(ctx) }()
	go func() { s.refreshGauges(ctx); errs <- nil }()
	go func() {
		if s.o.DisableAfter > 0 {
			run.Every(ctx, disableInterval, s.o.Log, "disable dead delivery targets", s.disableDead)
		}
		errs <- nil
	}()
	var all []error
	for range 4 {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}

// check is the readiness of the component.
func (s *Service) check(context.Context) error {
	if !s.synced.Load() {
		return errors.New("deliver: the webhook subscriptions are not synced yet")
	}
	if p := s.failure.Load(); p != nil {
		return *p
	}
	return nil
}

func (s *Service) setFailure(err error) {
	if err == nil {
		s.failure.Store(nil)
		return
	}
	s.failure.Store(&err)
}

// signal wakes a loop waiting on ch without blocking.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
