package state

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

func sampleSandbox(owner, id, session string, created time.Time) SandboxRecord {
	return SandboxRecord{
		ID: id, Owner: owner, Session: session, Title: "title " + id, Template: "base", Domain: "e2b.app",
		EnvdVersion: "0.2.0", AccessToken: "envd-token-" + id, State: StateRunning, Created: created,
		TimeoutSeconds: 3600, Steps: 3, Checkpoint: &CheckpointPolicy{EverySteps: 5, OnPause: true},
		OnTimeout: "pause", ExpiresAt: created.Add(time.Hour), PausedBy: PausedAtTimeout,
	}
}

func TestPutAndGetSandbox(t *testing.T) {
	forEachStore(t, func(t *testing.T, k storeKind) {
		s, clock := k.newTestStore(t)
		want := sampleSandbox("alice", "sbx1", "main", clock.Now())
		want.GoneReason = "none yet"
		want.RunningSince = clock.Now().Add(time.Hour) // what the store keeps, whatever the write says
		if err := s.PutSandbox(want); err != nil {
			t.Fatal(err)
		}
		got, err := s.Sandbox("alice", "sbx1")
		if err != nil {
			t.Fatal(err)
		}
		want.RunningSince = clock.Now()
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("Sandbox = %+v, want %+v", got, want)
		}
		owners, err := s.Owners()
		if err != nil || len(owners) != 1 || owners[0] != "alice" {
			t.Fatalf("Owners = %v, %v; want [alice]", owners, err)
		}

		// Replace: a record without token, policy or session is stored as such.
		repl := SandboxRecord{ID: "sbx1", Owner: "alice", State: StateGone, GoneReason: "killed", Created: clock.Now()}
		if err := s.PutSandbox(repl); err != nil {
			t.Fatal(err)
		}
		if got, err = s.Sandbox("alice", "sbx1"); err != nil || !reflect.DeepEqual(got, repl) {
			t.Fatalf("after replace: %+v, %v; want %+v", got, err, repl)
		}

		// A reopened store (as after a restart) sees the same record.
		again := k.reopen(t, s, Options{})
		if got, err = again.Sandbox("alice", "sbx1"); err != nil || !reflect.DeepEqual(got, repl) {
			t.Fatalf("after reopen: %+v, %v; want %+v", got, err, repl)
		}
	})
}

func TestPutSandboxDefaultsCreatedAndNormalisesTime(t *testing.T) {
	forEachStore(t, func(t *testing.T, k storeKind) {
		s, clock := k.newTestStore(t)
		r := SandboxRecord{ID: "a", Owner: "alice", State: StatePaused}
		if err := s.PutSandbox(r); err != nil {
			t.Fatal(err)
		}
		got, err := s.Sandbox("alice", "a")
		if err != nil {
			t.Fatal(err)
		}
		if !got.Created.Equal(clock.Now()) {
			t.Fatalf("Created = %v, want the clock's %v", got.Created, clock.Now())
		}
		local := time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("X", 3600))
		r.Created = local
		if err := s.PutSandbox(r); err != nil {
			t.Fatal(err)
		}
		if got, _ = s.Sandbox("alice", "a"); !got.Created.Equal(local) || got.Created.Location() != time.UTC {
			t.Fatalf("Created = %v, want %v in UTC", got.Created, local)
		}
	})
}

