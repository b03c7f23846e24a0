package state

import (
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

func never(SandboxRecord) bool  { return false }
func always(SandboxRecord) bool { return true }

// stepless is sampleSandbox with no steps yet.
func stepless(owner, id string) SandboxRecord {
	r := sampleSandbox(owner, id, "main", time.Now())
	r.Steps = 0
	return r
}

// Steps are counted in memory and written in batches: within the second, at the store's close, and at once with
// any pending when the caller needs the count exact. Another process (here another store on the same data) sees
// a step once it is written; the counting process sees its own at once.
func TestStepCountsAreWrittenInBatches(t *testing.T) {
	forEachStore(t, func(t *testing.T, k storeKind) {
		where := k.fresh(t)
		counting := k.open(t, where, Options{})
		other := k.open(t, where, Options{})
		if err := counting.PutSandbox(stepless("alice", "sbx")); err != nil {
			t.Fatal(err)
		}
		stored := func() int {
			t.Helper()
			r, err := other.Sandbox("alice", "sbx")
			if err != nil {
				t.Fatal(err)
			}
			return r.Steps
		}
		count := func(exact func(SandboxRecord) bool, want int) {
			t.Helper()
			r, err := counting.CountStep("alice", "sbx", exact)
			if err != nil || r.Steps != want {
				t.Fatalf("CountStep: steps %d, %v; want %d", r.Steps, err, want)
			}
		}
		for i := 1; i <= 5; i++ {
			count(never, i)
		}
		if r, err := counting.Sandbox("alice", "sbx"); err != nil || r.Steps != 5 {
			t.Fatalf("the counting store reads %d steps (%v), want its 5", r.Steps, err)
		}
		if list, err := counting.SessionSandboxes("alice", "main"); err != nil || len(list) != 1 || list[0].Steps != 5 {
			t.Fatalf("the counting store lists %+v (%v), want 5 steps", list, err)
		}
		if n := stored(); n >= 5 {
			t.Fatalf("5 steps were written one by one (another store reads %d at once)", n)
		}
		count(always, 6)
		if n := stored(); n != 6 {
			t.Fatalf("an exact count wrote %d steps, want 6 (the pending ones with it)", n)
		}
		count(never, 7)
		waitfor.Until(t, 10*time.Second, "the batch of step 7 to be written", func() bool { return stored() == 7 })
		count(never, 8)
		count(never, 9)
		if err := counting.Close(); err != nil {
			t.Fatal(err)
		}
		if n := stored(); n != 9 {
			t.Fatalf("after the counting store closed, another reads %d steps, want 9", n)
		}
	})
}

// A step counted for a sandbox whose record then goes is dropped when the batch is written; the batch's other
// sandboxes are written.
func TestStepsOfARemovedSandboxAreDropped(t *testing.T) {
	forEachStore(t, func(t *testing.T, k storeKind) {
		where := k.fresh(t)
		s := k.open(t, where, Options{})
		for _, id := range []string{"gone", "kept"} {
			if err := s.PutSandbox(stepless("alice", id)); err != nil {
				t.Fatal(err)
			}
			if _, err := s.CountStep("alice", id, never); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.DeleteSandbox("alice", "gone"); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		again := k.open(t, where, Options{})
		if r, err := again.Sandbox("alice", "kept"); err != nil || r.Steps != 1 {
			t.Fatalf("kept: %d steps, %v", r.Steps, err)
		}
		if _, err := again.Sandbox("alice", "gone"); err == nil {
			t.Fatal("the removed sandbox came back with its step")
		}
	})
}

// BenchmarkCountStep is a step of e2b_exec: written with the next batch, or at once (exact) as every step was.
func BenchmarkCountStep(b *testing.B) {
	forEachStoreB(b, func(b *testing.B, k storeKind) {
		for _, mode := range []struct {
			name  string
			exact func(SandboxRecord) bool
		}{{"batched", never}, {"exact", always}} {
			b.Run(mode.name, func(b *testing.B) {
				s, clock := k.newTestStore(b)
				if err := s.PutSandbox(sampleSandbox("alice", "sbx", "main", clock.Now())); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				for b.Loop() {
					if _, err := s.CountStep("alice", "sbx", mode.exact); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	})
}
