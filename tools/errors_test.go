package tools

import (
	"context"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

func TestMissingParameters(t *testing.T) {
	t.Parallel()
	forEachEra(t, func(t *testing.T, e *env, s *session) {
		for _, c := range []struct {
			tool string
			args map[string]any
			want string
		}{
			{"e2b_exec", map[string]any{"command": "true"}, "sandbox_id"},
			{"e2b_exec", map[string]any{"sandbox_id": "x"}, "command"},
			{"e2b_read_file", map[string]any{"sandbox_id": "x"}, "path"},
			{"e2b_read_file", map[string]any{"path": "/etc/hosts"}, "sandbox_id"},
			{"e2b_write_file", map[string]any{"sandbox_id": "x", "path": "a.txt"}, "content"},
			{"e2b_write_file", map[string]any{"sandbox_id": "x", "content": "hi"}, "path"},
			{"e2b_manage_sandbox", map[string]any{"sandbox_id": "x"}, "action"},
			{"e2b_manage_sandbox", map[string]any{"action": "pause"}, "sandbox_id"},
			{"e2b_checkpoint_sandbox", nil, "sandbox_id"},
			{"e2b_delete_checkpoint", map[string]any{}, "checkpoint_id"},
			{"e2b_set_checkpoint_policy", map[string]any{"every_steps": 2}, "sandbox_id"},
			{"e2b_fork_sandbox", map[string]any{"count": 2}, "sandbox_id or checkpoint_id"},
			{"e2b_create_sandbox", map[string]any{"upload_files": []any{map[string]any{"sandbox_path": "/x"}}}, "upload_files[0].session_path"},
		} {
			got := s.fail(t, c.tool, c.args)
			if got != "Missing required parameter: "+c.want {
				t.Errorf("%s %v: got %q, want %q", c.tool, c.args, got, "Missing required parameter: "+c.want)
			}
		}
		// Nothing reached E2B for any of them.
		if n := len(e.emu.Sandboxes()); n != 0 {
			t.Fatalf("%d sandboxes were created by failing calls", n)
		}
	})
}

func TestInvalidArguments(t *testing.T) {
	t.Parallel()
	forEachEra(t, func(t *testing.T, e *env, s *session) {
		got := s.fail(t, "e2b_exec", map[string]any{"sandbox_id": "x", "command": "ls", "timeout_ms": "soon"})
		wantContains(t, got, "Invalid parameter timeout_ms", "an integer")
		got = s.fail(t, "e2b_manage_sandbox", map[string]any{"sandbox_id": "x", "action": "explode"})
		wantContains(t, got, "Invalid action 'explode'", "pause, resume or delete")
		got = s.fail(t, "e2b_fork_sandbox", map[string]any{"sandbox_id": "x", "checkpoint_id": "ckpt_1"})
		wantContains(t, got, "exactly one of sandbox_id and checkpoint_id")
		got = s.fail(t, "e2b_fork_sandbox", map[string]any{"sandbox_id": "x", "count": 11})
		wantContains(t, got, "Invalid count 11", "between 1 and 10")
		got = s.fail(t, "e2b_create_sandbox", map[string]any{"timeout_seconds": -5})
		wantContains(t, got, "Invalid timeout_seconds -5")
	})
}

func TestUnknownSandbox(t *testing.T) {
	t.Parallel()
	forEachEra(t, func(t *testing.T, e *env, s *session) {
		want := "Sandbox 'nosuch' not found in this session. Sandboxes in this session: none"
		for tool, args := range map[string]map[string]any{
			"e2b_exec":                  {"sandbox_id": "nosuch", "command": "true"},
			"e2b_read_file":             {"sandbox_id": "nosuch", "path": "a"},
			"e2b_write_file":            {"sandbox_id": "nosuch", "path": "a", "content": ""},
			"e2b_manage_sandbox":        {"sandbox_id": "nosuch", "action": "delete"},
			"e2b_checkpoint_sandbox":    {"sandbox_id": "nosuch"},
			"e2b_fork_sandbox":          {"sandbox_id": "nosuch"},
			"e2b_set_checkpoint_policy": {"sandbox_id": "nosuch"},
		} {
			if got := s.fail(t, tool, args); got != want {
				t.Errorf("%s: got %q, want %q", tool, got, want)
			}
		}
		a := s.createSandbox(t, nil)
		b := s.createSandbox(t, nil)
		got := s.fail(t, "e2b_exec", map[string]any{"sandbox_id": "nosuch", "command": "true"})
		// In the order they were created, as e2b_list_sandboxes shows them.
		if want := "Sandbox 'nosuch' not found in this session. Sandboxes in this session: " + a + ", " + b; got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
		got = s.fail(t, "e2b_delete_checkpoint", map[string]any{"checkpoint_id": "ckpt_nosuch"})
		if want := "Checkpoint 'ckpt_nosuch' not found in this session. Checkpoints in this session: none"; got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	})
}

// TestOtherSessionsAndOwners: a sandbox ID of another session or owner is unknown here, whatever is asked of it,
// and the store is consulted before E2B, so nothing reaches E2B.
func TestOtherSessionsAndOwners(t *testing.T) {
	t.Parallel()
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			e := newEnv(t)
			alice := e.connect(t, era, Caller{Owner: "alice", Session: "main"})
			other := e.connect(t, era, Caller{Owner: "alice", Session: "other"})
			bob := e.connect(t, era, Caller{Owner: "bob", Session: "main"})
			id := alice.createSandbox(t, map[string]any{"title": "alice's"})
			cp := alice.ok(t, "e2b_checkpoint_sandbox", map[string]any{"sandbox_id": id})["checkpoint_id"].(string)

			for name, s := range map[string]*session{"other session": other, "other owner": bob} {
				e.emu.ResetRequests()
				for tool, args := range map[string]map[string]any{
					"e2b_exec":                  {"sandbox_id": id, "command": "touch /tmp/intruder"},
					"e2b_read_file":             {"sandbox_id": id, "path": "/etc/hostname"},
					"e2b_write_file":            {"sandbox_id": id, "path": "/tmp/intruder", "content": "x"},
					"e2b_manage_sandbox":        {"sandbox_id": id, "action": "delete"},
					"e2b_checkpoint_sandbox":    {"sandbox_id": id},
					"e2b_fork_sandbox":          {"sandbox_id": id},
					"e2b_set_checkpoint_policy": {"sandbox_id": id, "every_steps": 1},
				} {
					got := s.fail(t, tool, args)
					want := "Sandbox '" + id + "' not found in this session. Sandboxes in this session: none"
					if got != want {
						t.Errorf("%s, %s: got %q, want %q", name, tool, got, want)
					}
				}
				for tool, args := range map[string]map[string]any{
					"e2b_fork_sandbox":      {"checkpoint_id": cp},
					"e2b_delete_checkpoint": {"checkpoint_id": cp},
				} {
					got := s.fail(t, tool, args)
					wantContains(t, got, "Checkpoint '"+cp+"' not found in this session.")
				}
				if reqs := e.emu.Requests(); len(reqs) != 0 {
					t.Errorf("%s: %d requests reached E2B, first %s %s", name, len(reqs), reqs[0].Method, reqs[0].Path)
				}
				list := s.ok(t, "e2b_list_sandboxes", nil)
				if num(list["count"]) != 0 {
					t.Errorf("%s sees %v", name, list["sandboxes"])
				}
				cps := s.ok(t, "e2b_list_checkpoints", nil)
				if num(cps["count"]) != 0 {
					t.Errorf("%s sees checkpoints %v", name, cps["checkpoints"])
				}
			}
			// Alice's sandbox is untouched and still hers.
			if _, ok := e.emu.Sandbox(id); !ok {
				t.Fatal("alice's sandbox is gone")
			}
			res := alice.exec(t, id, "test -e /tmp/intruder && echo yes || echo no")
			if res["stdout"] != "no\n" {
				t.Fatalf("intruder file exists: %v", res)
			}
		})
	}
}

