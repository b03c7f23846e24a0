package tools

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestCheckpointAndForkFromIt(t *testing.T) {
	t.Parallel()
	forEachEra(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, map[string]any{"title": "origin"})
		s.ok(t, "e2b_write_file", map[string]any{"sandbox_id": id, "path": "before.txt", "content": "before\n"})

		cp := s.ok(t, "e2b_checkpoint_sandbox", map[string]any{"sandbox_id": id, "name": "known good"})
		cpID, _ := cp["checkpoint_id"].(string)
		if !strings.HasPrefix(cpID, "ckpt_") || cp["sandbox_id"] != id || cp["name"] != "known good" || num(cp["step"]) != 1 {
			t.Fatalf("checkpoint: %v", cp)
		}
		if created, err := time.Parse(time.RFC3339Nano, cp["created"].(string)); err != nil || time.Since(created) > time.Minute {
			t.Fatalf("created %v", cp["created"])
		}
		// The sandbox carries on after the checkpoint.
		s.ok(t, "e2b_write_file", map[string]any{"sandbox_id": id, "path": "after.txt", "content": "after\n"})

		fork := s.ok(t, "e2b_fork_sandbox", map[string]any{"checkpoint_id": cpID, "count": 2})
		if num(fork["count"]) != 2 {
			t.Fatalf("fork: %v", fork)
		}
		src := fork["source"].(map[string]any)
		if src["sandbox_id"] != id || src["checkpoint_id"] != cpID {
			t.Fatalf("source: %v", src)
		}
		for i, x := range fork["sandboxes"].([]any) {
			f := x.(map[string]any)
			fid := f["sandbox_id"].(string)
			if fid == id || f["status"] != "running" || f["workspace_path"] != "/home/user" {
				t.Fatalf("fork %d: %v", i, f)
			}
			if want := "origin (fork) #" + string(rune('1'+i)); f["title"] != want {
				t.Errorf("fork title %v, want %q", f["title"], want)
			}
			out := s.exec(t, fid, "cat before.txt; test -e after.txt && echo after-exists || echo no-after")
			if out["stdout"] != "before\nno-after\n" {
				t.Fatalf("fork %s holds %q", fid, out["stdout"])
			}
			rec := recordState(t, e, fid)
			if rec.Session != "main" || rec.AccessToken == "" || rec.Steps < 1 {
				t.Fatalf("fork record %+v", rec)
			}
		}
		list := s.ok(t, "e2b_list_sandboxes", nil)
		if num(list["count"]) != 3 {
			t.Fatalf("list after forking: %v", list)
		}

		// A live fork copies the sandbox as it is now.
		live := s.ok(t, "e2b_fork_sandbox", map[string]any{"sandbox_id": id, "title": "copy"})
		f := live["sandboxes"].([]any)[0].(map[string]any)
		if f["title"] != "copy" || live["source"].(map[string]any)["checkpoint_id"] != nil {
			t.Fatalf("live fork: %v", live)
		}
		if out := s.exec(t, f["sandbox_id"].(string), "cat before.txt after.txt"); out["stdout"] != "before\nafter\n" {
			t.Fatalf("live fork holds %q", out["stdout"])
		}
	})
}

func TestCheckpointListAndDelete(t *testing.T) {
	t.Parallel()
	forEachEra(t, func(t *testing.T, e *env, s *session) {
		a := s.createSandbox(t, nil)
		b := s.createSandbox(t, nil)
		s.exec(t, a, "true")
		s.exec(t, a, "true")
		cpA := s.ok(t, "e2b_checkpoint_sandbox", map[string]any{"sandbox_id": a})
		if cpA["name"] != "step 2" || num(cpA["step"]) != 2 {
			t.Fatalf("default name: %v", cpA)
		}
		cpB := s.ok(t, "e2b_checkpoint_sandbox", map[string]any{"sandbox_id": b, "name": "b"})

		all := s.ok(t, "e2b_list_checkpoints", nil)
		if num(all["count"]) != 2 {
			t.Fatalf("all: %v", all)
		}
		onlyB := s.ok(t, "e2b_list_checkpoints", map[string]any{"sandbox_id": b})
		if num(onlyB["count"]) != 1 || onlyB["checkpoints"].([]any)[0].(map[string]any)["checkpoint_id"] != cpB["checkpoint_id"] {
			t.Fatalf("only b: %v", onlyB)
		}

		c := e.e2bClient(t, aliceKey)
		before, err := c.ListSnapshots(context.Background(), "")
		if err != nil {
			t.Fatal(err)
		}
		res := s.ok(t, "e2b_delete_checkpoint", map[string]any{"checkpoint_id": cpA["checkpoint_id"]})
		if res["success"] != true || res["checkpoint_id"] != cpA["checkpoint_id"] {
			t.Fatalf("delete: %v", res)
		}
		after, err := c.ListSnapshots(context.Background(), "")
		if err != nil {
			t.Fatal(err)
		}
		if len(after) != len(before)-1 {
			t.Fatalf("snapshots at E2B: %d before, %d after", len(before), len(after))
		}
		all = s.ok(t, "e2b_list_checkpoints", nil)
		if num(all["count"]) != 1 {
			t.Fatalf("after delete: %v", all)
		}
		got := s.fail(t, "e2b_fork_sandbox", map[string]any{"checkpoint_id": cpA["checkpoint_id"]})
		wantContains(t, got, "Checkpoint '"+cpA["checkpoint_id"].(string)+"' not found in this session. Checkpoints in this session: "+cpB["checkpoint_id"].(string))

		// Checkpoints outlive their sandbox.
		s.ok(t, "e2b_manage_sandbox", map[string]any{"sandbox_id": b, "action": "delete"})
		fork := s.ok(t, "e2b_fork_sandbox", map[string]any{"checkpoint_id": cpB["checkpoint_id"]})
		if num(fork["count"]) != 1 {
			t.Fatalf("fork of a deleted sandbox's checkpoint: %v", fork)
		}
	})
}

// E2B checkpoints running sandboxes only, and answers 404 ("doesn't exist or you don't have access") for a paused
// one. The model is told the sandbox is paused and how to resume it, whether the server paused it or E2B did.
func TestCheckpointOfAPausedSandbox(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.connect(t, eras[0], Caller{Owner: "alice", Session: "main"})
	id := s.createSandbox(t, nil)
	s.ok(t, "e2b_manage_sandbox", map[string]any{"sandbox_id": id, "action": "pause"})
	want := "Sandbox '" + id + "' is paused (by e2b_manage_sandbox); resume it with e2b_manage_sandbox action resume"
	if got := s.fail(t, "e2b_checkpoint_sandbox", map[string]any{"sandbox_id": id}); got != want {
		t.Errorf("checkpoint of a paused sandbox: %q, want %q", got, want)
	}

	other := s.createSandbox(t, nil)
	if _, err := e.e2bClient(t, aliceKey).PauseSandbox(t.Context(), other); err != nil {
		t.Fatal(err)
	}
	want = "Sandbox '" + other + "' had been paused by E2B (at its timeout); call again and it is resumed first (or resume it with e2b_manage_sandbox action resume)."
	if got := s.fail(t, "e2b_checkpoint_sandbox", map[string]any{"sandbox_id": other}); got != want {
		t.Errorf("checkpoint of a sandbox E2B paused: %q, want %q", got, want)
	}
	if cps := s.ok(t, "e2b_list_checkpoints", nil); num(cps["count"]) != 0 {
		t.Errorf("checkpoints recorded: %v", cps)
	}
}
