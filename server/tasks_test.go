package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/credentials"
	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/e2b/emulator"
	"github.com/e2b-mcp/e2b-mcp/internal/optional"
	"github.com/e2b-mcp/e2b-mcp/internal/pgtest"
	"github.com/e2b-mcp/e2b-mcp/internal/rpctest"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
	"github.com/e2b-mcp/e2b-mcp/server/tasks"
	"github.com/e2b-mcp/e2b-mcp/state"
	"github.com/e2b-mcp/e2b-mcp/tools"
)

// rawClient speaks JSON-RPC of protocol 2026-07-28 to a server as Claude Code does, declaring the Tasks extension
// in each request's client capabilities or not, and reads the answers as they are on the wire.
type rawClient interface {
	send(t *testing.T, method string, params map[string]any) (result, rpcErr map[string]any)
}

// requestMeta is a request's _meta; tasks declares the Tasks extension.
func requestMeta(tasks bool) map[string]any {
	caps := map[string]any{}
	if tasks {
		caps["extensions"] = map[string]any{tools.TasksExtension: map[string]any{}}
	}
	return map[string]any{mcp.MetaKeyProtocolVersion: mcp.ProtocolVersion20260728,
		mcp.MetaKeyClientInfo: map[string]any{"name": "claude-code", "version": "2.1.332"}, mcp.MetaKeyClientCapabilities: caps}
}

// httpRaw POSTs each request to /mcp.
type httpRaw struct {
	url  string
	next int
}

func (h *httpRaw) send(t *testing.T, method string, params map[string]any) (map[string]any, map[string]any) {
	t.Helper()
	h.next++
	return rpctest.Post(t, h.url, "", h.next, method, params)
}

// stdioRaw writes each request as a line to a stdio server and reads lines until its answer.
type stdioRaw struct {
	in   io.Writer
	out  *bufio.Reader
	next int
}

func newStdioRaw(t *testing.T, srv *Server) *stdioRaw {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.ServeStdio(ctx, inR, outW) }()
	t.Cleanup(func() {
		cancel()
		inW.Close()
		go func() { _, _ = io.Copy(io.Discard, outR) }()
		if err := awaitRun(t, done); err != nil {
			t.Errorf("ServeStdio: %v", err)
		}
	})
	return &stdioRaw{in: inW, out: bufio.NewReader(outR)}
}

func (s *stdioRaw) send(t *testing.T, method string, params map[string]any) (map[string]any, map[string]any) {
	t.Helper()
	s.next++
	line, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": s.next, "method": method, "params": params})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.in.Write(append(line, '\n')); err != nil {
		t.Fatal(err)
	}
	type read struct {
		line []byte
		err  error
	}
	for {
		got := make(chan read, 1)
		go func() {
			l, err := s.out.ReadBytes('\n')
			got <- read{l, err}
		}()
		var r read
		select {
		case r = <-got:
		case <-time.After(time.Minute):
			t.Fatalf("no answer to %s within a minute", method)
		}
		if r.err != nil {
			t.Fatalf("reading the answer to %s: %v", method, r.err)
		}
		var head struct {
			ID *int `json:"id"`
		}
		if json.Unmarshal(r.line, &head) == nil && head.ID != nil && *head.ID == s.next {
			return rpctest.Answer(t, method, r.line)
		}
	}
}

// callTool calls a tool, declaring tasks or not.
func rawCall(t *testing.T, c rawClient, tasks bool, tool string, args map[string]any) (map[string]any, map[string]any) {
	t.Helper()
	return c.send(t, string(mcp.MethodToolsCall), map[string]any{"name": tool, "arguments": args, "_meta": requestMeta(tasks)})
}

func taskRequest(t *testing.T, c rawClient, tasks bool, method, taskID string) (map[string]any, map[string]any) {
	t.Helper()
	return c.send(t, method, map[string]any{"taskId": taskID, "_meta": requestMeta(tasks)})
}

