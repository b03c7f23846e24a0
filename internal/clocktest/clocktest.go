// Package clocktest is a clock for tests that moves only when the test says, for the code that takes its time
// from a func() time.Time.
package clocktest

import (
	"sync"
	"time"
)

// Clock is a clock the test moves. Safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// New is a clock at t.
func New(t time.Time) *Clock { return &Clock{t: t} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
