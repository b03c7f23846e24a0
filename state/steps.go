package state

import (
	"errors"
	"sync"
	"time"
)

// Step counts are written in batches: a call that only counts a step (most e2b_exec and e2b_write_file calls)
// adds it in memory, and the steps counted since the last write go to the store in one update per sandbox
// stepWriteDelay after the first of them, and when the store closes. A crash of the process (or a store that
// cannot be written at the time) loses the steps it had counted in that last moment, and nothing else: the step
// count is a tally shown to the model and the number in a checkpoint's name. A caller that acts on the count
// (a checkpoint every n steps) asks for an exact one, which is written at once together with any steps pending.
// The process's own reads of a sandbox include its pending steps; other processes see them once written.

// stepWriteDelay is how long counted steps may wait in memory before they are written.
const stepWriteDelay = time.Second

// stepKey names a sandbox of an owner.
type stepKey struct{ owner, id string }

// stepBatch holds the steps counted but not yet written.
type stepBatch struct {
	mu      sync.Mutex
	pending map[stepKey]int
	timer   *time.Timer // set while a write is scheduled
	write   func(owner, id string, n int) error
	writing sync.Mutex // held by a flush, so that the store's close waits for one under way
}

// add counts n steps of a sandbox, schedules their write, and returns the steps it now has pending.
func (b *stepBatch) add(owner, id string, n int) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pending == nil {
		b.pending = map[stepKey]int{}
	}
	k := stepKey{owner, id}
	b.pending[k] += n
	if b.timer == nil {
		b.timer = time.AfterFunc(stepWriteDelay, func() { b.flush() })
	}
	return b.pending[k]
}

// take removes and returns a sandbox's pending steps (for a write that includes them).
func (b *stepBatch) take(owner, id string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := stepKey{owner, id}
	n := b.pending[k]
	delete(b.pending, k)
	return n
}

// of returns a sandbox's pending steps.
func (b *stepBatch) of(owner, id string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.pending[stepKey{owner, id}]
}

// flush writes every pending count: one update per sandbox. A sandbox whose record is gone loses its count; one
// that could not be written keeps it for the next write.
func (b *stepBatch) flush() {
	b.writing.Lock()
	defer b.writing.Unlock()
	b.mu.Lock()
	pending := b.pending
	b.pending, b.timer = nil, nil
	b.mu.Unlock()
	for k, n := range pending {
		err := b.write(k.owner, k.id, n)
		if err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrClosed) {
			b.add(k.owner, k.id, n)
		}
	}
}

// stop cancels a scheduled write and writes what is pending now.
func (b *stepBatch) stop() {
	b.mu.Lock()
	if b.timer != nil {
		b.timer.Stop()
	}
	b.mu.Unlock()
	b.flush()
	// A failed write above scheduled another: the store is closing, so that one is dropped too.
	b.mu.Lock()
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	b.mu.Unlock()
}

// CountStep adds one step to a sandbox's count and returns its record with the count after it. When exact
// returns true for the record, the step (and any pending) is written at once; otherwise it is written with the
// next batch (see stepWriteDelay).
func (s *records) CountStep(owner, id string, exact func(SandboxRecord) bool) (SandboxRecord, error) {
	rec, err := s.Sandbox(owner, id) // with its pending steps
	if err != nil {
		return rec, err
	}
	if !exact(rec) {
		rec.Steps = rec.Steps - s.steps.of(owner, id) + s.steps.add(owner, id, 1)
		return rec, nil
	}
	n := s.steps.take(owner, id)
	rec, err = s.UpdateSandbox(owner, id, func(r *SandboxRecord) error {
		r.Steps += 1 + n
		return nil
	})
	if err != nil && !errors.Is(err, ErrNotFound) {
		s.steps.add(owner, id, n)
	}
	return rec, err
}

// writeSteps adds n steps to a sandbox's stored count.
func (s *records) writeSteps(owner, id string, n int) error {
	return s.db.update(func(tx recordTx) error {
		r, err := s.getSandbox(tx, owner, id)
		if err != nil {
			return err
		}
		r.Steps += n
		return s.putSandbox(tx, &r)
	})
}
