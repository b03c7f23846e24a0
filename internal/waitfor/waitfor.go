// Package waitfor is how a test waits: for a value on a channel, for a function to return, or for a condition to
// hold, never longer than a bound the test gives, failing with the name of what it waited for. A test that waits
// with a bare `<-ch` or `wg.Wait()` hangs until the package's timeout when the code breaks, and the timeout's
// goroutine dump loses every other result of the package; with a bound, the one broken test fails and says why.
//
// A bound is what the wait may take on a slow, loaded machine, not what it takes on a fast one: it is there to
// end a hang, not to measure speed. Each function calls t.Fatalf, so it belongs to the test's own goroutine.
package waitfor

import (
	"testing"
	"time"
)

// poll is how often Until asks its condition again.
const poll = 10 * time.Millisecond

// Recv is the next value of ch (the zero value once ch is closed). When none comes within bound it fails t,
// naming what.
func Recv[T any](t testing.TB, ch <-chan T, bound time.Duration, what string) T {
	t.Helper()
	timer := time.NewTimer(bound)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("waited %v for %s; it did not come", bound, what)
		panic("unreachable")
	}
}

// Return runs f (a wg.Wait, a cmd.Wait, a call that blocks) and waits for it to return. When it has not returned
// within bound it fails t, naming what; f's goroutine is left behind, still blocked.
func Return(t testing.TB, bound time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	Recv(t, done, bound, what)
}

// Until asks cond every few milliseconds until it holds. When it still does not hold after bound it fails t,
// naming what.
func Until(t testing.TB, bound time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s; it did not happen", bound, what)
		}
		time.Sleep(poll)
	}
}
