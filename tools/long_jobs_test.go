package tools

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/internal/optional"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// shortForeground is the foreground limit of these tests: a command still running after it is moved.
func shortForeground(c *Config) { c.ExecForegroundLimit = time.Second }

// readUntilEnd reads a process's output with e2b_read_output from offset until the process has ended, and
// returns the last answer and all the output read.
func (s *session) readUntilEnd(t *testing.T, id string, pid int, offset int64) (map[string]any, string) {
	t.Helper()
	var out strings.Builder
	var res map[string]any
	waitfor.Until(t, time.Minute, fmt.Sprintf("process %d to end", pid), func() bool {
		res = s.ok(t, "e2b_read_output", map[string]any{"sandbox_id": id, "pid": pid, "offset": offset, "wait_ms": 5000})
		out.WriteString(res["output"].(string))
		offset = int64(num(res["next_offset"]))
		return res["running"] == false
	})
	return res, out.String()
}

// listed is the entry of pid in e2b_list_processes. (The real envd's sandboxes share the host's /tmp, so the
// list may show the processes of other tests' sandboxes too.)
func (s *session) listed(t *testing.T, id string, pid int) map[string]any {
	t.Helper()
	list := s.ok(t, "e2b_list_processes", map[string]any{"sandbox_id": id})
	procs, _ := list["processes"].([]any)
	for _, p := range procs {
		if p := p.(map[string]any); num(p["pid"]) == pid {
			return p
		}
	}
	t.Fatalf("process %d not listed: %v", pid, list)
	return nil
}

// A command that outlives the foreground limit returns within it with its output so far, running true and its pid,
// and goes on in the background: e2b_list_processes lists it, e2b_read_output reads the rest and its exit code.
func TestExecMovesLongCommandToBackground(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, nil)
		s.exec(t, id, "true") // the sandbox's envd is up
		start := time.Now()
		res := s.exec(t, id, "echo started; sleep 3; echo done")
		took := time.Since(start)
		pid := num(res["pid"])
		if res["running"] != true || pid <= 0 || res["stdout"] != "started\n" {
			t.Fatalf("moved command: %v after %v", res, took)
		}
		wantContains(t, res["warning"].(string), "goes on in the background", "e2b_read_output", fmt.Sprint(pid))
		t.Logf("moved after %v with a foreground limit of 1s", took)
		if p := s.listed(t, id, pid); p["running"] != true || p["foreground"] != true || p["log_file"] != res["log_file"] {
			t.Fatalf("listed: %v", p)
		}
		end, out := s.readUntilEnd(t, id, pid, 0)
		if out != "started\ndone\n" || num(end["exit_code"]) != 0 || end["exit_code"] == nil || end["warning"] != nil {
			t.Fatalf("read %q, last answer %v", out, end)
		}
		// A moved command has no stdin to write to.
		wantContains(t, s.fail(t, "e2b_send_input", map[string]any{"sandbox_id": id, "pid": pid, "data": "x\n"}), "not a running background command")

		// An explicit timeout_ms still kills a moved command; the default one does not apply once it is moved.
		res = s.ok(t, "e2b_exec", map[string]any{"sandbox_id": id, "command": "sleep 30", "timeout_ms": 2500})
		if res["running"] != true {
			t.Fatalf("sleep 30: %v", res)
		}
		if end, _ := s.readUntilEnd(t, id, num(res["pid"]), 0); num(end["exit_code"]) != -1 {
			t.Fatalf("killed by its timeout: %v", end)
		}
		res = s.ok(t, "e2b_exec", map[string]any{"sandbox_id": id, "command": "sleep 1.5; echo late", "timeout_ms": 500, "wait_ms": 5000})
		if res["running"] == true || res["success"] != false || !strings.Contains(fmt.Sprint(res["error"]), "timeout") {
			t.Fatalf("timeout within wait_ms: %v", res)
		}
		// wait_ms of the call in place of the server's limit.
		if res := s.ok(t, "e2b_exec", map[string]any{"sandbox_id": id, "command": "sleep 1.5; echo waited", "wait_ms": 10000}); res["running"] == true || res["stdout"] != "waited\n" {
			t.Fatalf("wait_ms 10000: %v", res)
		}
		wantContains(t, s.fail(t, "e2b_exec", map[string]any{"sandbox_id": id, "command": "true", "wait_ms": -1}), "Invalid wait_ms")
		wantContains(t, s.fail(t, "e2b_exec", map[string]any{"sandbox_id": id, "command": "true", "pty": true}), "pty true needs background true")
	}, shortForeground)
}

