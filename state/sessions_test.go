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

func TestTouchSession(t *testing.T) {
	forEachStore(t, func(t *testing.T, k storeKind) {
		s, clock := k.newTestStore(t)
		start := clock.Now()

		got, err := s.TouchSession("alice", "main", time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		want := Session{Owner: "alice", Name: "main", Created: start, LastUsed: start, LeaseExpires: start.Add(time.Hour)}
		if !sameSession(got, want) {
			t.Fatalf("first touch = %+v, want %+v", got, want)
		}
		owners, err := s.Owners()
		if err != nil || len(owners) != 1 || owners[0] != "alice" {
			t.Fatalf("Owners = %v, %v; want [alice]", owners, err)
		}

		if err := s.MarkSessionLapsed("alice", "main"); err != nil {
			t.Fatal(err)
		}
		clock.Advance(2 * time.Hour)
		got, err = s.TouchSession("alice", "main", 30*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		now := clock.Now()
		want = Session{Owner: "alice", Name: "main", Created: start, LastUsed: now, LeaseExpires: now.Add(30 * time.Minute)}
		if !sameSession(got, want) {
			t.Fatalf("renewal = %+v, want %+v (Created kept, Lapsed cleared)", got, want)
		}
		all, err := s.Sessions()
		if err != nil || len(all) != 1 || !sameSession(all[0], want) {
			t.Fatalf("Sessions = %+v, %v; want [%+v]", all, err, want)
		}
	})
}

func TestTouchSessionRejectsBadInput(t *testing.T) {
	forEachStore(t, func(t *testing.T, k storeKind) {
		s, _ := k.newTestStore(t)
		for _, tc := range []struct {
			name, owner, session string
			lease                time.Duration
			want                 string
		}{
			{"empty owner", "", "main", time.Hour, "owner is empty"},
			{"empty session", "alice", "", time.Hour, "session name is empty"},
			{"NUL in owner", "al\x00ice", "main", time.Hour, "NUL"},
			{"long name", "alice", string(make([]byte, 2000)), time.Hour, "longer than"},
			{"negative lease", "alice", "main", -time.Second, "negative lease"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, err := s.TouchSession(tc.owner, tc.session, tc.lease)
				wantErr(t, err, tc.want)
			})
		}
		if all, err := s.Sessions(); err != nil || len(all) != 0 {
			t.Fatalf("rejected touches stored sessions: %+v, %v", all, err)
		}
	})
}

func TestSessionsSortedAndLapsed(t *testing.T) {
	forEachStore(t, func(t *testing.T, k storeKind) {
		s, clock := k.newTestStore(t)
		t0 := clock.Now()
		mustTouch := func(owner, name string, lease time.Duration) {
			t.Helper()
			if _, err := s.TouchSession(owner, name, lease); err != nil {
				t.Fatal(err)
			}
		}
		mustTouch("bob", "b", time.Hour)       // expires t0+1h
		mustTouch("alice", "z", time.Minute)   // expires t0+1m
		mustTouch("alice", "a", 2*time.Minute) // expires t0+2m
		mustTouch("alice", "done", 0)          // lapsed at once
		if err := s.MarkSessionLapsed("alice", "done"); err != nil {
			t.Fatal(err)
		}

		all, err := s.Sessions()
		if err != nil {
			t.Fatal(err)
		}
		if names := sessionNames(all); names != "alice/a alice/done alice/z bob/b" {
			t.Fatalf("Sessions order = %s", names)
		}

		for _, tc := range []struct {
			at   time.Time
			want string
		}{
			{t0, ""},
			{t0.Add(time.Minute), ""}, // a lease ending exactly now has not lapsed yet
			{t0.Add(time.Minute + time.Nanosecond), "alice/z"},
			{t0.Add(3 * time.Minute), "alice/a alice/z"},
			{t0.Add(2 * time.Hour), "alice/a alice/z bob/b"},
		} {
			got, err := s.LapsedSessions(tc.at)
			if err != nil {
				t.Fatal(err)
			}
			if names := sessionNames(got); names != tc.want {
				t.Errorf("LapsedSessions(t0+%s) = %q, want %q", tc.at.Sub(t0), names, tc.want)
			}
		}

		clock.Advance(3 * time.Minute)
		if err := s.MarkSessionLapsed("alice", "z"); err != nil {
			t.Fatal(err)
		}
		got, err := s.LapsedSessions(t0.Add(3 * time.Minute))
		if err != nil || sessionNames(got) != "alice/a" {
			t.Fatalf("after marking alice/z: %q, %v", sessionNames(got), err)
		}
	})
}

// A session renewed while it was swept is in use again: marking it lapsed leaves it live, so the next sweep
// after its new lease runs out handles it (and what its renewing call made).
func TestMarkSessionLapsedSparesARenewedSession(t *testing.T) {
	forEachStore(t, func(t *testing.T, k storeKind) {
		s, clock := k.newTestStore(t)
		if _, err := s.TouchSession("alice", "main", time.Minute); err != nil {
			t.Fatal(err)
		}
		clock.Advance(2 * time.Minute)
		if claimed, err := s.ClaimLapsedSession("alice", "main", clock.Now(), time.Minute); err != nil || !claimed {
			t.Fatalf("claim: %v %v", claimed, err)
		}
		if _, err := s.TouchSession("alice", "main", time.Minute); err != nil { // a call, mid-sweep
			t.Fatal(err)
		}
		if err := s.MarkSessionLapsed("alice", "main"); err != nil {
			t.Fatal(err)
		}
		all, err := s.Sessions()
		if err != nil || len(all) != 1 || all[0].Lapsed {
			t.Fatalf("after a renewal mid-sweep: %+v, %v; want the session live", all, err)
		}
		if got, err := s.LapsedSessions(clock.Now().Add(2 * time.Minute)); err != nil || sessionNames(got) != "alice/main" {
			t.Fatalf("once the new lease ran out: %q, %v; want it swept again", sessionNames(got), err)
		}
	})
}

func TestMarkSessionLapsedNotFound(t *testing.T) {
	forEachStore(t, func(t *testing.T, k storeKind) {
		s, _ := k.newTestStore(t)
		if _, err := s.TouchSession("alice", "main", time.Hour); err != nil {
			t.Fatal(err)
		}
		for _, k := range [][2]string{{"alice", "other"}, {"bob", "main"}} {
			if err := s.MarkSessionLapsed(k[0], k[1]); !errors.Is(err, ErrNotFound) {
				t.Errorf("MarkSessionLapsed(%q, %q) = %v, want ErrNotFound", k[0], k[1], err)
			}
		}
	})
}

func sameSession(a, b Session) bool {
	return a.Owner == b.Owner && a.Name == b.Name && a.Created.Equal(b.Created) && a.LastUsed.Equal(b.LastUsed) &&
		a.LeaseExpires.Equal(b.LeaseExpires) && a.Lapsed == b.Lapsed
}

func sessionNames(ss []Session) string {
	out := ""
	for i, x := range ss {
		if i > 0 {
			out += " "
		}
		out += x.Owner + "/" + x.Name
	}
	return out
}

// One owner cannot make sessions without end: a new one beyond MaxLiveSessions is refused and not stored, while
// its existing sessions renew, other owners are not affected, and a session whose lease ran out frees a place.
func TestTouchSessionBoundsLiveSessionsPerOwner(t *testing.T) {
	forEachStore(t, func(t *testing.T, k storeKind) {
		clock := newFakeClock()
		s := k.open(t, k.fresh(t), Options{Now: clock.Now, MaxLiveSessions: 3})
		for _, name := range []string{"a", "b", "c"} {
			if _, err := s.TouchSession("alice", name, time.Hour); err != nil {
				t.Fatal(err)
			}
		}
		_, err := s.TouchSession("alice", "d", time.Hour)
		if !errors.Is(err, ErrTooManySessions) {
			t.Fatalf("a fourth live session: %v, want ErrTooManySessions", err)
		}
		if all, _ := s.Sessions(); len(all) != 3 {
			t.Fatalf("the refused session was stored: %+v", all)
		}
		if _, err := s.TouchSession("alice", "b", time.Hour); err != nil {
			t.Fatalf("renewing an existing session at the bound: %v", err)
		}
		if _, err := s.TouchSession("bob", "d", time.Hour); err != nil {
			t.Fatalf("another owner: %v", err)
		}
		clock.Advance(30 * time.Minute)
		if _, err := s.TouchSession("alice", "a", 10*time.Minute); err != nil {
			t.Fatal(err)
		}
		clock.Advance(20 * time.Minute) // a's lease has run out
		if _, err := s.TouchSession("alice", "d", time.Hour); err != nil {
			t.Fatalf("after a lease ran out: %v", err)
		}
		if _, err := s.TouchSession("alice", "a", time.Hour); err != nil {
			t.Fatalf("renewing a session whose lease ran out: %v", err)
		}
	})
}

// The bound holds against replicas: sessions of one owner created at the same moment through two Stores on one
// database (or state directory) are counted one decision at a time, so no more than MaxLiveSessions of them are
// made however the creations interleave, and each refusal says why. Several owners race at once, each a chance
// for an unserialized count to let one too many through.
func TestTouchSessionBoundHoldsAcrossStores(t *testing.T) {
	forEachStore(t, func(t *testing.T, k storeKind) {
		const bound, creators = 3, 10
		var owners []string
		for i := range 12 {
			owners = append(owners, fmt.Sprintf("owner%02d", i))
		}
		// LockTimeout is the test's deadline: a creation that waits longer (a deadlock) fails instead of hanging.
		opts := Options{MaxLiveSessions: bound, LockTimeout: 30 * time.Second}
		first := k.open(t, k.fresh(t), opts)
		stores := []*testStore{first, k.reopen(t, first, opts)}
		// The owners are known already, as they are once they have made anything: creating an owner's record
		// serializes nothing.
		for _, owner := range owners {
			if err := first.PutSandbox(sampleSandbox(owner, "sbx1", "", time.Now())); err != nil {
				t.Fatal(err)
			}
		}
		start := make(chan struct{})
		var (
			wg      sync.WaitGroup
			created = map[string]*atomic.Int32{}
			errs    = make(chan error, len(owners)*creators)
		)
		for _, owner := range owners {
			created[owner] = new(atomic.Int32)
			for i := range creators {
				wg.Go(func() {
					<-start
					_, err := stores[i%2].TouchSession(owner, fmt.Sprintf("s%02d", i), time.Hour)
					switch {
					case err == nil:
						created[owner].Add(1)
					case !errors.Is(err, ErrTooManySessions):
						errs <- err
					}
				})
			}
		}
		close(start)
		waitfor.Return(t, time.Minute, "the concurrent writers", wg.Wait)
		close(errs)
		for err := range errs {
			t.Errorf("a creation failed otherwise than on the bound: %v", err)
		}
		all, err := first.Sessions()
		if err != nil {
			t.Fatal(err)
		}
		stored := map[string]int{}
		for _, x := range all {
			stored[x.Owner]++
		}
		for _, owner := range owners {
			if n := created[owner].Load(); n != bound || stored[owner] != bound {
				t.Errorf("%s: %d creations at once through two stores with a bound of %d: %d succeeded, %d stored",
					owner, creators, bound, n, stored[owner])
			}
		}
	})
}

func TestClaimLapsedSession(t *testing.T) {
	forEachStore(t, func(t *testing.T, k storeKind) {
		s, clock := k.newTestStore(t)
		if _, err := s.TouchSession("alice", "main", time.Hour); err != nil {
			t.Fatal(err)
		}
		claim := func(st Store) bool {
			t.Helper()
			ok, err := st.ClaimLapsedSession("alice", "main", clock.Now(), 10*time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		if claim(s) {
			t.Fatal("a live session was claimed")
		}
		clock.Advance(2 * time.Hour)
		other := k.reopen(t, s, Options{Now: clock.Now}) // another process sharing the store
		if !claim(s) || claim(other) || claim(s) {
			t.Fatal("want exactly the first claim of a lapsed session to succeed")
		}
		clock.Advance(11 * time.Minute) // the holder died: its claim runs out
		if !claim(other) {
			t.Fatal("a claim that ran out was not taken over")
		}
		if err := other.ReleaseSessionClaim("alice", "main"); err != nil {
			t.Fatal(err)
		}
		if !claim(s) {
			t.Fatal("a released claim could not be taken")
		}
		if err := s.MarkSessionLapsed("alice", "main"); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Hour)
		if claim(other) {
			t.Fatal("a session marked lapsed was claimed again")
		}
		if _, err := other.TouchSession("alice", "main", time.Minute); err != nil {
			t.Fatal(err)
		}
		clock.Advance(2 * time.Minute)
		if !claim(s) {
			t.Fatal("a session used again and lapsed again could not be claimed")
		}
		if ok, err := s.ClaimLapsedSession("alice", "nope", clock.Now(), time.Minute); ok || err != nil {
			t.Fatalf("claim of a missing session = %v, %v", ok, err)
		}
		if err := s.ReleaseSessionClaim("alice", "nope"); err != nil {
			t.Fatal(err)
		}
	})
}

// A session whose sandboxes have all ended (deleted, or gone) and that has had no call since stops counting
// toward its owner's live sessions at once, so that a client naming a new session per run (create a sandbox, use
// it, delete it) is never refused; one without any call for IdleSessionAfter stops counting too. A session with a
// running or paused sandbox counts however long it is idle, and one used again after its sandbox ended counts
// again.
func TestFinishedSessionsFreeTheirPlace(t *testing.T) {
	forEachStore(t, func(t *testing.T, k storeKind) {
		clock := newFakeClock()
		s := k.open(t, k.fresh(t), Options{Now: clock.Now, MaxLiveSessions: 3})
		for i := range 1000 {
			name := fmt.Sprintf("run-%04d", i)
			if _, err := s.TouchSession("alice", name, 4*time.Hour); err != nil {
				t.Fatalf("run %d: %v", i+1, err)
			}
			rec := sampleSandbox("alice", fmt.Sprintf("sbx%04d", i), name, clock.Now())
			if err := s.PutSandbox(rec); err != nil {
				t.Fatal(err)
			}
			clock.Advance(time.Second)
			if i%2 == 0 {
				if err := s.DeleteSandbox("alice", rec.ID); err != nil {
					t.Fatal(err)
				}
			} else if _, err := s.UpdateSandbox("alice", rec.ID, func(r *SandboxRecord) error {
				r.State, r.GoneReason = StateGone, "killed"
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}

		// Sessions that hold sandboxes, or had a call lately, count; idle ones without sandboxes stop counting.
		clock.Advance(time.Second)
		if _, err := s.TouchSession("alice", "holds-running", 4*time.Hour); err != nil {
			t.Fatal(err)
		}
		if err := s.PutSandbox(sampleSandbox("alice", "sbx-running", "holds-running", clock.Now())); err != nil {
			t.Fatal(err)
		}
		if _, err := s.TouchSession("alice", "holds-paused", 4*time.Hour); err != nil {
			t.Fatal(err)
		}
		paused := sampleSandbox("alice", "sbx-paused", "holds-paused", clock.Now())
		paused.State = StatePaused
		if err := s.PutSandbox(paused); err != nil {
			t.Fatal(err)
		}
		if _, err := s.TouchSession("alice", "calls-only", 4*time.Hour); err != nil {
			t.Fatal(err)
		}
		if _, err := s.TouchSession("alice", "one-too-many", 4*time.Hour); !errors.Is(err, ErrTooManySessions) {
			t.Fatalf("a fourth session beside three live ones: %v, want ErrTooManySessions", err)
		}
		// A finished run that is used again counts again.
		if _, err := s.TouchSession("alice", "run-0999", 4*time.Hour); err != nil {
			t.Fatal(err)
		}
		clock.Advance(IdleSessionAfter + time.Minute)
		// calls-only and run-0999 are idle now; the sandboxes' sessions still count.
		if _, err := s.TouchSession("alice", "after-idle", 4*time.Hour); err != nil {
			t.Fatalf("once the sessions without sandboxes were idle: %v", err)
		}
		if _, err := s.TouchSession("alice", "one-too-many", 4*time.Hour); !errors.Is(err, ErrTooManySessions) {
			t.Fatalf("past the bound with two idle sandboxes held: %v, want ErrTooManySessions", err)
		}
	})
}