// callStructured calls a tool and returns its result's structuredContent (see structured).
func callStructured(t *testing.T, what string, c rawClient, tasks bool, tool string, args map[string]any) map[string]any {
	t.Helper()
	res, rpcErr := rawCall(t, c, tasks, tool, args)
	return structured(t, what, res, rpcErr)
}

// structured is a tool result's structuredContent; it fails the test on an error or a result that is not one.
func structured(t *testing.T, what string, res, rpcErr map[string]any) map[string]any {
	t.Helper()
	if rpcErr != nil {
		t.Fatalf("%s: JSON-RPC error %v", what, rpcErr)
	}
	if res["isError"] == true {
		t.Fatalf("%s: tool error %v", what, res["content"])
	}
	sc, ok := res["structuredContent"].(map[string]any)
	if !ok {
		t.Fatalf("%s: no structuredContent in %v", what, res)
	}
	return sc
}

var printableASCII = regexp.MustCompile(`^[\x21-\x7e]+$`)

// startTask calls e2b_exec declaring tasks and checks the answer is a task, as the extension shapes it.
func startTask(t *testing.T, c rawClient, sandboxID, command string) string {
	t.Helper()
	return startTaskArgs(t, c, map[string]any{"sandbox_id": sandboxID, "command": command})
}

func startTaskArgs(t *testing.T, c rawClient, args map[string]any) string {
	t.Helper()
	res, rpcErr := rawCall(t, c, true, "e2b_exec", args)
	if rpcErr != nil {
		t.Fatalf("e2b_exec: %v", rpcErr)
	}
	id, _ := res["taskId"].(string)
	if res["resultType"] != "task" || !printableASCII.MatchString(id) || res["status"] != "working" {
		t.Fatalf("a long e2b_exec declaring tasks answered %v, want a working task", res)
	}
	for _, field := range []string{"ttlMs", "pollIntervalMs", "ttlSeconds", "pollIntervalMilliseconds", "createdAt", "lastUpdatedAt"} {
		if res[field] == nil {
			t.Errorf("the task has no %s: %v", field, res)
		}
	}
	if _, has := res["content"]; has {
		t.Errorf("the task carries a tool result's content: %v", res)
	}
	return id
}

