package pgstore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partnerstream/partnerstream/internal/store/pgstore"
	"github.com/partnerstream/partnerstream/internal/testenv"
)

// TestListenResetsOnceLiveAgain kills the listening connection and checks the rule that
// keeps a cache fed by Listen correct: Reset runs each time the LISTEN is live, the first
// time and after the reconnect, never before. A change announced from inside Reset stands for
// a change made right after a cache reset: it must be delivered, which it is only if the new
// subscription was already in place.
func TestListenResetsOnceLiveAgain(t *testing.T) {
	t.Parallel()
	pool := openPool(t, testenv.Postgres(t))
	const channel = "pgstore_listen_test"
	notify := func(payload string) error {
		_, err := pool.Exec(context.Background(), `SELECT pg_notify($1, $2)`, channel, payload)
		return err
	}
	got, live := make(chan string, 16), make(chan struct{}, 4)
	var resets atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		pgstore.Listen(ctx, pool, pgstore.Subscription{
			Channel: channel,
			Notify:  func(p string) { got <- p },
			Reset: func() {
				if err := notify(fmt.Sprintf("changed during reset %d", resets.Add(1))); err != nil {
					t.Errorf("notify: %v", err)
				}
			},
			Live:       func() { live <- struct{}{} },
			RetryAfter: 10 * time.Millisecond,
		})
	}()
	t.Cleanup(func() { cancel(); <-done })

	waitLive := func(n int) {
		t.Helper()
		select {
		case <-live:
		case <-time.After(10 * time.Second):
			t.Fatalf("subscription %d not live after 10 s", n)
		}
		if r := resets.Load(); r != int32(n) {
			t.Fatalf("Reset ran %d times by subscription %d", r, n)
		}
	}
	expect := func(want string) {
		t.Helper()
		select {
		case p := <-got:
			if p != want {
				t.Fatalf("notification %q, want %q", p, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no notification %q after 10 s", want)
		}
	}

	waitLive(1)
	expect("changed during reset 1")
	if err := notify("before the kill"); err != nil {
		t.Fatal(err)
	}
	expect("before the kill")

	var killed int
	err := pool.QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE pid <> pg_backend_pid() AND query = 'LISTEN "`+channel+`"'`).Scan(&killed)
	if err != nil || killed != 1 {
		t.Fatalf("terminated %d listening backends: %v", killed, err)
	}

	waitLive(2)
	expect("changed during reset 2")
	if err := notify("after the reconnect"); err != nil {
		t.Fatal(err)
	}
	expect("after the reconnect")
}
