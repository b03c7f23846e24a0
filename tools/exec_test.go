package tools

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
	"github.com/e2b-mcp/e2b-mcp/state"
)

func TestExec(t *testing.T) {
	t.Parallel()
	forEachEra(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, nil)
		res := s.exec(t, id, "echo out; echo err >&2; printf 'no newline'")
		want := map[string]any{"sandbox_id": id, "cwd": "/home/user", "stdout": "out\nno newline", "stderr": "err\n",
			"exit_code": 0.0, "success": true, "truncated": false, "total_lines": 3.0, "error": ""}
		for k, v := range want {
			if res[k] != v {
				t.Errorf("%s = %#v, want %#v", k, res[k], v)
			}
		}

		// A failing command is a normal result, not a tool error.
		res = s.exec(t, id, "echo partial; exit 3")
		if res["success"] != false || num(res["exit_code"]) != 3 || res["stdout"] != "partial\n" {
			t.Fatalf("exit 3: %v", res)
		}
		wantContains(t, res["error"].(string), "exit status 3")

		s.exec(t, id, "mkdir -p sub/dir")
		res = s.ok(t, "e2b_exec", map[string]any{"sandbox_id": id, "command": "pwd", "cwd": "sub/dir"})
		if res["stdout"] != "/home/user/sub/dir\n" || res["cwd"] != "sub/dir" {
			t.Fatalf("cwd: %v", res)
		}

		// Every call that ran counted a step, the failing one too; a refused call did not.
		s.fail(t, "e2b_exec", map[string]any{"sandbox_id": id, "command": "true", "timeout_ms": -1})
		rec, err := e.store.Sandbox("alice", id)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Steps != 4 {
			t.Fatalf("steps = %d, want 4", rec.Steps)
		}
	})
}

func TestExecTimeout(t *testing.T) {
	t.Parallel()
	forEachEra(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, nil)
		// A timeout that did not stop the command would let it print "never".
		res := s.ok(t, "e2b_exec", map[string]any{"sandbox_id": id, "command": "echo begun; sleep 20; echo never", "timeout_ms": 400})
		if res["success"] != false || res["stdout"] != "begun\n" {
			t.Fatalf("result %v", res)
		}
		wantContains(t, res["error"].(string), "killed by the timeout after 400 ms")
	})
}

// timeout_ms is at most an hour: one millisecond more is refused as bad input, before envd, and runs nothing;
// the hour itself is taken.
func TestExecTimeoutIsAtMostAnHour(t *testing.T) {
	t.Parallel()
	forEachEra(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, nil)
		msg := s.fail(t, "e2b_exec", map[string]any{"sandbox_id": id, "command": "touch over-the-hour", "timeout_ms": 3_600_001})
		wantContains(t, msg, "Invalid timeout_ms 3600001", "between 1 and 3600000")
		res := s.ok(t, "e2b_exec", map[string]any{"sandbox_id": id, "command": "test ! -e over-the-hour && echo ran", "timeout_ms": 3_600_000})
		if res["success"] != true || res["stdout"] != "ran\n" {
			t.Fatalf("exec with timeout_ms 3600000: %v", res)
		}
	})
}

// seqOutput is what `seq 1 n` prints.
func seqOutput(n int) string {
	var sb strings.Builder
	for i := 1; i <= n; i++ {
		sb.WriteString(strconv.Itoa(i))
		sb.WriteByte('\n')
	}
	return sb.String()
}

var markerRE = regexp.MustCompile(`\n\.\.\. \[(\d+) bytes / (\d+) lines omitted\] \.\.\.\n`)