// A result says nothing of a command's outcome before it has one: while it runs (moved to the background, or
// started there) there is no exit_code, success or error, and running and pid are its first facts; once it has
// ended, e2b_read_output and e2b_list_processes name its command.
func TestFactsOfARunningCommand(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, nil)
		firstFacts := func(name string, res *mcp.CallToolResult) map[string]any {
			t.Helper()
			fields := mustOK(t, name, res)
			if text := resultText(res); !regexp.MustCompile(`^\{"running":true,"pid":[1-9][0-9]*,`).MatchString(text) {
				t.Fatalf("%s: running and pid are not the first facts: %.200s", name, text)
			}
			for _, k := range []string{"exit_code", "success", "error"} {
				if v, has := fields[k]; has {
					t.Fatalf("%s: %s %v of a command that still runs: %v", name, k, v, fields)
				}
			}
			return fields
		}
		moved := firstFacts("e2b_exec", s.call(t, "e2b_exec", map[string]any{"sandbox_id": id, "command": "echo one; sleep 2; echo two; exit 3"}))
		pid := num(moved["pid"])
		firstFacts("e2b_read_output", s.call(t, "e2b_read_output", map[string]any{"sandbox_id": id, "pid": pid}))
		firstFacts("e2b_exec", s.call(t, "e2b_exec", map[string]any{"sandbox_id": id, "command": "sleep 1", "background": true}))

		end, _ := s.readUntilEnd(t, id, pid, 0)
		if num(end["exit_code"]) != 3 || end["command"] != "echo one; sleep 2; echo two; exit 3" {
			t.Fatalf("the ended command: %v", end)
		}
		if p := s.listed(t, id, pid); p["running"] != false || num(p["exit_code"]) != 3 || p["command"] != end["command"] {
			t.Fatalf("listed once ended: %v", p)
		}
		// A text looked for in the output of an ended process that does not hold it will not come, and the answer
		// says so.
		never := s.ok(t, "e2b_read_output", map[string]any{"sandbox_id": id, "pid": pid, "until": "three", "wait_ms": 100})
		if never["found"] != false || never["running"] != false {
			t.Fatalf("until in an ended process's output: %v", never)
		}
		wantContains(t, fmt.Sprint(never["warning"]), "will not come")
		// A command that ended in the foreground has its outcome.
		if res := s.exec(t, id, "exit 2"); num(res["exit_code"]) != 2 || res["success"] != false || res["error"] != "exit status 2" || res["running"] != nil {
			t.Fatalf("exit 2: %v", res)
		}
	}, shortForeground)
}

