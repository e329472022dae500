package run

import (
	"context"
	"slices"
	"testing"
	"time"
)

// gathered runs a Gather over values sent by send and returns the batches it flushed.
func gathered(t *testing.T, size int, linger time.Duration, waited time.Duration, stopAfter int, send func(chan<- int)) [][]int {
	t.Helper()
	in := make(chan int)
	var batches [][]int
	var cur []int
	g := Gather[int]{Size: size, Linger: linger,
		Add:    func(v, _ int) (int, int, bool) { cur = append(cur, v); return 1, 0, false },
		Waited: func(int) time.Duration { return waited },
		Flush: func() bool {
			batches = append(batches, cur)
			cur = nil
			return stopAfter == 0 || len(batches) < stopAfter
		}}
	done := make(chan struct{})
	go func() { defer close(done); g.Run(context.Background(), in) }()
	send(in)
	close(in)
	<-done
	return batches
}

func TestGather(t *testing.T) {
	tests := []struct {
		name      string
		size      int
		linger    time.Duration
		waited    time.Duration
		stopAfter int
		send      func(chan<- int)
		want      [][]int
	}{
		{name: "a full batch is flushed at once, the rest when the channel closes", size: 2, linger: time.Hour,
			send: func(in chan<- int) { in <- 1; in <- 2; in <- 3 }, want: [][]int{{1, 2}, {3}}},
		{name: "a batch is flushed once its first value has waited the linger", size: 10, linger: 20 * time.Millisecond,
			send: func(in chan<- int) { in <- 1; time.Sleep(200 * time.Millisecond); in <- 2 }, want: [][]int{{1}, {2}}},
		{name: "a value that waited the linger elsewhere is flushed at once", size: 10, linger: time.Hour, waited: time.Hour,
			send: func(in chan<- int) { in <- 1; time.Sleep(100 * time.Millisecond); in <- 2 }, want: [][]int{{1}, {2}}},
		{name: "a flush that fails stops the gathering", size: 1, linger: time.Hour, stopAfter: 1,
			send: func(in chan<- int) { in <- 1 }, want: [][]int{{1}}},
		{name: "nothing received, nothing flushed", size: 1, linger: time.Millisecond,
			send: func(chan<- int) { time.Sleep(20 * time.Millisecond) }, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := gathered(t, tt.size, tt.linger, tt.waited, tt.stopAfter, tt.send)
			if !slices.EqualFunc(got, tt.want, slices.Equal) {
				t.Fatalf("batches %v, want %v", got, tt.want)
			}
		})
	}
}

func TestGatherFlushesWhatItHoldsWhenTheContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	in := make(chan int)
	var flushed []int
	var cur []int
	done := make(chan struct{})
	go func() {
		defer close(done)
		Gather[int]{Size: 10, Linger: time.Hour,
			Add:   func(v, _ int) (int, int, bool) { cur = append(cur, v); return 1, 0, false },
			Flush: func() bool { flushed = cur; return true }}.Run(ctx, in)
	}()
	in <- 7
	cancel()
	<-done
	if !slices.Equal(flushed, []int{7}) {
		t.Fatalf("flushed %v, want [7]", flushed)
	}
}

// A value of several messages is split so that no batch holds more than Size.
func TestGatherSplitsAValueAcrossBatches(t *testing.T) {
	in := make(chan []int, 1)
	var batches [][]int
	var cur []int
	g := Gather[[]int]{Size: 3, Linger: time.Hour,
		Add: func(v []int, room int) (int, []int, bool) {
			n := min(room, len(v))
			cur = append(cur, v[:n]...)
			return n, v[n:], n < len(v)
		},
		Flush: func() bool { batches = append(batches, cur); cur = nil; return true }}
	in <- []int{1, 2, 3, 4, 5, 6, 7}
	close(in)
	g.Run(context.Background(), in)
	if want := [][]int{{1, 2, 3}, {4, 5, 6}, {7}}; !slices.EqualFunc(batches, want, slices.Equal) {
		t.Fatalf("batches %v, want %v", batches, want)
	}
}
