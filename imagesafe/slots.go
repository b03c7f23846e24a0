package imagesafe

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Slots share out the decoding of images for scaling. A decode cannot be cancelled, and each one takes up
// to a core and Limits.MaxDecodeBytes of memory, so few run at once: at most one per owner, and at most
// total across owners. An owner's further images wait behind its own, not in front of anyone else's; the owners
// waiting for a slot get one in turn (each waits with at most one call, and a channel serves its waiters first
// come, first served). A call that waits longer than wait gives up with ErrBusy.
type Slots struct {
	total chan struct{}
	wait  time.Duration

	mu     sync.Mutex
	owners map[string]*ownerSlot // only the owners with a call holding or waiting for a slot
}

// ownerSlot is one owner's slot and the number of its calls holding or waiting for it.
type ownerSlot struct {
	held  chan struct{}
	calls int
}

// The scaling slots of a server: two decodes at once (two owners, each with one), each waiting at most ten
// seconds, well within the minute clients give a call.
const (
	SlotsTotal = 2
	SlotsWait  = 10 * time.Second
)

// ErrBusy is a call that waited its turn to scale an image for longer than the slots allow.
var ErrBusy = errors.New("the server is busy scaling other images")

func NewSlots(total int, wait time.Duration) *Slots {
	return &Slots{total: make(chan struct{}, total), wait: wait, owners: map[string]*ownerSlot{}}
}

// acquire waits for owner's slot and then for one of the total, for at most s.wait; release gives both back.
// It fails with ctx's error when ctx ends first, else with ErrBusy.
func (s *Slots) Acquire(ctx context.Context, owner string) (release func(), err error) {
	waitCtx, cancel := context.WithTimeout(ctx, s.wait)
	defer cancel()
	o := s.join(owner)
	select {
	case o.held <- struct{}{}:
	case <-waitCtx.Done():
		s.leave(owner, o)
		return nil, waitFailure(ctx)
	}
	select {
	case s.total <- struct{}{}:
	case <-waitCtx.Done():
		<-o.held
		s.leave(owner, o)
		return nil, waitFailure(ctx)
	}
	return func() {
		<-s.total
		<-o.held
		s.leave(owner, o)
	}, nil
}

// waitFailure is why a wait for a slot ended: the caller's context, or the slots' own deadline.
func waitFailure(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return ErrBusy
}

// join returns owner's slot, counting one more call on it.
func (s *Slots) join(owner string) *ownerSlot {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.owners[owner]
	if o == nil {
		o = &ownerSlot{held: make(chan struct{}, 1)}
		s.owners[owner] = o
	}
	o.calls++
	return o
}

// leave counts one call fewer on owner's slot, and forgets the slot with the last one.
func (s *Slots) leave(owner string, o *ownerSlot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o.calls--; o.calls == 0 {
		delete(s.owners, owner)
	}
}