// awaitTask polls tasks/get until the task is no longer working and returns it.
func awaitTask(t *testing.T, c rawClient, id string) map[string]any {
	t.Helper()
	var task map[string]any
	waitfor.Until(t, time.Minute, "task "+id+" to end", func() bool {
		res, rpcErr := taskRequest(t, c, true, "tasks/get", id)
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
	return task
}

// completedExec checks a task completed with e2b_exec's result and returns its structuredContent.
func completedExec(t *testing.T, task map[string]any) map[string]any {
	t.Helper()
	if task["status"] != "completed" || task["resultType"] != "complete" {
		t.Fatalf("task = %v, want completed", task)
	}
	result, _ := task["result"].(map[string]any)
	return structured(t, "the task's result", result, nil)
}

func sandboxOf(t *testing.T, c rawClient) string {
	t.Helper()
	sc := callStructured(t, "e2b_create_sandbox", c, true, "e2b_create_sandbox", map[string]any{})
	return sc["sandbox_id"].(string)
}

// A client that declares the Tasks extension gets a task for an e2b_exec that outlives the task wait, follows it
// with tasks/get to its completion with all the output and the exit code, and can stop one with tasks/cancel,
// which leaves no process of the command; a short call answers as usual, a client that does not declare the
// extension never gets a task, and the audit log has one entry for each call. Over stdio and streamable HTTP.
func TestTasks(t *testing.T) {
	for _, transport := range []string{TransportStdio, TransportHTTP} {
		t.Run(transport, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{transport: transport})
			var c rawClient
			if transport == TransportStdio {
				c = newStdioRaw(t, f.srv)
			} else {
				c = &httpRaw{url: serveHTTP(t, f) + PathMCP}
			}
			sbx := sandboxOf(t, c)

			quick := callStructured(t, "a quick e2b_exec", c, true, "e2b_exec", map[string]any{"sandbox_id": sbx, "command": "echo quick"})
			if quick["exit_code"] != 0.0 || quick["stdout"] != "quick\n" {
				t.Fatalf("a quick e2b_exec declaring tasks: %v", quick)
			}

			id := startTask(t, c, sbx, "echo first; sleep 3; echo second; echo third >&2")
			out := completedExec(t, awaitTask(t, c, id))
			if out["exit_code"] != 0.0 || out["success"] != true || out["stdout"] != "first\nsecond\nthird\n" {
				t.Fatalf("the task's result: %v", out)
			}
			// With a timeout the command runs as a foreground command does (the server holds it to the timeout),
			// and becomes a task when it is moved to the background: its output is its log, which holds all of it from the first byte.
			id = startTaskArgs(t, c, map[string]any{"sandbox_id": sbx, "command": "echo head; sleep 3; echo tail", "timeout_ms": 60000})
			out = completedExec(t, awaitTask(t, c, id))
			if out["exit_code"] != 0.0 || out["stdout"] != "head\ntail\n" {
				t.Fatalf("the result of a task with a timeout: %v", out)
			}
			again, rpcErr := taskRequest(t, c, true, "tasks/get", id)
			if rpcErr != nil || again["status"] != "completed" {
				t.Fatalf("tasks/get of a completed task again: %v, %v", again, rpcErr)
			}

			if _, rpcErr := taskRequest(t, c, false, "tasks/get", id); rpcErr == nil || rpcErr["code"] != float64(tasks.CodeMissingCapability) {
				t.Fatalf("tasks/get without the extension declared: %v, want error %d", rpcErr, tasks.CodeMissingCapability)
			}
			if _, rpcErr := taskRequest(t, c, true, "tasks/get", "task-0000"); rpcErr == nil || rpcErr["code"] != float64(mcp.INVALID_PARAMS) {
				t.Fatalf("tasks/get of no task: %v, want error %d", rpcErr, mcp.INVALID_PARAMS)
			}
			if res, rpcErr := c.send(t, "tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{"x": map[string]any{"action": "accept"}}, "_meta": requestMeta(true)}); rpcErr != nil || res["resultType"] != "complete" {
				t.Fatalf("tasks/update: %v, %v", res, rpcErr)
			}

			slow := callStructured(t, "a long e2b_exec not declaring tasks", c, false, "e2b_exec", map[string]any{"sandbox_id": sbx, "command": "sleep 2; echo slow"})
			if slow["exit_code"] != 0.0 || slow["stdout"] != "slow\n" || slow["running"] != nil {
				t.Fatalf("a long e2b_exec of a client without tasks: %v", slow)
			}

			id = startTask(t, c, sbx, "sleep 4301 & sleep 4302; echo never")
			for range 2 { // a repeat is no error, and changes nothing
				res, rpcErr := taskRequest(t, c, true, "tasks/cancel", id)
				if rpcErr != nil || res["resultType"] != "complete" {
					t.Fatalf("tasks/cancel: %v, %v", res, rpcErr)
				}
			}
			if task, rpcErr := taskRequest(t, c, true, "tasks/get", id); rpcErr != nil || task["status"] != "cancelled" || task["result"] != nil {
				t.Fatalf("a cancelled task: %v, %v", task, rpcErr)
			}
			left := callStructured(t, "pgrep", c, false, "e2b_exec", map[string]any{"sandbox_id": sbx, "command": "pgrep -f 'sleep 430[12]' || true"})
			if left["stdout"] != "" {
				t.Fatalf("processes of a cancelled task's command remain: %q", left["stdout"])
			}

			execs := 0
			for _, e := range f.auditEntries(t) {
				if e.Tool == "e2b_exec" {
					execs++
				}
			}
			if execs != 6 { // quick, the task, the task with a timeout, slow, the cancelled task, pgrep
				t.Fatalf("the audit log has %d e2b_exec entries, want 6: one a call", execs)
			}
		})
	}
}

