package tools

import (
	"context"
	"strings"
	"testing"

	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/state"
)

func recordState(t *testing.T, e *env, id string) state.SandboxRecord {
	t.Helper()
	rec, err := e.store.Sandbox("alice", id)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func TestPauseResume(t *testing.T) {
	t.Parallel()
	forEachEra(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, nil)
		s.exec(t, id, "echo kept > kept.txt")

		res := s.ok(t, "e2b_manage_sandbox", map[string]any{"sandbox_id": id, "action": "pause"})
		if res["success"] != true || res["action"] != "pause" || res["already_paused"] != nil {
			t.Fatalf("pause: %v", res)
		}
		if sb, _ := e.emu.Sandbox(id); sb.State != e2btest.StatePaused {
			t.Fatalf("emulator state %s", sb.State)
		}
		if rec := recordState(t, e, id); rec.State != state.StatePaused {
			t.Fatalf("record state %s", rec.State)
		}
		want := "Sandbox '" + id + "' is paused (by e2b_manage_sandbox); resume it with e2b_manage_sandbox action resume"
		for tool, args := range map[string]map[string]any{
			"e2b_exec":       {"sandbox_id": id, "command": "true"},
			"e2b_read_file":  {"sandbox_id": id, "path": "kept.txt"},
			"e2b_write_file": {"sandbox_id": id, "path": "x", "content": ""},
		} {
			if got := s.fail(t, tool, args); got != want {
				t.Errorf("%s on a paused sandbox: %q", tool, got)
			}
		}
		res = s.ok(t, "e2b_manage_sandbox", map[string]any{"sandbox_id": id, "action": "pause"})
		if res["success"] != true || res["already_paused"] != true {
			t.Fatalf("second pause: %v", res)
		}

		res = s.ok(t, "e2b_manage_sandbox", map[string]any{"sandbox_id": id, "action": "resume", "timeout_seconds": 120})
		if res["success"] != true || num(res["timeout_seconds"]) != 120 {
			t.Fatalf("resume: %v", res)
		}
		if rec := recordState(t, e, id); rec.State != state.StateRunning || rec.TimeoutSeconds != 120 {
			t.Fatalf("record after resume: %+v", rec)
		}
		if out := s.exec(t, id, "cat kept.txt"); out["stdout"] != "kept\n" {
			t.Fatalf("after resume: %v", out)
		}
		res = s.ok(t, "e2b_manage_sandbox", map[string]any{"sandbox_id": id, "action": "resume"})
		if num(res["timeout_seconds"]) != DefaultTimeoutSeconds {
			t.Fatalf("resume default timeout: %v", res)
		}
	})
}

// TestPausedBehindOurBack: a sandbox paused elsewhere (the dashboard) is found out and recorded when it was made
// to be killed at its timeout; one made to pause then has E2B's autoResume, so the call's own traffic resumes it.
func TestPausedBehindOurBack(t *testing.T) {
	t.Parallel()
	forEachEra(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, map[string]any{"on_timeout": "kill"})
		if _, err := e.e2bClient(t, aliceKey).PauseSandbox(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		got := s.fail(t, "e2b_exec", map[string]any{"sandbox_id": id, "command": "true"})
		if got != "Sandbox '"+id+"' is paused; resume it with e2b_manage_sandbox action resume" {
			t.Fatalf("got %q", got)
		}
		if rec := recordState(t, e, id); rec.State != state.StatePaused {
			t.Fatalf("record state %s", rec.State)
		}

		woken := s.createSandbox(t, nil)
		if _, err := e.e2bClient(t, aliceKey).PauseSandbox(context.Background(), woken); err != nil {
			t.Fatal(err)
		}
		if out := s.exec(t, woken, "echo awake"); out["stdout"] != "awake\n" {
			t.Fatalf("exec on a paused autoResume sandbox: %v", out)
		}
		if sb, _ := e.emu.Sandbox(woken); sb.State != e2btest.StateRunning {
			t.Fatalf("emulator state %s", sb.State)
		}
	})
}