// e2b_read_output with until answers as soon as a server's ready line is there; its head and tail stay within the
// result limit with the offsets of what was left out.
func TestReadOutputUntilAndLimit(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, nil)
		if out := s.exec(t, id, "command -v python3 || true"); out["stdout"] == "" {
			optional.Missing(t, "python3 (the web server of this test) is not installed")
		}
		port := 20000 + time.Now().UnixNano()%20000
		bg := s.ok(t, "e2b_exec", map[string]any{"sandbox_id": id, "background": true,
			"command": fmt.Sprintf("sleep 1; python3 -m http.server %d --bind 127.0.0.1", port)})
		pid := num(bg["pid"])
		start := time.Now()
		res := s.ok(t, "e2b_read_output", map[string]any{"sandbox_id": id, "pid": pid, "wait_ms": 30000, "until": "Serving HTTP"})
		took := time.Since(start)
		if res["found"] != true || res["running"] != true || !strings.Contains(res["output"].(string), "Serving HTTP") {
			t.Fatalf("until: %v after %v", res, took)
		}
		t.Logf("the ready line of a server that sleeps 1 s first was read after %v", took)
		next := num(res["next_offset"])
		// At once, with nothing new.
		if again := s.ok(t, "e2b_read_output", map[string]any{"sandbox_id": id, "pid": pid, "offset": next}); again["output"] != "" || num(again["next_offset"]) != next || again["found"] != nil {
			t.Fatalf("nothing new: %v", again)
		}
		// A text that does not come: the wait ends at wait_ms with found false.
		if miss := s.ok(t, "e2b_read_output", map[string]any{"sandbox_id": id, "pid": pid, "offset": next, "wait_ms": 300, "until": "never printed"}); miss["found"] != false || miss["running"] != true {
			t.Fatalf("until a text that never comes: %v", miss)
		}
		s.ok(t, "e2b_stop_process", map[string]any{"sandbox_id": id, "pid": pid})

		// 210,000 bytes of output: the head and the tail, and a read from omitted_from goes on from there.
		big := s.ok(t, "e2b_exec", map[string]any{"sandbox_id": id, "background": true,
			"command": "for i in $(seq 10000); do printf 'line %015d\\n' $i; done"})
		s.readUntilEnd(t, id, num(big["pid"]), 0)
		if end := s.ok(t, "e2b_read_output", map[string]any{"sandbox_id": id, "pid": num(big["pid"]), "offset": 209_999}); end["output"] != "\n" || num(end["exit_code"]) != 0 {
			t.Fatalf("last byte: %v", end)
		}
		cut := s.ok(t, "e2b_read_output", map[string]any{"sandbox_id": id, "pid": num(big["pid"])})
		out := cut["output"].(string)
		from, to := num(cut["omitted_from"]), num(cut["omitted_to"])
		if cut["truncated"] != true || num(cut["next_offset"]) != 210_000 || !strings.HasPrefix(out, "line 000000000000001\n") ||
			!strings.HasSuffix(out, "line 000000000010000\n") || from <= 0 || to <= from || to > 210_000 ||
			!strings.Contains(out, fmt.Sprintf("[bytes %d to %d omitted", from, to)) {
			t.Fatalf("cut: %v", cut)
		}
		var whole strings.Builder
		for i := 1; i <= 10000; i++ {
			fmt.Fprintf(&whole, "line %015d\n", i)
		}
		if mid := s.ok(t, "e2b_read_output", map[string]any{"sandbox_id": id, "pid": num(big["pid"]), "offset": from}); !strings.HasPrefix(whole.String()[from:], strings.SplitN(mid["output"].(string), "... [", 2)[0]) {
			t.Fatalf("from omitted_from %d: %.200v", from, mid)
		}

		wantContains(t, s.fail(t, "e2b_read_output", map[string]any{"sandbox_id": id, "pid": 1}), "Process 1 is not a command of this server's")
		wantContains(t, s.fail(t, "e2b_read_output", map[string]any{"sandbox_id": id, "pid": pid, "offset": 1 << 40}), "past the end")
		wantContains(t, s.fail(t, "e2b_read_output", map[string]any{"sandbox_id": id, "pid": pid, "offset": -1}), "Invalid offset")
		s.fail(t, "e2b_read_output", map[string]any{"sandbox_id": id})
	})
}