func TestNoAPIKey(t *testing.T) {
	t.Parallel()
	forEachEra(t, func(t *testing.T, e *env, alice *session) {
		id := alice.createSandbox(t, nil)
		// carol has no key, but calls in a session of her own; her sandbox records are empty.
		carol := connectDeps(t, e.deps, alice.c.ProtocolVersion(), Caller{Owner: "carol", Session: "main"})
		want := "No E2B API key is connected for carol. Run `e2b-mcp auth login` in a terminal " +
			"(or use --backend local to try the server without an account), then call this tool again."
		for _, tool := range []string{"e2b_create_sandbox", "e2b_list_sandboxes"} {
			if got := carol.fail(t, tool, nil); got != want {
				t.Errorf("%s: got %q, want %q", tool, got, want)
			}
		}
		// A recorded sandbox whose owner has since logged out: the store is checked first, then the key.
		rec, err := e.store.Sandbox("alice", id)
		if err != nil {
			t.Fatal(err)
		}
		rec.Owner = "carol"
		if err := e.store.PutSandbox(rec); err != nil {
			t.Fatal(err)
		}
		got := carol.fail(t, "e2b_exec", map[string]any{"sandbox_id": id, "command": "true"})
		if got != want {
			t.Fatalf("exec: got %q, want %q", got, want)
		}
	})
}

func TestE2BErrors(t *testing.T) {
	t.Parallel()
	forEachEra(t, func(t *testing.T, e *env, s *session) {
		got := s.fail(t, "e2b_create_sandbox", map[string]any{"template": "no-such-template"})
		wantContains(t, got, "E2B API error (", "404", "template 'no-such-template' not found")
		if strings.Contains(got, aliceKey) {
			t.Fatal("the API key leaked into an error")
		}
		e.emu.FailNext(1, 503)
		got = s.fail(t, "e2b_create_sandbox", nil)
		wantContains(t, got, "E2B API error (", "503")

		id := s.createSandbox(t, nil)
		got = s.fail(t, "e2b_exec", map[string]any{"sandbox_id": id, "command": "pwd", "cwd": "/no/such/dir"})
		wantContains(t, got, "E2B API error (", "invalid_argument", "/no/such/dir")
	})
}

// TestNoCaller: a server that forgot to identify the caller gets an error result, not a panic or a guess.
func TestNoCaller(t *testing.T) {
	t.Parallel()
	tools := All(Deps{})
	res, err := tools[4].Handler(context.Background(), mcp.CallToolRequest{})
	if err != nil || res == nil || !res.IsError {
		t.Fatalf("got %v, %v; want an error result", res, err)
	}
	wantContains(t, resultText(res), "did not say who is calling")
}

// TestPanicsBecomeResults: a handler that panics (here: no store at all) answers with isError.
func TestPanicsBecomeResults(t *testing.T) {
	t.Parallel()
	tools := All(Deps{Clients: keyedClients{keys: map[string]string{}}})
	req := mcp.CallToolRequest{}
	req.Params.Arguments = map[string]any{"sandbox_id": "x", "command": "true"}
	res, err := tools[1].Handler(WithCaller(context.Background(), Caller{Owner: "a", Session: "b"}), req)
	if err != nil || res == nil || !res.IsError {
		t.Fatalf("got %v, %v; want an error result", res, err)
	}
	wantContains(t, resultText(res), "Internal error in e2b_exec")
}
