package tests

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// checkpointIDs lists the IDs of e2b_list_checkpoints' answer for a sandbox.
func checkpointIDs(t *testing.T, c *client.Client, sandboxID string) []string {
	t.Helper()
	out := ok(t, c, "e2b_list_checkpoints", map[string]any{"sandbox_id": sandboxID})
	list, _ := out["checkpoints"].([]any)
	var ids []string
	for _, e := range list {
		if m, isMap := e.(map[string]any); isMap {
			ids = append(ids, str(m, "checkpoint_id"))
		}
	}
	slices.Sort(ids)
	return ids
}

// A server killed with SIGKILL loses nothing: started again on the same state directory it lists the same
// sandboxes and checkpoints, and reaches the sandboxes with the envd tokens it stored (encrypted).
func TestRestartAfterKill9(t *testing.T) {
	x := newH(t)
	owner := x.owner("restart")
	x.login(owner)
	args := x.serveArgs(owner, "durable")

	first := x.startStdio(clientOpts{}, args...)
	id := create(t, first.Client, map[string]any{"title": "durable"})
	other := create(t, first.Client, map[string]any{"title": "durable too"})
	ok(t, first.Client, "e2b_write_file", map[string]any{"sandbox_id": id, "path": "/home/user/kept.txt", "content": "before the crash\n"})
	cp := ok(t, first.Client, "e2b_checkpoint_sandbox", map[string]any{"sandbox_id": id, "name": "before-crash"})
	cpID := str(cp, "checkpoint_id")
	if cpID == "" {
		t.Fatalf("checkpoint answered no checkpoint_id: %v", cp)
	}
	wantSandboxes := sandboxIDs(t, first.Client)
	wantCheckpoints := checkpointIDs(t, first.Client, id)
	if !slices.Contains(wantSandboxes, id) || !slices.Contains(wantSandboxes, other) || !slices.Contains(wantCheckpoints, cpID) {
		t.Fatalf("before the crash: sandboxes %v, checkpoints %v", wantSandboxes, wantCheckpoints)
	}

	first.kill9(t)

	second := x.startStdio(clientOpts{}, args...)
	if got := sandboxIDs(t, second.Client); !slices.Equal(got, wantSandboxes) {
		t.Errorf("after restart the server lists %v, want %v", got, wantSandboxes)
	}
	if got := checkpointIDs(t, second.Client, id); !slices.Equal(got, wantCheckpoints) {
		t.Errorf("after restart the checkpoints are %v, want %v", got, wantCheckpoints)
	}
	out := ok(t, second.Client, "e2b_exec", map[string]any{"sandbox_id": id, "command": "cat /home/user/kept.txt"})
	if str(out, "stdout") != "before the crash\n" {
		t.Errorf("exec after restart: %v", out)
	}
	// The checkpoint is still usable: a fork from it has the file as it was.
	fork := ok(t, second.Client, "e2b_fork_sandbox", map[string]any{"checkpoint_id": cpID, "title": "from the checkpoint"})
	forks, _ := fork["sandboxes"].([]any)
	if len(forks) != 1 {
		t.Fatalf("fork from the checkpoint: %v", fork)
	}
	forkID := str(forks[0].(map[string]any), "sandbox_id")
	the.noteSandbox(forkID)
	if out := ok(t, second.Client, "e2b_exec", map[string]any{"sandbox_id": forkID, "command": "cat /home/user/kept.txt"}); str(out, "stdout") != "before the crash\n" {
		t.Errorf("exec in the fork: %v", out)
	}

	// Shutting the server down (or killing it) never kills sandboxes.
	for _, sid := range []string{id, other} {
		if sb, found := the.emu.Sandbox(sid); !found || sb.State != "running" {
			t.Errorf("sandbox %s after the crash: found %v, state %q", sid, found, sb.State)
		}
	}
}

// A server that dies between E2B's create and its own record of the sandbox (here: killed while E2B's answer is
// held back) loses nothing either: started again, it finds the sandbox by its tags, adopts it with its envd token
// and on_timeout, and there is exactly one sandbox, not a second one made by a repeated create.
func TestCrashMidCreateIsAdopted(t *testing.T) {
	x := newH(t)
	owner := x.owner("midcreate")
	x.login(owner)
	args := x.serveArgs(owner, "midcreate")

	first := x.startStdio(clientOpts{}, args...)
	created, release := the.emu.HoldCreates()
	defer release()
	callDone := make(chan struct{})
	go func() {
		defer close(callDone)
		req := mcp.CallToolRequest{}
		req.Params.Name = "e2b_create_sandbox"
		// Not the server's default: the adopted record must take it from E2B.
		req.Params.Arguments = map[string]any{"title": "made before the crash", "on_timeout": "kill"}
		first.Client.CallTool(context.Background(), req) // dies with the server; its answer never comes
	}()
	id := waitfor.Recv(t, created, 30*time.Second, "the create to reach the emulator")
	the.noteSandbox(id)
	first.kill9(t)
	release()
	waitfor.Recv(t, callDone, 30*time.Second, "the call to the killed server to return")

	second := x.startStdio(clientOpts{}, args...)
	if got := sandboxIDs(t, second.Client); !slices.Equal(got, []string{id}) {
		t.Fatalf("after the crash the server lists %v, want exactly the adopted %s", got, id)
	}
	listed := ok(t, second.Client, "e2b_list_sandboxes", map[string]any{})["sandboxes"].([]any)[0].(map[string]any)
	if listed["on_timeout"] != "kill" {
		t.Errorf("the adopted sandbox, made with on_timeout kill, is listed with %v", listed["on_timeout"])
	}
	out := ok(t, second.Client, "e2b_exec", map[string]any{"sandbox_id": id, "command": "echo adopted"})
	if str(out, "stdout") != "adopted\n" {
		t.Errorf("exec in the adopted sandbox: %v", out)
	}
	var mine []string
	for _, sb := range the.emu.Sandboxes() {
		if sb.Metadata["e2b-mcp.owner"] == owner {
			mine = append(mine, sb.ID)
		}
	}
	if !slices.Equal(mine, []string{id}) {
		t.Errorf("the emulator holds %v for this owner, want only %s", mine, id)
	}
}