// e2b_send_input answers a prompt on stdin, and types on the terminal of a command started with pty true.
func TestSendInput(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, nil)
		bg := s.ok(t, "e2b_exec", map[string]any{"sandbox_id": id, "background": true, "command": "read -p 'name? ' n; echo hello $n"})
		pid := num(bg["pid"])
		sent := s.ok(t, "e2b_send_input", map[string]any{"sandbox_id": id, "pid": pid, "data": "ada\n"})
		if num(sent["bytes"]) != 4 || sent["pty"] != false || sent["log_file"] != bg["log_file"] {
			t.Fatalf("sent: %v", sent)
		}
		if end, out := s.readUntilEnd(t, id, pid, 0); out != "hello ada\n" || num(end["exit_code"]) != 0 {
			t.Fatalf("read %q, %v", out, end)
		}
		wantContains(t, s.fail(t, "e2b_send_input", map[string]any{"sandbox_id": id, "pid": pid, "data": "x"}), "not a running background command")
		wantContains(t, s.fail(t, "e2b_send_input", map[string]any{"sandbox_id": id, "pid": 1, "data": "x"}), "Process 1 is not a running background command")
		s.fail(t, "e2b_send_input", map[string]any{"sandbox_id": id, "pid": pid})

		// close ends the input: cat ends.
		bg = s.ok(t, "e2b_exec", map[string]any{"sandbox_id": id, "background": true, "command": "cat; echo eof"})
		s.ok(t, "e2b_send_input", map[string]any{"sandbox_id": id, "pid": num(bg["pid"]), "data": "a line\n", "close": true})
		if _, out := s.readUntilEnd(t, id, num(bg["pid"]), 0); out != "a line\neof\n" {
			t.Fatalf("cat read %q", out)
		}

		if out := s.exec(t, id, "command -v python3 || true"); out["stdout"] == "" {
			optional.Missing(t, "python3 (the REPL of this test) is not installed")
		}
		bg = s.ok(t, "e2b_exec", map[string]any{"sandbox_id": id, "background": true, "pty": true, "command": "python3 -i -q"})
		pid = num(bg["pid"])
		prompt := s.ok(t, "e2b_read_output", map[string]any{"sandbox_id": id, "pid": pid, "wait_ms": 10000, "until": ">>> "})
		if prompt["found"] != true {
			t.Fatalf("no prompt: %v", prompt)
		}
		if sent := s.ok(t, "e2b_send_input", map[string]any{"sandbox_id": id, "pid": pid, "data": "1+1\n"}); sent["pty"] != true {
			t.Fatalf("sent: %v", sent)
		}
		next := num(prompt["next_offset"])
		answer := s.ok(t, "e2b_read_output", map[string]any{"sandbox_id": id, "pid": pid, "offset": next, "wait_ms": 10000, "until": "2\n"})
		if answer["found"] != true || !strings.HasPrefix(answer["output"].(string), "2\n") {
			t.Fatalf("1+1: %v", answer)
		}
		s.ok(t, "e2b_send_input", map[string]any{"sandbox_id": id, "pid": pid, "data": "", "close": true})
		if end, _ := s.readUntilEnd(t, id, pid, 0); num(end["exit_code"]) != 0 || end["exit_code"] == nil {
			t.Fatalf("after Ctrl-D: %v", end)
		}
	})
}

// A process started before the server restarted is read and written after it: what the tools know of it is in the
// sandbox.
func TestBackgroundProcessOutlivesServerRestart(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, nil)
		bg := s.ok(t, "e2b_exec", map[string]any{"sandbox_id": id, "background": true, "command": "echo before; read l; echo got $l"})
		pid := num(bg["pid"])
		if first := s.ok(t, "e2b_read_output", map[string]any{"sandbox_id": id, "pid": pid, "wait_ms": 10000, "until": "before"}); first["found"] != true {
			t.Fatalf("before the restart: %v", first)
		}
		// A new server: new tools over the same store, nothing of the old one's memory.
		after := connectDeps(t, e.deps, eras[0], s.caller)
		if p := after.listed(t, id, pid); p["running"] != true || p["command"] != "echo before; read l; echo got $l" {
			t.Fatalf("listed after the restart: %v", p)
		}
		after.ok(t, "e2b_send_input", map[string]any{"sandbox_id": id, "pid": pid, "data": "it\n"})
		if end, out := after.readUntilEnd(t, id, pid, 0); out != "before\ngot it\n" || num(end["exit_code"]) != 0 {
			t.Fatalf("after the restart: %q %v", out, end)
		}
	})
}

