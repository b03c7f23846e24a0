package tests

import (
	"context"
	"fmt"
	"slices"
	"strings"
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
	t.Parallel()
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
// Not parallel: it holds back every create the shared emulator gets.
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

// ticks is a command that prints tick-1..tick-30 a tenth of a second apart, then END; ticksOutput is all of it.
const ticks = "for i in $(seq 1 30); do echo tick-$i; sleep 0.1; done; echo END"

func ticksOutput() string {
	var b strings.Builder
	for i := 1; i <= 30; i++ {
		fmt.Fprintf(&b, "tick-%d\n", i)
	}
	return b.String() + "END\n"
}

// readToEnd reads a process's output with e2b_read_output from offset 0 until it has ended, and returns all of it
// and the last answer.
func readToEnd(t testing.TB, c *client.Client, id string, pid int) (string, map[string]any) {
	t.Helper()
	var out strings.Builder
	var res map[string]any
	offset := 0
	waitfor.Until(t, time.Minute, fmt.Sprintf("process %d to end", pid), func() bool {
		res = ok(t, c, "e2b_read_output", map[string]any{"sandbox_id": id, "pid": pid, "offset": offset, "wait_ms": 5000})
		out.WriteString(str(res, "output"))
		offset = int(num(res, "next_offset"))
		return res["running"] == false
	})
	return out.String(), res
}

// killAndRead kills (-9) a server that runs a command of ticks as pid, starts another on the same state (args), and
// checks that it reads every line of the command's output, its exit code and its command.
func (x *h) killAndRead(first *stdioServer, args []string, id string, pid int) {
	x.t.Helper()
	first.kill9(x.t)
	second := x.startStdio(clientOpts{}, args...)
	out, end := readToEnd(x.t, second.Client, id, pid)
	if out != ticksOutput() || end["exit_code"] == nil || num(end, "exit_code") != 0 || str(end, "command") != ticks || end["warning"] != nil {
		x.t.Fatalf("after the kill, read %q with last answer %v; want every line, tick-1 to END, and exit code 0", out, end)
	}
}

// A command moved to the background keeps all its output when the server that ran it is killed (-9) right after
// the move: the next server reads every line of it, from the first, and its exit code.
func TestMovedCommandOutputOutlivesKill9(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b cancelBackend) {
		x := newH(t)
		owner := x.owner("moved")
		x.login(owner)
		args := x.serveOn(b, owner, "moved", "--exec-foreground-limit", "1s")
		first := x.startStdio(clientOpts{}, args...)
		id := create(t, first.Client, map[string]any{"title": "moved"})
		moved := ok(t, first.Client, "e2b_exec", map[string]any{"sandbox_id": id, "command": ticks})
		pid := int(num(moved, "pid"))
		if moved["running"] != true || pid <= 0 {
			t.Fatalf("a command of 3 s with a foreground limit of 1 s was not moved: %v", moved)
		}
		x.killAndRead(first, args, id, pid)
	})
}

// A command still in the foreground when its server is killed (-9) keeps all its output too: the next server lists
// it and reads every line of it, and its exit code.
func TestForegroundCommandOutputOutlivesKill9(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b cancelBackend) {
		x := newH(t)
		owner := x.owner("foreground")
		x.login(owner)
		args := x.serveOn(b, owner, "foreground")
		first := x.startStdio(clientOpts{}, args...)
		id := create(t, first.Client, map[string]any{"title": "foreground"})
		answered := make(chan error, 1)
		go func() {
			req := mcp.CallToolRequest{}
			req.Params.Name = "e2b_exec"
			req.Params.Arguments = map[string]any{"sandbox_id": id, "command": ticks, "wait_ms": 60000}
			_, err := first.Client.CallTool(context.Background(), req) // dies with the server; its answer never comes
			answered <- err
		}()
		// Killed once the command has printed some of its lines, and not all.
		var pid int
		waitfor.Until(t, 30*time.Second, "the command to run and print in the foreground", func() bool {
			list := ok(t, first.Client, "e2b_list_processes", map[string]any{"sandbox_id": id})
			procs, _ := list["processes"].([]any)
			for _, p := range procs {
				if p := p.(map[string]any); str(p, "command") == ticks && p["running"] == true && p["foreground"] == true && num(p, "output_size") > 0 {
					pid = int(num(p, "pid"))
				}
			}
			return pid > 0
		})
		x.killAndRead(first, args, id, pid)
		waitfor.Recv(t, answered, 30*time.Second, "the call of the killed server to end")
	})
}
