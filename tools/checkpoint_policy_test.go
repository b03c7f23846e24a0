package tools

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
	"github.com/e2b-mcp/e2b-mcp/state"
)

// setPolicy calls e2b_set_checkpoint_policy, which must succeed, and checks its answer.
func (s *session) setPolicy(t *testing.T, args map[string]any, everySteps int, onPause bool, source string) {
	t.Helper()
	res := s.ok(t, "e2b_set_checkpoint_policy", args)
	if res["sandbox_id"] != args["sandbox_id"] || num(res["every_steps"]) != everySteps || res["on_pause"] != onPause || res["source"] != source {
		t.Fatalf("e2b_set_checkpoint_policy %v = %v, want every_steps %d, on_pause %v, source %s", args, res, everySteps, onPause, source)
	}
}

// checkpointTaken runs a step on id and reports whether the policy took a checkpoint after it.
func (s *session) checkpointTaken(t *testing.T, id string) bool {
	t.Helper()
	res := s.exec(t, id, "true")
	if w, _ := res["warning"].(string); w != "" {
		t.Fatalf("exec warned: %s", w)
	}
	return res["checkpoint_id"] != nil
}

// TestSetCheckpointPolicy: the override applies to its sandbox only, starts from the policy in force, is no
// step, asks nothing of E2B, and reset returns the sandbox to the session's policy.
func TestSetCheckpointPolicy(t *testing.T) {
	t.Parallel()
	forEachEra(t, func(t *testing.T, e *env, s *session) {
		a := s.createSandbox(t, nil)
		b := s.createSandbox(t, nil)
		s.setPolicy(t, map[string]any{"sandbox_id": a}, 0, false, "session")

		e.emu.ResetRequests()
		s.setPolicy(t, map[string]any{"sandbox_id": a, "every_steps": 1}, 1, false, "sandbox")
		if reqs := e.emu.Requests(); len(reqs) != 0 {
			t.Fatalf("setting the policy reached E2B: %s %s", reqs[0].Method, reqs[0].Path)
		}
		if rec := recordState(t, e, a); rec.Steps != 0 || rec.Checkpoint == nil || *rec.Checkpoint != (state.CheckpointPolicy{EverySteps: 1}) {
			t.Fatalf("record after setting: %+v", rec)
		}
		s.setPolicy(t, map[string]any{"sandbox_id": b}, 0, false, "session")

		// every_steps now captures after each step of a, and never for b.
		for i := range 2 {
			if !s.checkpointTaken(t, a) {
				t.Fatalf("no checkpoint after step %d of %s", i+1, a)
			}
			if s.checkpointTaken(t, b) {
				t.Fatalf("checkpoint after step %d of %s, which has the session's policy", i+1, b)
			}
		}
		if cps := s.ok(t, "e2b_list_checkpoints", map[string]any{"sandbox_id": a}); num(cps["count"]) != 2 {
			t.Fatalf("checkpoints of a: %v", cps)
		}
		if cps := s.ok(t, "e2b_list_checkpoints", map[string]any{"sandbox_id": b}); num(cps["count"]) != 0 {
			t.Fatalf("checkpoints of b: %v", cps)
		}

		// A field given changes only itself; the other keeps its value in the sandbox's policy.
		s.setPolicy(t, map[string]any{"sandbox_id": a, "on_pause": true}, 1, true, "sandbox")
		s.setPolicy(t, map[string]any{"sandbox_id": a}, 1, true, "sandbox")
		// Setting what is already set changes nothing (idempotent).
		s.setPolicy(t, map[string]any{"sandbox_id": a, "on_pause": true}, 1, true, "sandbox")
		res := s.ok(t, "e2b_manage_sandbox", map[string]any{"sandbox_id": a, "action": "pause"})
		if !strings.HasPrefix(res["checkpoint_id"].(string), "ckpt_") {
			t.Fatalf("pause with on_pause set on the sandbox: %v", res)
		}
		if res := s.ok(t, "e2b_manage_sandbox", map[string]any{"sandbox_id": b, "action": "pause"}); res["checkpoint_id"] != nil {
			t.Fatalf("pause of b took a checkpoint: %v", res)
		}

		// The policy of a paused sandbox can be changed; reset brings back the session's (off here).
		s.setPolicy(t, map[string]any{"sandbox_id": a, "reset": true}, 0, false, "session")
		s.setPolicy(t, map[string]any{"sandbox_id": a, "reset": true}, 0, false, "session")
		if rec := recordState(t, e, a); rec.Checkpoint != nil || rec.Steps != 2 {
			t.Fatalf("record after reset: %+v", rec)
		}
		s.ok(t, "e2b_manage_sandbox", map[string]any{"sandbox_id": a, "action": "resume"})
		if s.checkpointTaken(t, a) {
			t.Fatal("checkpoint after a step of a reset sandbox, with the session's policy off")
		}

		// Forks inherit the sandbox's own policy.
		s.setPolicy(t, map[string]any{"sandbox_id": a, "every_steps": 5}, 5, false, "sandbox")
		fork := s.ok(t, "e2b_fork_sandbox", map[string]any{"sandbox_id": a})
		fid := fork["sandboxes"].([]any)[0].(map[string]any)["sandbox_id"].(string)
		s.setPolicy(t, map[string]any{"sandbox_id": fid}, 5, false, "sandbox")
	})
}

