package state

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestCheckpoints(t *testing.T) {
	forEachStore(t, func(t *testing.T, k storeKind) {
		s, clock := k.newTestStore(t)
		t0 := clock.Now()
		cps := []Checkpoint{
			{ID: "cp3", Owner: "alice", Session: "main", SandboxID: "sbx1", SnapshotID: "snap3", Name: "late", Step: 9, Created: t0.Add(2 * time.Minute)},
			{ID: "cp1", Owner: "alice", Session: "main", SandboxID: "sbx1", SnapshotID: "snap1", Name: "first", Step: 1, Created: t0},
			{ID: "cp2", Owner: "alice", Session: "main", SandboxID: "sbx2", SnapshotID: "snap2", Step: 4, Created: t0.Add(time.Minute)},
			{ID: "cp4", Owner: "alice", Session: "other", SandboxID: "sbx1", SnapshotID: "snap4", Created: t0},
			{ID: "cp5", Owner: "bob", Session: "main", SandboxID: "sbx1", SnapshotID: "snap5", Created: t0},
		}
		for _, c := range cps {
			if err := s.PutCheckpoint(c); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.Checkpoint("alice", "cp1")
		if err != nil || !reflect.DeepEqual(got, cps[1]) {
			t.Fatalf("Checkpoint = %+v, %v; want %+v", got, err, cps[1])
		}
		if _, err := s.Checkpoint("bob", "cp1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("bob reading alice's checkpoint: %v, want ErrNotFound", err)
		}

		for _, tc := range []struct{ owner, session, sandbox, want string }{
			{"alice", "main", "", "cp1 cp2 cp3"},
			{"alice", "main", "sbx1", "cp1 cp3"},
			{"alice", "main", "sbx9", ""},
			{"alice", "other", "", "cp4"},
			{"bob", "main", "", "cp5"},
			{"carol", "main", "", ""},
		} {
			list, err := s.SessionCheckpoints(tc.owner, tc.session, tc.sandbox)
			if err != nil {
				t.Fatal(err)
			}
			if ids := checkpointIDs(list); ids != tc.want {
				t.Errorf("SessionCheckpoints(%q, %q, %q) = %q, want %q", tc.owner, tc.session, tc.sandbox, ids, tc.want)
			}
		}

		// Replace, then delete.
		renamed := cps[1]
		renamed.Name = "renamed"
		if err := s.PutCheckpoint(renamed); err != nil {
			t.Fatal(err)
		}
		if got, err = s.Checkpoint("alice", "cp1"); err != nil || got.Name != "renamed" {
			t.Fatalf("after replace: %+v, %v", got, err)
		}
		if err := s.DeleteCheckpoint("alice", "cp1"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Checkpoint("alice", "cp1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("deleted checkpoint: %v, want ErrNotFound", err)
		}
		if err := s.DeleteCheckpoint("alice", "cp1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("second delete: %v, want ErrNotFound", err)
		}
		if err := s.DeleteCheckpoint("bob", "cp2"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("bob deleting alice's checkpoint: %v, want ErrNotFound", err)
		}
	})
}

func TestPutCheckpointDefaultsAndValidation(t *testing.T) {
	forEachStore(t, func(t *testing.T, k storeKind) {
		s, clock := k.newTestStore(t)
		if err := s.PutCheckpoint(Checkpoint{ID: "cp", Owner: "alice", SandboxID: "sbx", SnapshotID: "snap"}); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Checkpoint("alice", "cp"); err != nil || !got.Created.Equal(clock.Now()) {
			t.Fatalf("Created = %v, %v; want the clock's %v", got.Created, err, clock.Now())
		}
		for _, tc := range []struct {
			c    Checkpoint
			want string
		}{
			{Checkpoint{ID: "cp"}, "checkpoint owner is empty"},
			{Checkpoint{Owner: "alice"}, "checkpoint ID is empty"},
			{Checkpoint{ID: "cp", Owner: "alice", Step: -1}, "negative step"},
		} {
			wantErr(t, s.PutCheckpoint(tc.c), tc.want)
		}
	})
}

func checkpointIDs(cs []Checkpoint) string {
	ids := make([]string, len(cs))
	for i, c := range cs {
		ids[i] = c.ID
	}
	return strings.Join(ids, " ")
}