func TestExecTruncation(t *testing.T) {
	t.Parallel()
	const limit = MinResultLimit
	forEachEra(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, nil)
		raw := s.call(t, "e2b_exec", map[string]any{"sandbox_id": id, "command": "seq 1 5000; seq 1 3000 >&2"})
		if n := sentSize(t, raw); n > limit {
			t.Fatalf("the result is %d bytes as sent, over the %d limit", n, limit)
		}
		res := mustOK(t, "e2b_exec", raw)
		full, fullErr := seqOutput(5000), seqOutput(3000)
		if res["truncated"] != true || num(res["total_lines"]) != 8000 {
			t.Fatalf("truncated %v, total_lines %v", res["truncated"], res["total_lines"])
		}
		for _, c := range []struct {
			field, file, full string
		}{{"stdout", "stdout_file", full}, {"stderr", "stderr_file", fullErr}} {
			got := res[c.field].(string)
			m := markerRE.FindStringSubmatchIndex(got)
			if m == nil {
				t.Fatalf("%s has no marker line: %q", c.field, got)
			}
			head, tail := got[:m[0]+1], got[m[1]:]
			if !strings.HasPrefix(c.full, head) || !strings.HasSuffix(c.full, tail) || head == "" || tail == "" {
				t.Fatalf("%s is not a head and a tail of the output: %q ... %q", c.field, head, tail)
			}
			if !strings.HasSuffix(head, "\n") || !strings.HasPrefix(c.full[len(c.full)-len(tail)-1:], "\n") {
				t.Errorf("%s is not cut at line ends", c.field)
			}
			omitted := c.full[len(head) : len(c.full)-len(tail)]
			bytesN, _ := strconv.Atoi(got[m[2]:m[3]])
			linesN, _ := strconv.Atoi(got[m[4]:m[5]])
			if bytesN != len(omitted) || linesN != strings.Count(omitted, "\n") {
				t.Errorf("%s marker says %d bytes / %d lines, want %d / %d", c.field, bytesN, linesN, len(omitted), strings.Count(omitted, "\n"))
			}
			// The whole stream is in the sandbox, readable with e2b_read_file.
			path, _ := res[c.file].(string)
			if path != fmt.Sprintf("/tmp/e2b-mcp/exec-1.%s", c.field) {
				t.Fatalf("%s = %q", c.file, path)
			}
			if got := s.readPages(t, id, path); got != c.full {
				t.Fatalf("%s holds %d bytes, want the whole %d", path, len(got), len(c.full))
			}
		}
		// Output within the budget is whole and names no file.
		res = s.exec(t, id, "seq 1 100")
		if res["truncated"] != false || res["stdout"] != seqOutput(100) || res["stdout_file"] != nil {
			t.Fatalf("small output: %v", res)
		}
	}, func(c *Config) { c.ResultLimit = limit })
}

func TestExecProgress(t *testing.T) {
	t.Parallel()
	forEachEra(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, nil)
		res := s.callCtx(context.Background(), t, "e2b_exec",
			map[string]any{"sandbox_id": id, "command": "for i in 1 2 3; do echo line$i; sleep 0.2; done; echo oops >&2"},
			&mcp.Meta{ProgressToken: "tok-1"})
		out := mustOK(t, "e2b_exec", res)
		if out["stdout"] != "line1\nline2\nline3\n" {
			t.Fatalf("stdout %q", out["stdout"])
		}
		var seen string
		waitfor.Until(t, 30*time.Second, "all output as progress", func() bool {
			seen = ""
			for _, p := range s.progress() {
				if p["progressToken"] != "tok-1" {
					t.Fatalf("notification for token %v", p["progressToken"])
				}
				seen += p["message"].(string)
			}
			return strings.Contains(seen, "oops")
		})
		wantContains(t, seen, "line1\n", "line2\n", "line3\n")
		ps := s.progress()
		if len(ps) < 2 {
			t.Fatalf("%d notifications, want the output streamed in several", len(ps))
		}
		last := -1.0
		for _, p := range ps {
			v, err := strconv.ParseFloat(fmt.Sprint(p["progress"]), 64)
			if err != nil || v <= last {
				t.Fatalf("progress does not grow: %v", ps)
			}
			last = v
		}

		// Without a progress token, nothing is sent.
		before := len(s.progress())
		s.exec(t, id, "echo quiet")
		if len(s.progress()) != before {
			t.Fatal("progress was sent without a token")
		}
	}, func(c *Config) { c.ProgressInterval = 20 * time.Millisecond })
}

// TestExecCancel: cancelling the MCP request kills the command in the sandbox.
func TestExecCancel(t *testing.T) {
	t.Parallel()
	forEachEra(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, nil)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() {
			req := mcp.CallToolRequest{}
			req.Params.Name = "e2b_exec"
			req.Params.Arguments = map[string]any{"sandbox_id": id, "command": "echo started; sleep 30; touch /tmp/not-cancelled"}
			req.Params.Meta = &mcp.Meta{ProgressToken: "cancel-me"}
			_, err := s.c.CallTool(ctx, req)
			done <- err
		}()
		waitfor.Until(t, 30*time.Second, "the command to start", func() bool {
			for _, p := range s.progress() {
				if strings.Contains(fmt.Sprint(p["message"]), "started") {
					return true
				}
			}
			return false
		})
		envd := e.envdOf(t, "alice", id)
		running := func() bool {
			ps, err := envd.ListProcesses(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range ps {
				if strings.Contains(strings.Join(p.Config.Args, " "), "not-cancelled") {
					return true
				}
			}
			return false
		}
		if !running() {
			t.Fatal("the command is not among the sandbox's processes while it runs")
		}
		cancel()
		waitfor.Recv(t, done, 30*time.Second, "the cancelled call to end")
		waitfor.Until(t, 30*time.Second, "the process to be gone", func() bool { return !running() })
		sb, _ := e.emu.Sandbox(id)
		if _, err := os.Stat(filepath.Join(sb.Dir, "tmp", "not-cancelled")); !os.IsNotExist(err) {
			t.Fatalf("the cancelled command went on: %v", err)
		}
	}, func(c *Config) { c.ProgressInterval = 10 * time.Millisecond })
}