func TestSandboxOwnerIsolation(t *testing.T) {
	forEachStore(t, func(t *testing.T, k storeKind) {
		s, clock := k.newTestStore(t)
		if err := s.PutSandbox(sampleSandbox("alice", "sbx1", "main", clock.Now())); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Sandbox("bob", "sbx1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("bob reading alice's sandbox: %v, want ErrNotFound", err)
		}
		if _, err := s.UpdateSandbox("bob", "sbx1", func(*SandboxRecord) error { return nil }); !errors.Is(err, ErrNotFound) {
			t.Fatalf("bob updating alice's sandbox: %v, want ErrNotFound", err)
		}
		if err := s.DeleteSandbox("bob", "sbx1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("bob deleting alice's sandbox: %v, want ErrNotFound", err)
		}
		if got, err := s.SessionSandboxes("bob", "main"); err != nil || len(got) != 0 {
			t.Fatalf("bob's session lists %+v, %v", got, err)
		}
		// Owners that are prefixes of each other stay apart.
		if err := s.PutSandbox(sampleSandbox("alic", "sbx1", "main", clock.Now())); err != nil {
			t.Fatal(err)
		}
		if got, err := s.SessionSandboxes("alic", "main"); err != nil || len(got) != 1 || got[0].Owner != "alic" {
			t.Fatalf("alic's session = %+v, %v", got, err)
		}
		if _, err := s.Sandbox("alice", "sbx1"); err != nil {
			t.Fatal(err)
		}
	})
}

func TestSessionAndAllSandboxes(t *testing.T) {
	forEachStore(t, func(t *testing.T, k storeKind) {
		s, clock := k.newTestStore(t)
		t0 := clock.Now()
		put := func(owner, id, session string, at time.Duration) {
			t.Helper()
			if err := s.PutSandbox(sampleSandbox(owner, id, session, t0.Add(at))); err != nil {
				t.Fatal(err)
			}
		}
		put("alice", "c", "main", 1*time.Second)
		put("alice", "a", "main", 3*time.Second)
		put("alice", "b", "main", 1*time.Second) // same Created as c: ID breaks the tie
		put("alice", "x", "other", 0)
		put("bob", "y", "main", 0)

		got, err := s.SessionSandboxes("alice", "main")
		if err != nil {
			t.Fatal(err)
		}
		if ids := sandboxIDs(got); ids != "alice/b alice/c alice/a" {
			t.Fatalf("SessionSandboxes = %s", ids)
		}
		for _, r := range got {
			if r.AccessToken != "envd-token-"+r.ID {
				t.Fatalf("token of %s = %q", r.ID, r.AccessToken)
			}
		}
		if got, err = s.SessionSandboxes("alice", "none"); err != nil || len(got) != 0 {
			t.Fatalf("empty session = %+v, %v", got, err)
		}
		all, err := s.AllSandboxes()
		if err != nil {
			t.Fatal(err)
		}
		if ids := sandboxIDs(all); ids != "alice/x alice/b alice/c alice/a bob/y" {
			t.Fatalf("AllSandboxes = %s", ids)
		}
	})
}

// SandboxesByState counts every owner's sandboxes as they are now, and needs no data key: a Store whose key
// source refuses counts them all the same, without asking it.
func TestSandboxesByState(t *testing.T) {
	forEachStore(t, func(t *testing.T, k storeKind) {
		s, clock := k.newTestStore(t)
		keys := &countingKeys{}
		counter := k.reopen(t, s, Options{Keys: keys})
		count := func(want map[string]int) {
			t.Helper()
			got, err := counter.SandboxesByState()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("SandboxesByState = %v, want %v", got, want)
			}
		}
		count(map[string]int{})
		for i, st := range []string{StateRunning, StatePaused, StateRunning, StateGone, StateRunning} {
			r := sampleSandbox([]string{"alice", "bob"}[i%2], fmt.Sprintf("sbx%d", i), "main", clock.Now())
			r.State = st
			if err := s.PutSandbox(r); err != nil {
				t.Fatal(err)
			}
		}
		count(map[string]int{StateRunning: 3, StatePaused: 1, StateGone: 1})
		if _, err := s.UpdateSandbox("alice", "sbx0", func(r *SandboxRecord) error { r.State = StatePaused; return nil }); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteSandbox("bob", "sbx3"); err != nil {
			t.Fatal(err)
		}
		count(map[string]int{StateRunning: 2, StatePaused: 2})
		if n := keys.asked.Load(); n != 0 {
			t.Fatalf("counting asked for the data key %d times", n)
		}
	})
}

