package tools

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/e2b-mcp/e2b-mcp/egress"
)

// EarlyRead is something a call reads from its owner's secret store (its E2B key, its egress credentials) on a
// goroutine begun before the call runs, while its started audit record is written and synced: the server's
// pipeline starts it, and waits for it before the call runs, so a round trip to the store (D-Bus on Linux)
// overlaps the sync instead of adding to it, and nothing of the call runs beside it. The read begins once the call
// may run, so a change made before the call still decides it. Only the call's first use takes it, and only when
// the read succeeded: a second use, or a use after a failed read, reads afresh, as every use did before.
type EarlyRead[T any] struct {
	taken atomic.Bool
	done  chan struct{}
	v     T
	err   error
}

// StartEarlyRead runs read on a goroutine of its own; a panic in it is a failed read.
func StartEarlyRead[T any](read func() (T, error)) *EarlyRead[T] {
	e := &EarlyRead[T]{done: make(chan struct{})}
	go func() {
		defer close(e.done)
		defer func() {
			if r := recover(); r != nil {
				var zero T
				e.v, e.err = zero, fmt.Errorf("an early read failed: %v", r)
			}
		}()
		e.v, e.err = read()
	}()
	return e
}

// Wait waits for the read to end.
func (e *EarlyRead[T]) Wait() { <-e.done }

// Take is the read's value for its first taker, once it has ended, when it succeeded; ok is false otherwise.
func (e *EarlyRead[T]) Take() (v T, ok bool) {
	if !e.taken.CompareAndSwap(false, true) {
		return v, false
	}
	<-e.done
	return e.v, e.err == nil
}

// earlyEgress is the egress configuration of one owner's session read early for a call.
type earlyEgress struct {
	owner, session string
	read           *EarlyRead[egress.Config]
}

type earlyEgressKey struct{}

// WithEarlyEgress returns ctx carrying the egress configuration of caller's session read early.
func WithEarlyEgress(ctx context.Context, caller Caller, read *EarlyRead[egress.Config]) context.Context {
	return context.WithValue(ctx, earlyEgressKey{}, earlyEgress{owner: caller.Owner, session: caller.Session, read: read})
}

// earlyEgressOf is the egress configuration of call's session read early for the call of ctx, if it is there to
// take (see EarlyRead.Take).
func earlyEgressOf(ctx context.Context, call Caller) (egress.Config, bool) {
	e, ok := ctx.Value(earlyEgressKey{}).(earlyEgress)
	if !ok || e.owner != call.Owner || e.session != call.Session {
		return egress.Config{}, false
	}
	return e.read.Take()
}