// e2b_list_processes shows every running command but only the ended ones that wrote their log last, however many
// commands the sandbox has run, and says how many it left out.
func TestListProcessesBoundsEnded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.connect(t, eras[0], Caller{Owner: "alice", Session: "main"})
	id := s.createSandbox(t, nil)
	// The log and exit files of 30 commands that ended, the last written by the highest pid.
	s.exec(t, id, "mkdir -p /tmp/e2b-mcp && cd /tmp/e2b-mcp && for i in $(seq 1001 1030); do echo out > bg-$i.log; echo 0 > bg-$i.exit; touch -d @$((1700000000+i)) bg-$i.log; done")
	bg := s.ok(t, "e2b_exec", map[string]any{"sandbox_id": id, "background": true, "command": "sleep 30"})
	list := s.ok(t, "e2b_list_processes", map[string]any{"sandbox_id": id})
	procs, _ := list["processes"].([]any)
	if num(list["count"]) != maxEndedListed+1 || num(list["running"]) != 1 || num(list["ended_omitted"]) != 30-maxEndedListed || len(procs) != maxEndedListed+1 {
		t.Fatalf("list: count %v running %v omitted %v", list["count"], list["running"], list["ended_omitted"])
	}
	var ended []int
	for _, p := range procs {
		p := p.(map[string]any)
		switch {
		case num(p["pid"]) == num(bg["pid"]):
			if p["running"] != true {
				t.Fatalf("the running one: %v", p)
			}
		case p["running"] != false || num(p["exit_code"]) != 0 || p["exit_code"] == nil:
			t.Fatalf("an ended one: %v", p)
		default:
			ended = append(ended, num(p["pid"]))
		}
	}
	if len(ended) != maxEndedListed || ended[0] != 1030-maxEndedListed+1 || ended[len(ended)-1] != 1030 {
		t.Fatalf("ended listed: %v", ended)
	}
}

// A command moved to the background at the foreground limit is not killed by the default timeout, which it
// outlives: only a timeout_ms given kills a moved command.
func TestMovedCommandOutlivesTheDefaultTimeout(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, nil)
		res := s.exec(t, id, "echo started; sleep 4; echo survived")
		if res["running"] != true {
			t.Fatalf("a command of 4 s with a foreground limit of 1 s was not moved: %v", res)
		}
		end, out := s.readUntilEnd(t, id, num(res["pid"]), 0)
		if !strings.HasSuffix(out, "survived\n") || end["exit_code"] == nil || num(end["exit_code"]) != 0 {
			t.Fatalf("the moved command, past the default timeout of 2 s: read %q, last answer %v; want it to run to its end", out, end)
		}
	}, func(c *Config) { c.ExecForegroundLimit, c.ExecTimeout = time.Second, 2*time.Second })
}

// e2b_read_output's until finds a text that arrives in two writes, the first seen by one poll and the second by a
// later one.
func TestReadOutputUntilAcrossTwoPolls(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, nil)
		// The second half is written once the test sends a line, after the call has scanned the first.
		bg := s.ok(t, "e2b_exec", map[string]any{"sandbox_id": id, "background": true,
			"command": "printf Listen; read l; printf 'ing on\\n'; sleep 60"})
		pid, logFile := num(bg["pid"]), bg["log_file"].(string)
		waitfor.Until(t, 30*time.Second, "the first half in the log", func() bool {
			return s.ok(t, "e2b_read_output", map[string]any{"sandbox_id": id, "pid": pid})["output"] == "Listen"
		})
		mark := len(e.emu.Requests())
		type answer struct {
			res *mcp.CallToolResult
			err error
		}
		answered := make(chan answer, 1)
		go func() {
			req := mcp.CallToolRequest{}
			req.Params.Name = "e2b_read_output"
			req.Params.Arguments = map[string]any{"sandbox_id": id, "pid": pid, "wait_ms": 30000, "until": "Listening on"}
			res, err := s.c.CallTool(t.Context(), req)
			answered <- answer{res, err}
		}()
		waitfor.Until(t, 30*time.Second, "the call to scan the first half", func() bool {
			for _, r := range e.emu.Requests()[mark:] {
				if q, _ := url.ParseQuery(r.RawQuery); r.Path == "/files" && q.Get("path") == logFile && r.Header.Get("Range") == "bytes=0-5" {
					return true
				}
			}
			return false
		})
		s.ok(t, "e2b_send_input", map[string]any{"sandbox_id": id, "pid": pid, "data": "go\n"})
		a := waitfor.Recv(t, answered, time.Minute, "the answer of e2b_read_output")
		if a.err != nil {
			t.Fatal(a.err)
		}
		if res := mustOK(t, "e2b_read_output", a.res); res["found"] != true || res["output"] != "Listening on\n" {
			t.Fatalf("until 'Listening on', written as 'Listen' then 'ing on': %v", res)
		}
		s.ok(t, "e2b_stop_process", map[string]any{"sandbox_id": id, "pid": pid})
	})
}