func TestDelete(t *testing.T) {
	t.Parallel()
	forEachEra(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, nil)
		keep := s.createSandbox(t, nil)
		res := s.ok(t, "e2b_manage_sandbox", map[string]any{"sandbox_id": id, "action": "delete"})
		if res["success"] != true || res["action"] != "delete" {
			t.Fatalf("delete: %v", res)
		}
		if _, ok := e.emu.Sandbox(id); ok {
			t.Fatal("the sandbox still exists at E2B")
		}
		list := s.ok(t, "e2b_list_sandboxes", nil)
		if num(list["count"]) != 1 || list["sandboxes"].([]any)[0].(map[string]any)["sandbox_id"] != keep {
			t.Fatalf("list after delete: %v", list)
		}
		got := s.fail(t, "e2b_manage_sandbox", map[string]any{"sandbox_id": id, "action": "delete"})
		if got != "Sandbox '"+id+"' not found in this session. Sandboxes in this session: "+keep {
			t.Fatalf("second delete: %q", got)
		}
		// A sandbox E2B already lost is deleted without complaint.
		e.emu.Vanish(keep)
		s.ok(t, "e2b_manage_sandbox", map[string]any{"sandbox_id": keep, "action": "delete"})
		if _, err := e.store.Sandbox("alice", keep); err == nil {
			t.Fatal("the record of a deleted sandbox is still there")
		}
	})
}

func TestVanishedSandbox(t *testing.T) {
	t.Parallel()
	forEachEra(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, nil)
		e.emu.Vanish(id)
		got := s.fail(t, "e2b_exec", map[string]any{"sandbox_id": id, "command": "true"})
		wantContains(t, got, "Sandbox '"+id+"' is gone (", "e2b_create_sandbox")
		rec := recordState(t, e, id)
		if rec.State != state.StateGone || rec.GoneReason == "" {
			t.Fatalf("record %+v", rec)
		}
		got = s.fail(t, "e2b_manage_sandbox", map[string]any{"sandbox_id": id, "action": "resume"})
		wantContains(t, got, "is gone")

		// Resuming one that vanished while the record said paused finds out the same way.
		id2 := s.createSandbox(t, nil)
		s.ok(t, "e2b_manage_sandbox", map[string]any{"sandbox_id": id2, "action": "pause"})
		e.emu.Vanish(id2)
		got = s.fail(t, "e2b_manage_sandbox", map[string]any{"sandbox_id": id2, "action": "resume"})
		wantContains(t, got, "Sandbox '"+id2+"' is gone (")
		if rec := recordState(t, e, id2); rec.State != state.StateGone {
			t.Fatalf("record %+v", rec)
		}
	})
}

func TestCheckpointOnPause(t *testing.T) {
	t.Parallel()
	forEachEra(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, nil)
		res := s.ok(t, "e2b_manage_sandbox", map[string]any{"sandbox_id": id, "action": "pause"})
		cp, _ := res["checkpoint_id"].(string)
		if !strings.HasPrefix(cp, "ckpt_") {
			t.Fatalf("pause with on_pause: %v", res)
		}
		cps := s.ok(t, "e2b_list_checkpoints", nil)
		if num(cps["count"]) != 1 {
			t.Fatalf("checkpoints %v", cps)
		}
		if sb, _ := e.emu.Sandbox(id); sb.State != e2btest.StatePaused {
			t.Fatalf("not paused after the checkpoint: %s", sb.State)
		}
		// Pausing a paused sandbox takes no second checkpoint.
		res = s.ok(t, "e2b_manage_sandbox", map[string]any{"sandbox_id": id, "action": "pause"})
		if res["checkpoint_id"] != nil {
			t.Fatalf("second pause: %v", res)
		}
	}, func(c *Config) { c.Checkpoints = state.CheckpointPolicy{OnPause: true} })
}