// A task is answered by another server sharing the store: after the server that made it is restarted on the
// same state directory, and by another replica on the same PostgreSQL database while the first runs on. The
// task's command writes its output and exit code in the sandbox, so nothing of it lives in a server's memory.
func TestTaskOutlivesItsServer(t *testing.T) {
	t.Run("restart", func(t *testing.T) {
		f := newFixture(t, fixtureOpts{transport: TransportHTTP})
		cfg := f.srv.cfg
		base, stop := serveHTTPUntil(t, f.srv)
		c := &httpRaw{url: base + PathMCP}
		sbx := sandboxOf(t, c)
		id := startTask(t, c, sbx, "echo before; sleep 3; echo after")
		stop()
		f.srv.Close()

		restarted, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { restarted.Close() })
		c2 := &httpRaw{url: serveHTTP(t, &fixture{srv: restarted}) + PathMCP}
		out := completedExec(t, awaitTask(t, c2, id))
		if out["exit_code"] != 0.0 || out["stdout"] != "before\nafter\n" {
			t.Fatalf("the task after a restart: %v", out)
		}
	})
	t.Run("replicas", func(t *testing.T) {
		_, db := pgtest.Database(t)
		f := newFixture(t, fixtureOpts{transport: TransportHTTP, mutate: func(c *Config, _ *e2btest.Server) {
			c.Store = db
			key := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, state.DataKeySize))
			if err := c.Secrets.SetSecret(credentials.DataKeyAccount, key); err != nil {
				t.Fatal(err)
			}
		}})
		cfg := f.srv.cfg
		cfg.StateDir = t.TempDir() // its own audit log and approvals directory, as a replica on another host
		other, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { other.Close() })
		c1 := &httpRaw{url: serveHTTP(t, f) + PathMCP}
		c2 := &httpRaw{url: serveHTTP(t, &fixture{srv: other}) + PathMCP}
		sbx := sandboxOf(t, c1)
		id := startTask(t, c1, sbx, "echo one; sleep 2; echo two")
		out := completedExec(t, awaitTask(t, c2, id))
		if out["exit_code"] != 0.0 || out["stdout"] != "one\ntwo\n" {
			t.Fatalf("the task on the other replica: %v", out)
		}
		if task, rpcErr := taskRequest(t, c1, true, "tasks/get", id); rpcErr != nil || task["status"] != "completed" {
			t.Fatalf("the first replica after the other completed the task: %v, %v", task, rpcErr)
		}
		// Another owner's server on the same database does not find it.
		cfg.Owner, cfg.StateDir = "mallory", t.TempDir()
		mallory, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { mallory.Close() })
		cm := &httpRaw{url: serveHTTP(t, &fixture{srv: mallory}) + PathMCP}
		if _, rpcErr := taskRequest(t, cm, true, "tasks/get", id); rpcErr == nil || rpcErr["code"] != float64(mcp.INVALID_PARAMS) {
			t.Fatalf("another owner's tasks/get: %v, want not found", rpcErr)
		}
	})
}

