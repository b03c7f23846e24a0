package clocktest

import (
	"sync"
	"testing"
	"time"
)

// The clock stands where it was set until the test moves it, and moves by exactly what Advance is given, however
// many goroutines move and read it.
func TestClockMovesOnlyWhenAdvanced(t *testing.T) {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	c := New(start)
	if got := c.Now(); !got.Equal(start) {
		t.Fatalf("a new clock reads %v, want %v", got, start)
	}
	if got := c.Now(); !got.Equal(start) {
		t.Fatalf("a clock nobody moved reads %v, want %v", got, start)
	}
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			c.Advance(time.Second)
			_ = c.Now()
		})
	}
	wg.Wait()
	if got, want := c.Now(), start.Add(50*time.Second); !got.Equal(want) {
		t.Fatalf("after 50 advances of 1 s the clock reads %v, want %v", got, want)
	}
}
