package tools

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/internal/optional"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// A server started with background true answers the next e2b_exec at 127.0.0.1, shows in e2b_list_processes,
// and e2b_stop_process stops it and everything it started.
func TestBackgroundProcesses(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, nil)
		if out := s.exec(t, id, "command -v python3 || true"); out["stdout"] == "" {
			optional.Missing(t, "python3 (the web server of this test) is not installed")
		}
		port := 20000 + time.Now().UnixNano()%20000
		server := fmt.Sprintf("echo hello > hello.txt; python3 -m http.server %d --bind 127.0.0.1 & sleep 300", port)
		start := time.Now()
		bg := s.ok(t, "e2b_exec", map[string]any{"sandbox_id": id, "command": server, "background": true, "timeout_ms": 100})
		pid := num(bg["pid"])
		logFile, _ := bg["log_file"].(string)
		if pid <= 0 || !strings.HasPrefix(logFile, "/tmp/e2b-mcp/bg-") || bg["success"] != nil || bg["running"] != true {
			t.Fatalf("background start: %v after %v", bg, time.Since(start))
		}
		fetch := fmt.Sprintf("for i in $(seq 100); do python3 -c 'import urllib.request,sys; sys.stdout.write(urllib.request.urlopen(\"http://127.0.0.1:%d/hello.txt\").read().decode())' 2>/dev/null && exit 0; sleep 0.1; done; exit 1", port)
		if out := s.exec(t, id, fetch); out["stdout"] != "hello\n" {
			t.Fatalf("fetch: %v", out)
		}
		list := s.ok(t, "e2b_list_processes", map[string]any{"sandbox_id": id})
		procs, _ := list["processes"].([]any)
		if num(list["running"]) != 1 || len(procs) == 0 {
			t.Fatalf("list: %v", list)
		}
		if p := s.listed(t, id, pid); p["command"] != server || p["log_file"] != logFile || p["running"] != true || p["exit_code"] != nil {
			t.Fatalf("listed %v", p)
		}
		wantContains(t, s.fail(t, "e2b_stop_process", map[string]any{"sandbox_id": id, "pid": 1}), "Process 1 is not a running background command", fmt.Sprint(pid))
		stop := s.ok(t, "e2b_stop_process", map[string]any{"sandbox_id": id, "pid": pid})
		if stop["stopped"] != true || stop["signal"] != "SIGTERM" {
			t.Fatalf("stop: %v", stop)
		}
		// Gone with everything it started: the web server and the sleep.
		if out := s.exec(t, id, fmt.Sprintf("ps -eo args | grep -e 'http.serve[r] %d' -e 'sleep 30[0]' || true", port)); out["stdout"] != "" {
			t.Fatalf("still running: %v", out["stdout"])
		}
		// Listed as ended while its log is there, with the exit code of a command stopped by SIGTERM.
		if p := s.listed(t, id, pid); p["running"] != false || num(p["exit_code"]) != 143 || num(p["output_size"]) == 0 || p["command"] != server {
			t.Fatalf("after stop, listed %v", p)
		}
		if log := s.ok(t, "e2b_read_file", map[string]any{"sandbox_id": id, "path": logFile}); !strings.Contains(log["content"].(string), "GET /hello.txt") {
			t.Fatalf("log: %v", log)
		}
		wantContains(t, s.fail(t, "e2b_stop_process", map[string]any{"sandbox_id": id, "pid": pid}), "not a running background command", "running: none")
		s.fail(t, "e2b_stop_process", map[string]any{"sandbox_id": id})
		wantContains(t, s.fail(t, "e2b_list_processes", map[string]any{"sandbox_id": "nope"}), "Sandbox 'nope' not found")
	})
}

// A job a command leaves in the background does not hold the call, and its later output is not in the next one's.
func TestExecBackgroundJobReturnsAtOnce(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, nil)
		s.exec(t, id, "true") // the sandbox's envd is up
		dur := fmt.Sprintf("30.%d", time.Now().UnixNano()%1e6)
		// A call that waited for its jobs would show "late", or be moved to the background with no exit code.
		res := s.exec(t, id, "(sleep 0.5; echo late) & sleep "+dur+" & echo started")
		if res["stdout"] != "started\n" || res["success"] != true || num(res["exit_code"]) != 0 {
			t.Fatalf("result %v", res)
		}
		time.Sleep(700 * time.Millisecond)
		if res := s.exec(t, id, "echo next"); res["stdout"] != "next\n" {
			t.Fatalf("next: %v", res)
		}
		if left := running(t, s, id, "sleep "+dur); left == "" {
			t.Fatal("the background job did not survive its shell")
		}
		s.exec(t, id, fmt.Sprintf(`pkill -f "sleep ""%s" || true`, dur))
	})
}

