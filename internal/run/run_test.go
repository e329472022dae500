package run

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/health"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// drainer takes `drain` to stop after its context ends.
func drainer(name string, drain time.Duration, drained *atomic.Bool) Component {
	return Func{N: name, F: func(ctx context.Context) error {
		<-ctx.Done()
		time.Sleep(drain)
		drained.Store(true)
		return nil
	}}
}

func TestMain_DrainsEveryComponentBeforeReturning(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var a, b atomic.Bool
	done := make(chan error, 1)
	go func() {
		done <- Main(ctx, Options{Log: quiet, MetricsAddr: "127.0.0.1:0", ShutdownTimeout: 5 * time.Second},
			drainer("a", 200*time.Millisecond, &a), drainer("b", 300*time.Millisecond, &b))
	}()
	time.Sleep(100 * time.Millisecond)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Main returned %v, want a clean stop", err)
	}
	if !a.Load() || !b.Load() {
		t.Fatalf("Main returned before every component drained: a=%v b=%v", a.Load(), b.Load())
	}
}

func TestMain_ReportsAComponentThatDoesNotDrainInTime(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var slow atomic.Bool
	done := make(chan error, 1)
	go func() {
		done <- Main(ctx, Options{Log: quiet, MetricsAddr: "127.0.0.1:0", ShutdownTimeout: 100 * time.Millisecond},
			drainer("slowpoke", 2*time.Second, &slow))
	}()
	cancel()
	err := <-done
	if err == nil || !strings.Contains(err.Error(), "slowpoke") || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("Main returned %v, want a timeout naming slowpoke", err)
	}
}

func TestMain_StopsEverythingWhenOneComponentFails(t *testing.T) {
	var other atomic.Bool
	boom := Func{N: "boom", F: func(context.Context) error { return errors.New("kaput") }}
	err := Main(context.Background(), Options{Log: quiet, MetricsAddr: "127.0.0.1:0", ShutdownTimeout: 5 * time.Second},
		boom, drainer("other", 0, &other))
	if err == nil || !strings.Contains(err.Error(), "boom: kaput") {
		t.Fatalf("Main returned %v, want boom's error", err)
	}
	if !other.Load() {
		t.Fatal("the other component was not stopped")
	}
}

func TestMain_ReadinessFailsOnceShutdownStarts(t *testing.T) {
	h := health.NewRegistry()
	addrc := make(chan string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	release := make(chan struct{})
	comp := Func{N: "held", F: func(ctx context.Context) error { <-ctx.Done(); <-release; return nil }}
	done := make(chan error, 1)
	go func() {
		done <- Main(ctx, Options{Log: quiet, MetricsAddr: "127.0.0.1:0", ShutdownTimeout: 5 * time.Second, Health: h,
			Ready: func(a string) { addrc <- a }}, comp)
	}()
	addr := <-addrc
	status := func() int {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			t.Fatalf("readyz: %v", err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := status(); s != http.StatusOK {
		t.Fatalf("readyz before shutdown = %d, want 200", s)
	}
	cancel()
	deadline := time.Now().Add(2 * time.Second)
	for status() != http.StatusServiceUnavailable {
		if time.Now().After(deadline) {
			t.Fatal("readyz still 200 while draining")
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestOpsHandlerServesMetricsWithBuildInfo(t *testing.T) {
	addrc := make(chan string, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		_ = Main(ctx, Options{Log: quiet, MetricsAddr: "127.0.0.1:0", ShutdownTimeout: time.Second, Ready: func(a string) { addrc <- a }})
	}()
	resp, err := http.Get("http://" + <-addrc + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{"partnerstream_build_info{", "go_goroutines", "process_resident_memory_bytes"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestBackoffDoublesFrom100msUpTo5s(t *testing.T) {
	cases := []struct {
		attempt int
		want    time.Duration
	}{
		{0, 100 * time.Millisecond}, {1, 100 * time.Millisecond}, {2, 200 * time.Millisecond},
		{4, 800 * time.Millisecond}, {7, 5 * time.Second}, {1000, 5 * time.Second},
	}
	for _, c := range cases {
		if got := Backoff(c.attempt); got != c.want {
			t.Errorf("Backoff(%d) = %s, want %s", c.attempt, got, c.want)
		}
	}
}

func TestBackoffBetweenDoublesFromLoUpToHi(t *testing.T) {
	lo, hi := 20*time.Millisecond, 250*time.Millisecond
	for attempt, want := range map[int]time.Duration{0: lo, 1: lo, 2: 40 * time.Millisecond, 4: 160 * time.Millisecond, 5: hi, 1 << 30: hi} {
		if got := BackoffBetween(attempt, lo, hi); got != want {
			t.Errorf("BackoffBetween(%d, %s, %s) = %s, want %s", attempt, lo, hi, got, want)
		}
	}
}
