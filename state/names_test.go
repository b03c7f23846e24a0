package state

import (
	"errors"
	"testing"
)

// Names come from callers (owners from tokens, sessions from a header, IDs from tool arguments). Quotes and SQL
// in them are data, and names no record can have (NUL, invalid UTF-8) find nothing rather than failing.
func TestHostileNames(t *testing.T) {
	forEachStore(t, func(t *testing.T, k storeKind) {
		s, clock := k.newTestStore(t)
		owner, id := `o'; DROP TABLE e2b_mcp_sandboxes; --`, `x" OR "1"="1`
		r := sampleSandbox(owner, id, `s'--`, clock.Now())
		if err := s.PutSandbox(r); err != nil {
			t.Fatal(err)
		}
		if err := s.PutSandbox(sampleSandbox("bob", "b1", "main", clock.Now())); err != nil {
			t.Fatal(err)
		}
		got, err := s.Sandbox(owner, id)
		if err != nil || got.ID != id || got.Owner != owner {
			t.Fatalf("Sandbox = %+v, %v", got, err)
		}
		if list, err := s.SessionSandboxes(owner, `s'--`); err != nil || len(list) != 1 {
			t.Fatalf("SessionSandboxes = %v, %v", list, err)
		}
		if all, err := s.AllSandboxes(); err != nil || len(all) != 2 {
			t.Fatalf("AllSandboxes = %d records, %v; want both", len(all), err)
		}
		for _, bad := range []string{"a\x00b", "\xff\xfe", ""} {
			if _, err := s.Sandbox("bob", bad); !errors.Is(err, ErrNotFound) {
				t.Errorf("Sandbox(bob, %q) = %v, want ErrNotFound", bad, err)
			}
			if _, err := s.Sandbox(bad, "b1"); !errors.Is(err, ErrNotFound) {
				t.Errorf("Sandbox(%q, b1) = %v, want ErrNotFound", bad, err)
			}
			if err := s.DeleteSandbox("bob", bad); !errors.Is(err, ErrNotFound) {
				t.Errorf("DeleteSandbox(bob, %q) = %v, want ErrNotFound", bad, err)
			}
			if _, err := s.Checkpoint("bob", bad); !errors.Is(err, ErrNotFound) {
				t.Errorf("Checkpoint(bob, %q) = %v, want ErrNotFound", bad, err)
			}
			if list, err := s.SessionSandboxes(bad, "main"); err != nil || len(list) != 0 {
				t.Errorf("SessionSandboxes(%q) = %v, %v", bad, list, err)
			}
			if list, err := s.SessionCheckpoints(bad, "main", ""); err != nil || len(list) != 0 {
				t.Errorf("SessionCheckpoints(%q) = %v, %v", bad, list, err)
			}
			if _, err := s.TouchSession("bob", bad, 0); err == nil {
				t.Errorf("TouchSession(bob, %q) was accepted", bad)
			}
		}
		// Text fields with NUL and invalid UTF-8 are kept as the bbolt file's JSON keeps them.
		odd := sampleSandbox("bob", "b2", "main", clock.Now())
		odd.Title, odd.GoneReason = "a\x00b", "bad \xff byte"
		if err := s.PutSandbox(odd); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Sandbox("bob", "b2"); err != nil || got.Title != "a\x00b" || got.GoneReason != "bad \ufffd byte" {
			t.Fatalf("odd text fields read back as %q, %q, %v", got.Title, got.GoneReason, err)
		}
	})
}
