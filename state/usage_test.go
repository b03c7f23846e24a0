package state

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// usageOf is the owner's use per day, keyed "2006-01-02".
func usageOf(t *testing.T, s Store, owner string, since time.Time) map[string]UsageDay {
	t.Helper()
	days, err := s.Usage(owner, since)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]UsageDay{}
	for _, d := range days {
		if d.Owner != owner {
			t.Fatalf("Usage(%q) gave a day of %q", owner, d.Owner)
		}
		out[d.Day.Format(dayLayout)] = d
	}
	return out
}

func setState(t *testing.T, s Store, owner, id, st string) {
	t.Helper()
	if _, err := s.UpdateSandbox(owner, id, func(r *SandboxRecord) error { r.State = st; return nil }); err != nil {
		t.Fatal(err)
	}
}

// Running time is counted from create or resume to pause or end, split at midnight UTC, per template; a sandbox
// still running counts up to now, or up to its timeout when that has passed.
func TestUsageCountsRunningTimeAsBilled(t *testing.T) {
	forEachStore(t, func(t *testing.T, k storeKind) {
		s, clock := k.newTestStore(t)
		start := clock.Now() // 12:00
		a := sampleSandbox("alice", "a", "main", start)
		a.ExpiresAt = start.Add(48 * time.Hour)
		if err := s.PutSandbox(a); err != nil {
			t.Fatal(err)
		}
		clock.Advance(30 * time.Minute)
		b := sampleSandbox("alice", "b", "main", clock.Now())
		b.Template = "python"
		b.ExpiresAt = clock.Now().Add(time.Hour)
		if err := s.PutSandbox(b); err != nil {
			t.Fatal(err)
		}
		c := sampleSandbox("bob", "c", "main", clock.Now())
		c.ExpiresAt = time.Time{}
		if err := s.PutSandbox(c); err != nil {
			t.Fatal(err)
		}
		clock.Advance(30 * time.Minute) // 13:00
		setState(t, s, "alice", "a", StatePaused)
		// A write that keeps a sandbox running changes nothing.
		if _, err := s.UpdateSandbox("alice", "b", func(r *SandboxRecord) error { r.Steps++; return nil }); err != nil {
			t.Fatal(err)
		}

		day1 := start.Format(dayLayout)
		u := usageOf(t, s, "alice", start)[day1]
		if got := u.Templates["base"]; got.RunningSeconds != 3600 || got.Created != 1 {
			t.Fatalf("base at 13:00 = %+v, want 3600 s and 1 created", got)
		}
		if got := u.Templates["python"]; got.RunningSeconds != 1800 || got.Created != 1 {
			t.Fatalf("python (still running) at 13:00 = %+v, want 1800 s and 1 created", got)
		}
		if u.PeakRunning != 2 {
			t.Fatalf("peak running = %d, want 2", u.PeakRunning)
		}
		// b's timeout ran out at 13:30: E2B stopped billing it then, whenever the store learns of it.
		clock.Advance(2 * time.Hour)
		if got := usageOf(t, s, "alice", start)[day1].Templates["python"].RunningSeconds; got != 3600 {
			t.Fatalf("python after its timeout = %v s, want 3600", got)
		}
		setState(t, s, "alice", "b", StatePaused)
		if got := usageOf(t, s, "alice", start)[day1].Templates["python"].RunningSeconds; got != 3600 {
			t.Fatalf("python paused after its timeout = %v s, want 3600", got)
		}

		// Resumed at 23:30, killed at 00:45 the next day: split at midnight.
		clock.Advance(start.Add(11*time.Hour + 30*time.Minute).Sub(clock.Now()))
		setState(t, s, "alice", "a", StateRunning)
		if got := usageOf(t, s, "alice", start)[day1].Templates["base"].Created; got != 1 {
			t.Fatalf("a resume counted as a create: %d created", got)
		}
		clock.Advance(75 * time.Minute)
		setState(t, s, "alice", "a", StateGone)
		days := usageOf(t, s, "alice", start)
		day2 := clock.Now().Format(dayLayout)
		if got := days[day1].Templates["base"].RunningSeconds; got != 3600+1800 {
			t.Fatalf("base on the first day = %v s, want 5400", got)
		}
		if got := days[day2].RunningSeconds(); got != 2700 {
			t.Fatalf("the second day = %v s, want 2700", got)
		}
		if only := usageOf(t, s, "alice", clock.Now()); len(only) != 1 || only[day2].RunningSeconds() != 2700 {
			t.Fatalf("usage since the second day = %+v", only)
		}
		if got := RunningSecondsSince(mustUsage(t, s, "alice", start), clock.Now()); got != 2700 {
			t.Fatalf("RunningSecondsSince the second day = %v", got)
		}
		// Deleting a running record ends its run too.
		clock.Advance(time.Hour)
		if err := s.DeleteSandbox("bob", "c"); err != nil {
			t.Fatal(err)
		}
		all, err := s.Usage("", start)
		if err != nil {
			t.Fatal(err)
		}
		var bob float64
		for _, d := range all {
			if d.Owner == "bob" {
				bob += d.RunningSeconds()
			}
		}
		if want := clock.Now().Sub(start.Add(30 * time.Minute)).Seconds(); bob != want {
			t.Fatalf("bob's deleted sandbox ran %v s, want %v", bob, want)
		}
	})
}

func mustUsage(t *testing.T, s Store, owner string, since time.Time) []UsageDay {
	t.Helper()
	days, err := s.Usage(owner, since)
	if err != nil {
		t.Fatal(err)
	}
	return days
}

// Sandboxes of one owner paused at once through two stores on one database (two replicas) each add their time:
// none is lost to another's write of the same day.
func TestUsageOfConcurrentPausesAddsUp(t *testing.T) {
	forEachStore(t, func(t *testing.T, k storeKind) {
		s, clock := k.newTestStore(t)
		other := k.reopen(t, s, Options{Now: clock.Now})
		const n = 20
		for i := range n {
			r := sampleSandbox("alice", fmt.Sprintf("s%02d", i), "main", clock.Now())
			if err := s.PutSandbox(r); err != nil {
				t.Fatal(err)
			}
		}
		clock.Advance(10 * time.Minute)
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			st := Store(s)
			if i%2 == 1 {
				st = other
			}
			wg.Go(func() {
				_, err := st.UpdateSandbox("alice", fmt.Sprintf("s%02d", i), func(r *SandboxRecord) error {
					r.State = StatePaused
					return nil
				})
				errs <- err
			})
		}
		waitfor.Return(t, time.Minute, "the concurrent pauses", wg.Wait)
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if got := RunningSecondsSince(mustUsage(t, s, "alice", clock.Now()), clock.Now()); got != n*600 {
			t.Fatalf("%d sandboxes paused after 10 minutes ran %v s together, want %d", n, got, n*600)
		}
	})
}
