package testenv

import (
	"testing"
	"time"
)

// Eventually polls cond every 20 ms until it holds, failing the test after the timeout with
// the last message cond returned.
func Eventually(t testing.TB, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, msg := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", timeout, msg)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
