package state

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

func TestReserveSandboxesCountsRecordsAndHeldPlaces(t *testing.T) {
	forEachStore(t, func(t *testing.T, k storeKind) {
		s, clock := k.newTestStore(t)
		caps := SandboxCaps{Live: 3, Running: 2}
		running := sampleSandbox("alice", "run1", "", time.Now())
		paused := sampleSandbox("alice", "paused1", "", time.Now())
		paused.State = StatePaused
		for _, r := range []SandboxRecord{running, paused, sampleSandbox("bob", "other", "", time.Now())} {
			if err := s.PutSandbox(r); err != nil {
				t.Fatal(err)
			}
		}
		held, err := s.ReserveSandboxes("alice", SlotNew, 1, caps, time.Minute)
		if err != nil {
			t.Fatalf("a third live, second running sandbox: %v", err)
		}
		if live, run, err := s.SandboxUse("alice"); err != nil || live != 3 || run != 2 {
			t.Fatalf("use with a place held = %d live, %d running, %v; want 3, 2", live, run, err)
		}
		_, err = s.ReserveSandboxes("alice", SlotNew, 1, SandboxCaps{Live: 3}, time.Minute)
		var capErr *CapError
		if !errors.As(err, &capErr) || !errors.Is(err, ErrOverCap) || err.Error() != "3 of 3 live sandboxes" {
			t.Fatalf("a fourth live sandbox: %v, want 3 of 3 live sandboxes", err)
		}
		_, err = s.ReserveSandboxes("alice", SlotResume, 1, caps, time.Minute)
		if err == nil || err.Error() != "2 of 2 running sandboxes" {
			t.Fatalf("resuming a third running sandbox: %v, want 2 of 2 running sandboxes", err)
		}
		// A resume takes no live place: the paused sandbox holds one already.
		if err := s.ReleaseReservation(held); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ReserveSandboxes("alice", SlotResume, 1, caps, time.Minute); err != nil {
			t.Fatalf("resuming at 2 of 3 live, 1 of 2 running: %v", err)
		}
		// A place whose holder died runs out.
		clock.Advance(2 * time.Minute)
		if live, run, err := s.SandboxUse("alice"); err != nil || live != 2 || run != 1 {
			t.Fatalf("use after the places ran out = %d live, %d running, %v; want 2, 1", live, run, err)
		}
		if err := s.ReleaseReservation(held); err != nil {
			t.Fatalf("releasing twice: %v", err)
		}
		if _, err := s.ReserveSandboxes("alice", SlotNew, 2, caps, time.Minute); err == nil {
			t.Fatal("two new sandboxes at 1 of 2 running were let through")
		}
		// A reserved sandbox, once recorded, counts once: its record takes its place.
		two, err := s.ReserveSandboxes("alice", SlotNew, 1, caps, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.PutReservedSandbox(two, sampleSandbox("alice", "run2", "", time.Now())); err != nil {
			t.Fatal(err)
		}
		if live, run, err := s.SandboxUse("alice"); err != nil || live != 3 || run != 2 {
			t.Fatalf("use after a reserved sandbox was recorded = %d live, %d running, %v; want 3, 2", live, run, err)
		}
		if err := s.PutReservedSandbox(two, sampleSandbox("bob", "x", "", time.Now())); err == nil {
			t.Fatal("a sandbox of bob was recorded against alice's reservation")
		}
		if _, err := s.ReserveSandboxes("alice", "bogus", 1, caps, time.Minute); err == nil {
			t.Fatal("an unknown kind was accepted")
		}
		if _, err := s.ReserveSandboxes("alice", SlotNew, 0, caps, time.Minute); err == nil {
			t.Fatal("a count of 0 was accepted")
		}
		if _, err := s.ReserveSandboxes("", SlotNew, 1, caps, time.Minute); err == nil {
			t.Fatal("an empty owner was accepted")
		}
	})
}

// Reservations racing through two Stores on one database (or state directory), each recorded as a sandbox once
// granted, are decided one at a time: with a cap of 5 and 50 calls per owner (several owners at once, each a chance for an unserialized count to let one
// too many through), exactly 5 get a place, whatever the interleaving.
func TestReserveSandboxesCapHoldsAcrossStores(t *testing.T) {
	forEachStore(t, func(t *testing.T, k storeKind) {
		const capRunning, callers = 5, 50
		opts := Options{LockTimeout: 30 * time.Second}
		first := k.open(t, k.fresh(t), opts)
		stores := []*testStore{first, k.reopen(t, first, opts)}
		var owners []string
		for i := range 8 {
			owner := fmt.Sprintf("owner%02d", i)
			owners = append(owners, owner)
			if err := first.PutSandbox(sampleSandbox(owner, "old", "", time.Now())); err != nil {
				t.Fatal(err)
			}
		}
		start := make(chan struct{})
		var (
			wg      sync.WaitGroup
			granted = map[string]*atomic.Int32{}
			errs    = make(chan error, callers*len(owners))
		)
		for _, owner := range owners {
			granted[owner] = new(atomic.Int32)
			for i := range callers {
				wg.Go(func() {
					<-start
					store := stores[i%2]
					res, err := store.ReserveSandboxes(owner, SlotNew, 1, SandboxCaps{Running: capRunning}, time.Hour)
					switch {
					case err == nil:
						granted[owner].Add(1)
						// The sandbox's record takes the place while others count.
						if err := store.PutReservedSandbox(res, sampleSandbox(owner, fmt.Sprintf("new%02d", i), "",
							time.Now())); err != nil {
							errs <- err
						}
					case !errors.Is(err, ErrOverCap):
						errs <- err
					}
				})
			}
		}
		close(start)
		waitfor.Return(t, time.Minute, "the concurrent reservations", wg.Wait)
		close(errs)
		for err := range errs {
			t.Errorf("a reservation failed otherwise than on the cap: %v", err)
		}
		for _, owner := range owners {
			if n := granted[owner].Load(); n != capRunning-1 {
				t.Errorf("%s: %d reservations at once with one sandbox running and a cap of %d: %d granted", owner, callers, capRunning, n)
			}
			if _, run, err := first.SandboxUse(owner); err != nil || run != capRunning {
				t.Errorf("%s: running use after the race = %d, %v; want %d", owner, run, err, capRunning)
			}
		}
	})
}

// A resume's record is updated to running and its place taken in one transaction: the sandbox never counts twice.
func TestUpdateReservedSandboxCountsOnce(t *testing.T) {
	forEachStore(t, func(t *testing.T, k storeKind) {
		s, _ := k.newTestStore(t)
		paused := sampleSandbox("alice", "p1", "", time.Now())
		paused.State = StatePaused
		if err := s.PutSandbox(paused); err != nil {
			t.Fatal(err)
		}
		res, err := s.ReserveSandboxes("alice", SlotResume, 1, SandboxCaps{Running: 1}, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.UpdateReservedSandbox(res, "alice", "p1", func(r *SandboxRecord) error {
			r.State = StateRunning
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if live, running, err := s.SandboxUse("alice"); err != nil || live != 1 || running != 1 {
			t.Fatalf("after the resume is recorded: %d live, %d running, %v; want 1, 1", live, running, err)
		}
		if _, err := s.UpdateReservedSandbox(res, "bob", "p1", func(*SandboxRecord) error { return nil }); err == nil {
			t.Fatal("a record of bob updated against alice's reservation")
		}
	})
}