// TestCheckpointPolicyOverSession: with a session policy in force, a change starts from it, turning every_steps
// off silences the sandbox, and reset brings the session's policy back.
func TestCheckpointPolicyOverSession(t *testing.T) {
	t.Parallel()
	forEachEra(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, nil)
		s.setPolicy(t, map[string]any{"sandbox_id": id}, 2, true, "session")
		s.setPolicy(t, map[string]any{"sandbox_id": id, "every_steps": 0}, 0, true, "sandbox")
		for i := range 4 {
			if s.checkpointTaken(t, id) {
				t.Fatalf("checkpoint after step %d with every_steps 0", i+1)
			}
		}
		// Giving back exactly the session's values still pins them to the sandbox; only reset follows the session.
		s.setPolicy(t, map[string]any{"sandbox_id": id, "every_steps": 2}, 2, true, "sandbox")
		s.setPolicy(t, map[string]any{"sandbox_id": id, "reset": true}, 2, true, "session")
		if s.checkpointTaken(t, id) {
			t.Fatal("checkpoint after step 5 with every_steps 2")
		}
		if !s.checkpointTaken(t, id) {
			t.Fatal("no checkpoint after step 6 with the session's every_steps 2")
		}
	}, func(c *Config) { c.Checkpoints = state.CheckpointPolicy{EverySteps: 2, OnPause: true} })
}

func TestSetCheckpointPolicyRefusals(t *testing.T) {
	t.Parallel()
	forEachEra(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, nil)
		for _, c := range []struct {
			args map[string]any
			want string
		}{
			{map[string]any{"every_steps": 1}, "Missing required parameter: sandbox_id"},
			{map[string]any{"sandbox_id": id, "every_steps": -1}, "Invalid every_steps -1: it must be at least 0."},
			{map[string]any{"sandbox_id": id, "every_steps": "3"}, "Invalid parameter every_steps: expected an integer, got string"},
			{map[string]any{"sandbox_id": id, "every_steps": 1.5}, "Invalid parameter every_steps: expected an integer"},
			{map[string]any{"sandbox_id": id, "on_pause": "yes"}, "Invalid parameter on_pause: expected a boolean"},
			{map[string]any{"sandbox_id": id, "reset": true, "on_pause": false}, "give it alone"},
			{map[string]any{"sandbox_id": "nosuch", "every_steps": 1}, "Sandbox 'nosuch' not found in this session. Sandboxes in this session: " + id},
		} {
			wantContains(t, s.fail(t, "e2b_set_checkpoint_policy", c.args), c.want)
		}
		if rec := recordState(t, e, id); rec.Checkpoint != nil {
			t.Fatalf("a refused call changed the record: %+v", rec.Checkpoint)
		}

		// A gone sandbox's policy is shown, but changing it is refused.
		e.emu.Vanish(id)
		s.ok(t, "e2b_list_sandboxes", nil)
		s.setPolicy(t, map[string]any{"sandbox_id": id}, 0, false, "session")
		wantContains(t, s.fail(t, "e2b_set_checkpoint_policy", map[string]any{"sandbox_id": id, "on_pause": true}),
			"Sandbox '"+id+"' is gone (")
	})
}

// TestSetCheckpointPolicyOtherOwners: another session or owner cannot see or change a sandbox's policy, and a
// caller without an E2B key can still set its own (the tool asks nothing of E2B).
func TestSetCheckpointPolicyOtherOwners(t *testing.T) {
	t.Parallel()
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			e := newEnv(t)
			alice := e.connect(t, era, Caller{Owner: "alice", Session: "main"})
			id := alice.createSandbox(t, nil)
			for name, caller := range map[string]Caller{"other session": {Owner: "alice", Session: "other"}, "other owner": {Owner: "bob", Session: "main"}} {
				s := e.connect(t, era, caller)
				for _, args := range []map[string]any{
					{"sandbox_id": id},
					{"sandbox_id": id, "every_steps": 1, "on_pause": true},
					{"sandbox_id": id, "reset": true},
				} {
					if got, want := s.fail(t, "e2b_set_checkpoint_policy", args), "Sandbox '"+id+"' not found in this session. Sandboxes in this session: none"; got != want {
						t.Errorf("%s %v: got %q, want %q", name, args, got, want)
					}
				}
			}
			if rec := recordState(t, e, id); rec.Checkpoint != nil {
				t.Fatalf("another caller changed the policy: %+v", rec.Checkpoint)
			}

			keyless := e.deps
			keyless.Clients = nil
			s := connectDeps(t, keyless, era, Caller{Owner: "alice", Session: "main"})
			s.setPolicy(t, map[string]any{"sandbox_id": id, "every_steps": 3}, 3, false, "sandbox")
		})
	}
}

// TestSetCheckpointPolicyConcurrent: two calls at once changing different fields both take effect, whichever
// lands first, since each starts from the record as the other left it.
func TestSetCheckpointPolicyConcurrent(t *testing.T) {
	t.Parallel()
	forEachEra(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, nil)
		for round := range 5 {
			every := round + 1
			errs := make(chan string, 2)
			var wg sync.WaitGroup
			for _, args := range []map[string]any{
				{"sandbox_id": id, "every_steps": every},
				{"sandbox_id": id, "on_pause": round%2 == 0},
			} {
				wg.Go(func() {
					req := mcp.CallToolRequest{}
					req.Params.Name, req.Params.Arguments = "e2b_set_checkpoint_policy", args
					res, err := s.c.CallTool(context.Background(), req)
					switch {
					case err != nil:
						errs <- err.Error()
					case res.IsError:
						errs <- resultText(res)
					}
				})
			}
			waitfor.Return(t, time.Minute, "the concurrent policy changes", wg.Wait)
			close(errs)
			for msg := range errs {
				t.Fatalf("round %d: %s", round, msg)
			}
			s.setPolicy(t, map[string]any{"sandbox_id": id}, every, round%2 == 0, "sandbox")
		}
	})
}
