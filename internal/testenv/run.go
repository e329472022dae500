package testenv

import (
	"context"
	"testing"
)

// Runner is a long-running component (run.Component without its name).
type Runner interface {
	Run(ctx context.Context) error
}

// Run runs r until the test ends, or until the returned stop is called, and fails the test
// if Run returns an error. stop waits for Run to return and may be called more than once.
func Run(t testing.TB, r Runner) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	t.Cleanup(stop)
	return stop
}
