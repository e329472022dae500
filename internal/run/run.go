// Package run runs the platform's components: each until SIGTERM or SIGINT, then a bounded
// drain, with the ops endpoints (/metrics, /healthz, /readyz) served on their own port.
package run

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os/signal"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/partnerstream/partnerstream/internal/health"
	"github.com/partnerstream/partnerstream/internal/metrics"
)

// Component is a long-running part of the platform.
type Component interface {
	Name() string
	// Run works until ctx is canceled, then drains its in-flight work and returns. An error
	// before that stops the whole process.
	Run(ctx context.Context) error
}

// Func adapts a function to a Component.
type Func struct {
	N string
	F func(ctx context.Context) error
}

func (f Func) Name() string                  { return f.N }
func (f Func) Run(ctx context.Context) error { return f.F(ctx) }

// Options configure Main.
type Options struct {
	Log             *slog.Logger
	MetricsAddr     string
	ShutdownTimeout time.Duration
	Health          *health.Registry
	// Ready, when set, receives the bound ops address once the ops server listens (tests).
	Ready func(opsAddr string)
}

// Main runs the components until ctx ends, a signal arrives or one of them fails, then cancels
// them all and waits at most ShutdownTimeout for them to drain. A second signal kills the
// process at once (default signal handling is restored after the first).
func Main(ctx context.Context, o Options, comps ...Component) error {
	sigCtx, stopSignals := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stopSignals()

	ln, err := net.Listen("tcp", o.MetricsAddr)
	if err != nil {
		return fmt.Errorf("metrics server: listen on %s: %w", o.MetricsAddr, err)
	}
	ops := &http.Server{Handler: OpsHandler(o.Health), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = ops.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = ops.Shutdown(sctx)
	}()
	if o.Ready != nil {
		o.Ready(ln.Addr().String())
	}

	runCtx, cancelRun := context.WithCancel(context.Background())
	defer cancelRun()
	type result struct {
		name string
		err  error
	}
	results := make(chan result, len(comps))
	var mu sync.Mutex
	running := map[string]bool{}
	for _, c := range comps {
		mu.Lock()
		running[c.Name()] = true
		mu.Unlock()
		go func(c Component) {
			err := c.Run(runCtx)
			mu.Lock()
			delete(running, c.Name())
			mu.Unlock()
			results <- result{c.Name(), err}
		}(c)
	}
	o.Log.Info("started", "components", names(comps), "metrics_addr", ln.Addr().String())

	var firstErr error
	remaining := len(comps)
	select {
	case <-sigCtx.Done():
		o.Log.Info("shutting down", "reason", context.Cause(sigCtx).Error())
	case r := <-results:
		remaining--
		if r.err != nil {
			firstErr = fmt.Errorf("%s: %w", r.name, r.err)
			o.Log.Error("component failed, shutting down", "failed", r.name, "err", r.err)
		} else {
			o.Log.Info("component stopped, shutting down", "stopped", r.name)
		}
	}
	stopSignals()
	if o.Health != nil {
		o.Health.ShuttingDown()
	}
	cancelRun()

	deadline := time.NewTimer(o.ShutdownTimeout)
	defer deadline.Stop()
	for remaining > 0 {
		select {
		case r := <-results:
			remaining--
			if r.err != nil && !errors.Is(r.err, context.Canceled) && firstErr == nil {
				firstErr = fmt.Errorf("%s: %w", r.name, r.err)
			}
		case <-deadline.C:
			mu.Lock()
			left := make([]string, 0, len(running))
			for n := range running {
				left = append(left, n)
			}
			mu.Unlock()
			sort.Strings(left)
			return fmt.Errorf("shutdown timed out after %s; still draining: %v", o.ShutdownTimeout, left)
		}
	}
	if firstErr == nil {
		o.Log.Info("stopped cleanly")
	}
	return firstErr
}

// OpsHandler serves /metrics, /healthz and /readyz.
func OpsHandler(h *health.Registry) http.Handler {
	if h == nil {
		h = health.NewRegistry()
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(metrics.Gatherer, promhttp.HandlerOpts{}))
	mux.Handle("GET /healthz", health.LiveHandler())
	mux.Handle("GET /readyz", h.ReadyHandler())
	return mux
}

func names(comps []Component) []string {
	out := make([]string, len(comps))
	for i, c := range comps {
		out[i] = c.Name()
	}
	return out
}
