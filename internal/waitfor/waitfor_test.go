package waitfor

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder is a testing.TB whose Fatalf records its message and ends its goroutine, as the real one does.
type recorder struct {
	testing.TB
	failure string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failure = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// failure runs wait as a test's body would and is the message it failed with ("" when it did not).
func failure(t *testing.T, wait func(tb testing.TB)) string {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		wait(r)
	}()
	// wait's own bound ends it; this one is for a wait that broke (it cannot be Recv, which is under test).
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the wait under test did not end within a minute")
	}
	return r.failure
}

func TestRecv(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 7
	if got := failure(t, func(tb testing.TB) {
		if v := Recv(tb, ch, time.Minute, "seven"); v != 7 {
			t.Errorf("Recv = %d, want 7", v)
		}
	}); got != "" {
		t.Errorf("Recv of a sent value failed: %s", got)
	}

	got := failure(t, func(tb testing.TB) { Recv(tb, make(chan int), time.Millisecond, "the approval page's answer") })
	if want := "waited 1ms for the approval page's answer; it did not come"; got != want {
		t.Errorf("Recv of nothing failed with %q, want %q", got, want)
	}

	closed := make(chan struct{})
	close(closed)
	if got := failure(t, func(tb testing.TB) { Recv(tb, closed, time.Minute, "the close") }); got != "" {
		t.Errorf("Recv of a closed channel failed: %s", got)
	}
}

func TestReturn(t *testing.T) {
	var wg sync.WaitGroup
	wg.Add(1)
	go wg.Done()
	if got := failure(t, func(tb testing.TB) { Return(tb, time.Minute, "the worker", wg.Wait) }); got != "" {
		t.Errorf("Return of a returning call failed: %s", got)
	}

	block := make(chan struct{})
	defer close(block)
	got := failure(t, func(tb testing.TB) { Return(tb, time.Millisecond, "the readers", func() { <-block }) })
	if !strings.Contains(got, "for the readers") {
		t.Errorf("Return of a blocked call failed with %q, want it to name the readers", got)
	}
}

func TestUntil(t *testing.T) {
	asked := 0
	if got := failure(t, func(tb testing.TB) {
		Until(tb, time.Minute, "the third ask", func() bool { asked++; return asked == 3 })
	}); got != "" || asked != 3 {
		t.Errorf("Until of a condition that comes to hold: failure %q after %d asks, want none after 3", got, asked)
	}

	got := failure(t, func(tb testing.TB) { Until(tb, time.Millisecond, "the file to appear", func() bool { return false }) })
	if want := "waited 1ms for the file to appear; it did not happen"; got != want {
		t.Errorf("Until of a condition that never holds failed with %q, want %q", got, want)
	}
}