// countingKeys is a data key source that counts the times it is asked and gives no key.
type countingKeys struct{ asked atomic.Int32 }

func (k *countingKeys) DataKey() ([]byte, error) {
	k.asked.Add(1)
	return nil, errors.New("the data key was asked for")
}

func TestUpdateSandbox(t *testing.T) {
	forEachStore(t, func(t *testing.T, k storeKind) {
		s, clock := k.newTestStore(t)
		orig := sampleSandbox("alice", "sbx1", "main", clock.Now())
		if err := s.PutSandbox(orig); err != nil {
			t.Fatal(err)
		}

		got, err := s.UpdateSandbox("alice", "sbx1", func(r *SandboxRecord) error {
			r.State, r.GoneReason, r.Steps = StateGone, "expired", r.Steps+1
			r.AccessToken = "rotated"
			r.Checkpoint = nil
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		want := orig
		want.State, want.GoneReason, want.Steps, want.AccessToken, want.Checkpoint = StateGone, "expired", 4, "rotated", nil
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("UpdateSandbox returned %+v, want %+v", got, want)
		}
		if stored, err := s.Sandbox("alice", "sbx1"); err != nil || !reflect.DeepEqual(stored, want) {
			t.Fatalf("stored %+v, %v; want %+v", stored, err, want)
		}

		for _, tc := range []struct {
			name string
			fn   func(*SandboxRecord) error
			want string
		}{
			{"callback error", func(r *SandboxRecord) error { r.Steps = 99; return errors.New("changed my mind") }, "changed my mind"},
			{"owner change", func(r *SandboxRecord) error { r.Owner = "bob"; return nil }, "may not change the owner or ID"},
			{"id change", func(r *SandboxRecord) error { r.ID = "other"; return nil }, "may not change the owner or ID"},
			{"invalid state", func(r *SandboxRecord) error { r.State = "dancing"; return nil }, `unknown state "dancing"`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				_, err := s.UpdateSandbox("alice", "sbx1", tc.fn)
				wantErr(t, err, tc.want)
				if stored, err := s.Sandbox("alice", "sbx1"); err != nil || !reflect.DeepEqual(stored, want) {
					t.Fatalf("failed update changed the record: %+v, %v", stored, err)
				}
			})
		}
		if _, err := s.UpdateSandbox("alice", "nope", func(*SandboxRecord) error { return nil }); !errors.Is(err, ErrNotFound) {
			t.Fatalf("update of missing sandbox: %v, want ErrNotFound", err)
		}
	})
}

func TestUpdateSandboxCallbackPanicPropagates(t *testing.T) {
	forEachStore(t, func(t *testing.T, k storeKind) {
		s, clock := k.newTestStore(t)
		if err := s.PutSandbox(sampleSandbox("alice", "sbx1", "main", clock.Now())); err != nil {
			t.Fatal(err)
		}
		func() {
			defer func() {
				if r := recover(); r != "boom" {
					t.Fatalf("recovered %v, want the callback's panic", r)
				}
			}()
			_, _ = s.UpdateSandbox("alice", "sbx1", func(r *SandboxRecord) error { r.Steps = 50; panic("boom") })
		}()
		// The transaction was rolled back and the store is still usable.
		got, err := s.UpdateSandbox("alice", "sbx1", func(r *SandboxRecord) error { r.Steps++; return nil })
		if err != nil || got.Steps != 4 {
			t.Fatalf("after panic: %+v, %v; want Steps 4", got, err)
		}
	})
}

