package tests

import (
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/internal/rpctest"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// taskClient speaks JSON-RPC of protocol 2026-07-28 to a server's /mcp as Claude Code does, declaring the Tasks
// extension (io.modelcontextprotocol/tasks) in each request's client capabilities.
type taskClient struct {
	base, token string
	next        int
}

func (c *taskClient) send(t *testing.T, method string, params map[string]any) (result, rpcErr map[string]any) {
	t.Helper()
	c.next++
	params["_meta"] = map[string]any{mcp.MetaKeyProtocolVersion: mcp.ProtocolVersion20260728,
		mcp.MetaKeyClientInfo:         map[string]any{"name": "claude-code", "version": "2.1.332"},
		mcp.MetaKeyClientCapabilities: map[string]any{"extensions": map[string]any{"io.modelcontextprotocol/tasks": map[string]any{}}}}
	return rpctest.Post(t, c.base+"/mcp", c.token, c.next, method, params)
}

// sandbox creates a sandbox and returns its ID.
func (c *taskClient) sandbox(t *testing.T) string {
	t.Helper()
	res, rpcErr := c.send(t, "tools/call", map[string]any{"name": "e2b_create_sandbox", "arguments": map[string]any{}})
	sc, _ := res["structuredContent"].(map[string]any)
	id, _ := sc["sandbox_id"].(string)
	if rpcErr != nil || id == "" {
		t.Fatalf("e2b_create_sandbox: %v, %v", res, rpcErr)
	}
	the.noteSandbox(id)
	return id
}

// startTask runs command with e2b_exec and returns the task it becomes.
func (c *taskClient) startTask(t *testing.T, sandboxID, command string) string {
	t.Helper()
	res, rpcErr := c.send(t, "tools/call", map[string]any{"name": "e2b_exec", "arguments": map[string]any{"sandbox_id": sandboxID, "command": command}})
	id, _ := res["taskId"].(string)
	if rpcErr != nil || res["resultType"] != "task" || id == "" {
		t.Fatalf("a long e2b_exec declaring tasks: %v, %v; want a task", res, rpcErr)
	}
	return id
}

// awaitCompleted polls tasks/get until the task completed, and returns its result's structuredContent.
func (c *taskClient) awaitCompleted(t *testing.T, id string) map[string]any {
	t.Helper()
	var task map[string]any
	waitfor.Until(t, time.Minute, "task "+id+" to end", func() bool {
		res, rpcErr := c.send(t, "tasks/get", map[string]any{"taskId": id})
		if rpcErr != nil {
			t.Fatalf("tasks/get: %v", rpcErr)
		}
		task = res
		if res["status"] == "working" {
			time.Sleep(250 * time.Millisecond) // as a client honouring pollIntervalMs, more often
			return false
		}
		return true
	})
	result, _ := task["result"].(map[string]any)
	sc, _ := result["structuredContent"].(map[string]any)
	if task["status"] != "completed" || sc == nil {
		t.Fatalf("task %s ended as %v", id, task)
	}
	return sc
}

// A task outlives the server process that made it: killed with SIGKILL while the task's command runs, the server
// started again on the same state directory answers tasks/get with all the command's output and its exit code,
// as does another replica on the same database when the one that made the task was killed. Nothing of the task is
// in a process's memory: its record is in the store, its output and exit code in the sandbox.
func TestTaskOutlivesItsServerProcess(t *testing.T) {
	t.Parallel()
	t.Run("restart", func(t *testing.T) {
		x := newH(t)
		owner := x.owner("tasks")
		x.login(owner)
		args := x.serveArgs(owner, "default", "--transport", "http")
		first := x.startHTTP(args...)
		c := &taskClient{base: first.base}
		id := c.startTask(t, c.sandbox(t), "echo before; sleep 4; echo after")
		first.kill9(t)

		second := x.startHTTP(args...)
		c2 := &taskClient{base: second.base}
		if out := c2.awaitCompleted(t, id); out["exit_code"] != 0.0 || out["stdout"] != "before\nafter\n" {
			t.Fatalf("the task after a restart: %v", out)
		}
	})
	t.Run("replicas", func(t *testing.T) {
		x := newH(t)
		rs := x.startReplicas(2)
		c1 := &taskClient{base: rs.replicas[0].base, token: rs.token}
		c2 := &taskClient{base: rs.replicas[1].base, token: rs.token}
		id := c1.startTask(t, c1.sandbox(t), "echo one; sleep 4; echo two")
		rs.replicas[0].kill9(t)
		if out := c2.awaitCompleted(t, id); out["exit_code"] != 0.0 || out["stdout"] != "one\ntwo\n" {
			t.Fatalf("the task on the other replica: %v", out)
		}
	})
}