// An e2b_run_code call that outlives the task wait becomes a task that its server holds: tasks/get answers it with
// the execution's result once it ends, tasks/cancel interrupts the kernel (the next cell runs), and a server on
// the same database that finds the task's server gone (its record not renewed) completes it with a result saying
// its outcome is lost, rather than leaving it working for ever.
func TestHeldTasks(t *testing.T) {
	if err := emulator.CodeInterpreterAvailable(); err != nil {
		optional.Missing(t, err.Error())
	}
	_, db := pgtest.Database(t)
	f := newFixture(t, fixtureOpts{transport: TransportHTTP, emulator: e2btest.Options{CodeInterpreter: true},
		mutate: func(c *Config, _ *e2btest.Server) {
			c.Store = db
			key := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, state.DataKeySize))
			if err := c.Secrets.SetSecret(credentials.DataKeyAccount, key); err != nil {
				t.Fatal(err)
			}
		}})
	c := &httpRaw{url: serveHTTP(t, f) + PathMCP}
	sc := callStructured(t, "e2b_create_sandbox", c, true, "e2b_create_sandbox", map[string]any{"template": "code-interpreter-v1"})
	sbx := sc["sandbox_id"].(string)
	run := func(code string) (map[string]any, map[string]any) {
		return rawCall(t, c, true, "e2b_run_code", map[string]any{"sandbox_id": sbx, "code": code})
	}
	cell := func(what, code string) map[string]any {
		res, rpcErr := run(code)
		return structured(t, what, res, rpcErr)
	}

	warm, rpcErr := rawCall(t, c, false, "e2b_run_code", map[string]any{"sandbox_id": sbx, "code": "0"}) // the kernel starts
	structured(t, "the first cell", warm, rpcErr)
	quick := cell("a quick cell", "21 * 2")
	if results, _ := quick["results"].([]any); len(results) != 1 || results[0].(map[string]any)["text"] != "42" {
		t.Fatalf("a quick cell declaring tasks: %v", quick)
	}

	res, rpcErr := run("import time\nprint('a')\ntime.sleep(3)\nprint('b')\n6 * 7")
	id, _ := res["taskId"].(string)
	if rpcErr != nil || res["resultType"] != "task" || id == "" {
		t.Fatalf("a long cell declaring tasks: %v, %v; want a task", res, rpcErr)
	}
	out := completedExec(t, awaitTask(t, c, id))
	if results, _ := out["results"].([]any); out["stdout"] != "a\nb\n" || len(results) != 1 || results[0].(map[string]any)["text"] != "42" {
		t.Fatalf("the long cell's result: %v", out)
	}

	res, _ = run("import time\ntime.sleep(300)")
	id, _ = res["taskId"].(string)
	if res["resultType"] != "task" {
		t.Fatalf("an endless cell: %v; want a task", res)
	}
	if res, rpcErr := taskRequest(t, c, true, "tasks/cancel", id); rpcErr != nil || res["resultType"] != "complete" {
		t.Fatalf("tasks/cancel: %v, %v", res, rpcErr)
	}
	if task, _ := taskRequest(t, c, true, "tasks/get", id); task["status"] != "cancelled" {
		t.Fatalf("a cancelled held task: %v", task)
	}
	// The next cell waits for the interrupt to land, which may outlast the task wait: it may come as a task.
	res, rpcErr = run("5 + 5")
	var after any
	if res["resultType"] == "task" {
		after = completedExec(t, awaitTask(t, c, res["taskId"].(string)))
	} else {
		after = structured(t, "the cell after a cancelled one", res, rpcErr)
	}
	if results, _ := after.(map[string]any)["results"].([]any); len(results) != 1 || results[0].(map[string]any)["text"] != "10" {
		t.Fatalf("the cell after a cancelled one: %v", after)
	}

	// A replica whose clock is past the task's staleness takes its server for gone.
	cfg := f.srv.cfg
	cfg.StateDir = t.TempDir()
	cfg.Now = func() time.Time { return time.Now().Add(2 * tasks.HeldStale) }
	late, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { late.Close() })
	c2 := &httpRaw{url: serveHTTP(t, &fixture{srv: late}) + PathMCP}
	res, _ = run("import time\ntime.sleep(8)")
	id, _ = res["taskId"].(string)
	if res["resultType"] != "task" {
		t.Fatalf("a long cell: %v; want a task", res)
	}
	lost, rpcErr := taskRequest(t, c2, true, "tasks/get", id)
	result, _ := lost["result"].(map[string]any)
	if rpcErr != nil || lost["status"] != "completed" || result["isError"] != true || !strings.Contains(fmt.Sprint(result["content"]), "outcome is lost") {
		t.Fatalf("a held task whose server is gone: %v, %v", lost, rpcErr)
	}
	if task, _ := taskRequest(t, c, true, "tasks/get", id); task["status"] != "completed" {
		t.Fatalf("the task on its own server after another completed it: %v", task)
	}
}