// e2b_read_output waits at most the server's foreground limit, whatever wait_ms asks.
func TestReadOutputWaitsAtMostTheForegroundLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, shortForeground)
	s := e.connect(t, eras[0], Caller{Owner: "alice", Session: "main"})
	id := s.createSandbox(t, nil)
	bg := s.ok(t, "e2b_exec", map[string]any{"sandbox_id": id, "background": true, "command": "sleep 600"})
	// The test's own bound, far above the limit of 1 s, ends the call only when the limit did not.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = "e2b_read_output"
	req.Params.Arguments = map[string]any{"sandbox_id": id, "pid": num(bg["pid"]), "wait_ms": 600000, "until": "never printed"}
	res, err := s.c.CallTool(ctx, req)
	if ctx.Err() != nil {
		t.Fatalf("e2b_read_output with wait_ms 600000 and a foreground limit of 1 s did not answer within 30 s, when the test's bound ended it")
	}
	if err != nil {
		t.Fatal(err)
	}
	if got := mustOK(t, "e2b_read_output", res); got["running"] != true || got["found"] != false {
		t.Fatalf("after the foreground limit: %v", got)
	}
	s.ok(t, "e2b_stop_process", map[string]any{"sandbox_id": id, "pid": num(bg["pid"])})
}

// The foreground limit counts from envd's start event: a start held back by a slow envd past the limit is not
// moved to the background before the command could print anything, and its answer is the command's own end.
func TestSlowStartIsNotMoved(t *testing.T) {
	t.Parallel()
	e := newEnv(t, shortForeground)
	s := e.connect(t, eras[0], Caller{Owner: "alice", Session: "main"})
	id := s.createSandbox(t, nil)
	s.exec(t, id, "true")
	e.emu.SetFaults(e2btest.Faults{Latency: 1500 * time.Millisecond}) // every envd request answers after 1.5 s
	defer e.emu.SetFaults(e2btest.Faults{})
	res := s.exec(t, id, "echo hi")
	if res["running"] != nil || res["pid"] != nil || res["stdout"] != "hi\n" || res["exit_code"] == nil || num(res["exit_code"]) != 0 || res["success"] != true {
		t.Fatalf("echo hi, started 1.5 s late with a foreground limit of 1 s: %v", res)
	}
}

// A moved command whose shell could not write its exit code (it replaced itself with exec) still ends with one:
// the server writes what envd said.
func TestMovedCommandThatExecsHasItsExitCode(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, nil)
		res := s.exec(t, id, "echo started; sleep 2; exec sh -c 'echo replaced; exit 3'")
		if res["running"] != true {
			t.Fatalf("a command of 2 s with a foreground limit of 1 s was not moved: %v", res)
		}
		end, out := s.readUntilEnd(t, id, num(res["pid"]), 0)
		if !strings.HasSuffix(out, "replaced\n") || end["exit_code"] == nil || num(end["exit_code"]) != 3 {
			t.Fatalf("the moved command: read %q, last answer %v; want its exit code 3", out, end)
		}
	}, func(c *Config) { c.ExecForegroundLimit = time.Second })
}