func TestConcurrentUpdatesLoseNothing(t *testing.T) {
	forEachStore(t, func(t *testing.T, k storeKind) {
		s, clock := k.newTestStore(t)
		if err := s.PutSandbox(sampleSandbox("alice", "sbx1", "main", clock.Now())); err != nil {
			t.Fatal(err)
		}
		// Half the writers go through a second Store on the same directory, as a second server in one process would.
		other := k.reopen(t, s, Options{})
		const workers, each = 8, 15
		var wg sync.WaitGroup
		errs := make(chan error, 2*workers)
		for w := range workers {
			st := s
			if w%2 == 1 {
				st = other
			}
			wg.Go(func() {
				for range each {
					if _, err := st.UpdateSandbox("alice", "sbx1", func(r *SandboxRecord) error { r.Steps++; return nil }); err != nil {
						errs <- err
						return
					}
				}
			})
			wg.Go(func() { // readers alongside
				for range each {
					if _, err := s.SessionSandboxes("alice", "main"); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		waitfor.Return(t, time.Minute, "the concurrent writers", wg.Wait)
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		got, err := s.Sandbox("alice", "sbx1")
		if err != nil {
			t.Fatal(err)
		}
		if want := 3 + workers*each; got.Steps != want {
			t.Fatalf("Steps = %d, want %d", got.Steps, want)
		}
	})
}

func TestDeleteSandbox(t *testing.T) {
	forEachStore(t, func(t *testing.T, k storeKind) {
		s, clock := k.newTestStore(t)
		for _, id := range []string{"a", "b"} {
			if err := s.PutSandbox(sampleSandbox("alice", id, "main", clock.Now())); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.PutCheckpoint(Checkpoint{ID: "cp", Owner: "alice", Session: "main", SandboxID: "a", SnapshotID: "snap"}); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteSandbox("alice", "a"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Sandbox("alice", "a"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("deleted sandbox: %v, want ErrNotFound", err)
		}
		if err := s.DeleteSandbox("alice", "a"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("second delete: %v, want ErrNotFound", err)
		}
		if got, err := s.SessionSandboxes("alice", "main"); err != nil || sandboxIDs(got) != "alice/b" {
			t.Fatalf("remaining: %s, %v", sandboxIDs(got), err)
		}
		if _, err := s.Checkpoint("alice", "cp"); err != nil {
			t.Fatalf("checkpoint of a deleted sandbox must survive (it can be restored): %v", err)
		}
	})
}

func TestPutSandboxValidation(t *testing.T) {
	forEachStore(t, func(t *testing.T, k storeKind) {
		s, clock := k.newTestStore(t)
		ok := sampleSandbox("alice", "sbx1", "main", clock.Now())
		for _, tc := range []struct {
			name   string
			modify func(*SandboxRecord)
			want   string
		}{
			{"no owner", func(r *SandboxRecord) { r.Owner = "" }, "sandbox owner is empty"},
			{"no id", func(r *SandboxRecord) { r.ID = "" }, "sandbox ID is empty"},
			{"NUL id", func(r *SandboxRecord) { r.ID = "a\x00b" }, "NUL"},
			{"NUL session", func(r *SandboxRecord) { r.Session = "a\x00b" }, "NUL"},
			{"no state", func(r *SandboxRecord) { r.State = "" }, "unknown state"},
			{"negative steps", func(r *SandboxRecord) { r.Steps = -1 }, "negative"},
			{"negative timeout", func(r *SandboxRecord) { r.TimeoutSeconds = -1 }, "negative"},
			{"negative policy", func(r *SandboxRecord) { r.Checkpoint = &CheckpointPolicy{EverySteps: -2} }, "negative checkpoint"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := ok
				tc.modify(&r)
				wantErr(t, s.PutSandbox(r), tc.want)
			})
		}
		if all, err := s.AllSandboxes(); err != nil || len(all) != 0 {
			t.Fatalf("invalid records were stored: %+v, %v", all, err)
		}
	})
}

func sandboxIDs(rs []SandboxRecord) string {
	var b strings.Builder
	for i, r := range rs {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s/%s", r.Owner, r.ID)
	}
	return b.String()
}