// running lists the processes of a sandbox whose command line contains str (never the listing's own).
func running(t *testing.T, s *session, id, str string) string {
	t.Helper()
	half := len(str) / 2
	res := s.exec(t, id, fmt.Sprintf("ps -eo pid=,args= | grep -F -- \"%s\"\"%s\" | grep -v grep || true", str[:half], str[half:]))
	out, _ := res["stdout"].(string)
	return out
}

// A timeout or a cancelled call ends the command and everything it started: a sequence, a pipeline, a shell
// waiting for its job. The result of a timeout says so.
func TestExecStopsTheWholeTree(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, nil)
		for i, command := range []string{"sleep %s; echo late > late-%[1]s", "sleep %s | cat", "sh -c 'sleep %s & wait'"} {
			dur := fmt.Sprintf("30.%d%d", i, time.Now().UnixNano()%1e6)
			res := s.ok(t, "e2b_exec", map[string]any{"sandbox_id": id, "command": fmt.Sprintf(command, dur), "timeout_ms": 500})
			if res["success"] != false || num(res["exit_code"]) != -1 {
				t.Fatalf("%s: %v", command, res)
			}
			wantContains(t, res["error"].(string), "everything it started were killed by the timeout after 500 ms")
			waitfor.Until(t, 30*time.Second, "the timed-out tree to be gone", func() bool { return running(t, s, id, "sleep "+dur) == "" })

			dur = fmt.Sprintf("31.%d%d", i, time.Now().UnixNano()%1e6)
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(800*time.Millisecond, cancel)
			req := mcp.CallToolRequest{}
			req.Params.Name = "e2b_exec"
			req.Params.Arguments = map[string]any{"sandbox_id": id, "command": fmt.Sprintf(command, dur)}
			_, _ = s.c.CallTool(ctx, req) // the cancelled call's answer, if any, does not matter: what it left does
			waitfor.Until(t, 30*time.Second, "the cancelled tree to be gone", func() bool { return running(t, s, id, "sleep "+dur) == "" })
		}
	})
}

// A server left running with & answers curl from the next e2b_exec, at 127.0.0.1 and at localhost, as on E2B: the
// sandbox's own loopback is not sent through the egress proxy (which refuses this machine's addresses).
func TestServerStartedWithAmpersandAnswersCurl(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, nil)
		if out := s.exec(t, id, "command -v python3 curl || true"); strings.Count(out["stdout"].(string), "\n") != 2 {
			optional.Missing(t, "python3 or curl (the web server and client of this test) is not installed")
		}
		port := 20000 + time.Now().UnixNano()%20000
		s.exec(t, id, fmt.Sprintf("echo hello > hello.txt; python3 -m http.server %d --bind 127.0.0.1 >/dev/null 2>&1 &", port))
		for _, host := range []string{"127.0.0.1", "localhost"} {
			fetch := fmt.Sprintf("for i in $(seq 100); do curl -sf http://%s:%d/hello.txt && exit 0; sleep 0.1; done; curl -sS http://%s:%d/hello.txt", host, port, host, port)
			if out := s.exec(t, id, fetch); out["stdout"] != "hello\n" {
				t.Errorf("curl %s: %v", host, out)
			}
		}
		s.exec(t, id, fmt.Sprintf("pkill -f 'http.serve[r] %d' || true", port))
	})
}

// Every tool on one of this server's processes checks its sandbox and pid the same way, before it asks envd.
func TestProcessToolsCheckTheirPID(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, nil)
		for _, name := range []string{"e2b_stop_process", "e2b_read_output", "e2b_send_input"} {
			for _, tc := range []struct {
				args map[string]any
				want string
			}{
				{map[string]any{"pid": 7, "data": "x"}, "Missing required parameter: sandbox_id"},
				{map[string]any{"sandbox_id": id, "data": "x"}, "Missing required parameter: pid"},
				{map[string]any{"sandbox_id": id, "pid": -3, "data": "x"}, "Invalid pid -3: it must be between 1 and 4194304."},
				{map[string]any{"sandbox_id": id, "pid": 1<<22 + 1, "data": "x"}, fmt.Sprintf("Invalid pid %d: it must be between 1 and %d.", 1<<22+1, 1<<22)},
			} {
				if name != "e2b_send_input" {
					delete(tc.args, "data")
				}
				if msg := s.fail(t, name, tc.args); !strings.Contains(msg, tc.want) {
					t.Errorf("%s %v: %q, want %q", name, tc.args, msg, tc.want)
				}
			}
		}
	})
}
