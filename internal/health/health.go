// Package health answers /healthz (the process is alive) and /readyz (its dependencies answer
// and it is not shutting down). Every component registers the checks of the stores it uses.
package health

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Check returns nil when a dependency answers.
type Check func(ctx context.Context) error

// CheckTimeout bounds each check so that one hanging dependency cannot hang the probe.
const CheckTimeout = 2 * time.Second

// Registry holds named readiness checks.
type Registry struct {
	mu       sync.RWMutex
	checks   map[string]Check
	stopping atomic.Bool
}

// NewRegistry returns an empty registry (ready until a check is added and fails).
func NewRegistry() *Registry { return &Registry{checks: map[string]Check{}} }

// Add registers a check under a name such as "postgres"; a second Add with the same name
// replaces the first, so components sharing a store in one process share its check.
func (r *Registry) Add(name string, c Check) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checks[name] = c
}

// ShuttingDown makes /readyz fail from now on, so load balancers stop sending new work while
// in-flight work drains.
func (r *Registry) ShuttingDown() { r.stopping.Store(true) }

// Report is the body of /readyz.
type Report struct {
	Ready  bool              `json:"ready"`
	Checks map[string]string `json:"checks"`
}

// Ready runs every check concurrently and reports each outcome ("ok" or the error).
func (r *Registry) Ready(ctx context.Context) Report {
	r.mu.RLock()
	names := make([]string, 0, len(r.checks))
	for n := range r.checks {
		names = append(names, n)
	}
	sort.Strings(names)
	checks := make([]Check, len(names))
	for i, n := range names {
		checks[i] = r.checks[n]
	}
	r.mu.RUnlock()

	results := make([]error, len(names))
	var wg sync.WaitGroup
	for i := range checks {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, CheckTimeout)
			defer cancel()
			results[i] = checks[i](cctx)
		}(i)
	}
	wg.Wait()

	rep := Report{Ready: !r.stopping.Load(), Checks: make(map[string]string, len(names)+1)}
	for i, n := range names {
		if results[i] != nil {
			rep.Ready = false
			rep.Checks[n] = results[i].Error()
		} else {
			rep.Checks[n] = "ok"
		}
	}
	if r.stopping.Load() {
		rep.Checks["shutdown"] = "shutting down"
	}
	return rep
}

// ReadyHandler serves /readyz: 200 when ready, 503 otherwise, with the report as JSON.
func (r *Registry) ReadyHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		rep := r.Ready(req.Context())
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if !rep.Ready {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(rep)
	})
}

// LiveHandler serves /healthz: the process answers, nothing more. Liveness must not depend
// on other services, or an outage of Postgres would restart every pod.
func LiveHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
	})
}