func TestCheckpointPolicyEverySteps(t *testing.T) {
	t.Parallel()
	forEachEra(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, nil)
		if res := s.exec(t, id, "echo one"); res["checkpoint_id"] != nil {
			t.Fatalf("checkpoint after step 1: %v", res)
		}
		res := s.exec(t, id, "false") // a failed command is a step too
		cp1, _ := res["checkpoint_id"].(string)
		if !strings.HasPrefix(cp1, "ckpt_") {
			t.Fatalf("no checkpoint after step 2: %v", res)
		}
		if w := s.ok(t, "e2b_write_file", map[string]any{"sandbox_id": id, "path": "a.txt", "content": "a"}); w["checkpoint_id"] != nil {
			t.Fatalf("checkpoint after step 3: %v", w)
		}
		// A failed capture keeps the call's result and warns.
		e.emu.FailNext(1, 500)
		res = s.exec(t, id, "echo four")
		if res["stdout"] != "four\n" || res["checkpoint_id"] != nil {
			t.Fatalf("result %v", res)
		}
		wantContains(t, res["warning"].(string), "automatic checkpoint after step 4 failed", "500")

		cps := s.ok(t, "e2b_list_checkpoints", map[string]any{"sandbox_id": id})
		if num(cps["count"]) != 1 {
			t.Fatalf("checkpoints %v", cps)
		}
		got := cps["checkpoints"].([]any)[0].(map[string]any)
		if got["checkpoint_id"] != cp1 || num(got["step"]) != 2 || got["sandbox_id"] != id {
			t.Fatalf("checkpoint %v", got)
		}

		// The sandbox's own policy wins over the session's.
		if _, err := e.store.UpdateSandbox("alice", id, func(r *state.SandboxRecord) error {
			r.Checkpoint = &state.CheckpointPolicy{EverySteps: 1}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if res := s.exec(t, id, "echo five"); res["checkpoint_id"] == nil {
			t.Fatalf("no checkpoint with every_steps 1: %v", res)
		}
	}, func(c *Config) { c.Checkpoints = state.CheckpointPolicy{EverySteps: 2} })
}

// A command too long for the sandbox's kernel (E2BIG) fails with an error the model can read, not with envd's
// message that repeats the whole command: a 2 MiB command must not come back as a 2 MiB error.
func TestExecHugeCommandErrorIsBounded(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, nil)
		command := "echo " + strings.Repeat("a", 2<<20) + " | wc -c"
		res := s.call(t, "e2b_exec", map[string]any{"sandbox_id": id, "command": command})
		text := resultText(res)
		if !res.IsError && !strings.Contains(text, "2097153") {
			t.Fatalf("neither an error nor the command's output: %.300s", text)
		}
		if res.IsError && (len(text) > 8<<10 || !strings.Contains(text, "E2B API error")) {
			t.Fatalf("error of %d bytes: %.300s", len(text), text)
		}
	})
}

// A NUL byte cannot be part of a command line: the call is refused as bad input, before envd, instead of with
// envd's error that repeats the server's wrapper script around the command.
func TestExecRefusesNUL(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.connect(t, eras[0], Caller{Owner: "alice", Session: "main"})
	id := s.createSandbox(t, nil)
	for _, args := range []map[string]any{
		{"sandbox_id": id, "command": "echo a\x00b"},
		{"sandbox_id": id, "command": "pwd", "cwd": "/tmp\x00x"},
	} {
		got := s.fail(t, "e2b_exec", args)
		wantContains(t, got, "NUL byte", "Nothing was run")
		if strings.Contains(got, "bash") {
			t.Errorf("the error shows the wrapper: %q", got)
		}
	}
}
