package main

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// stepAt is the index of the scenario's step so named.
func stepAt(t *testing.T, name string) int {
	t.Helper()
	for i, s := range scenario {
		if s.name == name {
			return i
		}
	}
	t.Fatalf("no step %q", name)
	return -1
}

// TestScenarioChecks: each step's check passes the result e2b-mcp gives when the step worked, and fails, saying
// what is wrong, the result of a step that did not.
func TestScenarioChecks(t *testing.T) {
	for _, c := range []struct {
		step   string
		res    toolResult
		pass   bool
		note   string // the note starts with this
		wantIn func(r *run) string
		want   string
	}{
		{step: "create", res: toolResult{Text: `{"sandbox_id": "sbx-1", "title": "x"}`}, pass: true, note: "ok",
			wantIn: func(r *run) string { return r.sandbox }, want: "sbx-1"},
		{step: "create", res: toolResult{Text: `error: quota exceeded`}, note: "no sandbox_id: error: quota"},
		{step: "write", res: toolResult{Text: `{"success": true}`}, pass: true, note: "ok"},
		{step: "write", res: toolResult{Text: `{"success": false}`}, note: "lacks /\"success\":\\s*true/"},
		{step: "exec", res: toolResult{Text: `{"stdout": "hello from the model\n", "exit_code": 0}`}, pass: true},
		{step: "exec", res: toolResult{Text: `{"stdout": "hello from the model\n", "exit_code": 1}`},
			note: "lacks /\"exit_code\":\\s*0/"},
		{step: "failing exec", res: toolResult{Text: `{"stderr": "ls: No such file or directory", "exit_code": 2}`},
			pass: true},
		{step: "failing exec", res: toolResult{Text: `{"stderr": "", "exit_code": 0}`}, note: "lacks"},
		{step: "timeout_ms kill", res: toolResult{Text: `{"error": "command timed out after 1500ms"}`}, pass: true},
		{step: "timeout_ms kill", res: toolResult{Text: `{"exit_code": 0}`}, note: "lacks"},
		{step: "seq 1 200000", res: toolResult{Text: `{"stdout": "...199999\n200000\n", "exit_code": 0, "truncated": true}`},
			pass: true, note: "ok (68 chars)"},
		{step: "seq 1 200000", res: toolResult{Text: `{"exit_code": 0, "truncated": true} 200000 Output too large, ` +
			`saved to /tmp/tool-results/x.txt`}, note: "the client put the result in a file"},
		{step: "seq 1 200000", res: toolResult{Text: `{"stdout": "1\n2\n", "exit_code": 0, "truncated": true}`},
			note: `lacks /(^|\D)200000(\D|$)/`},
		{step: "seq 1 200000", res: toolResult{Text: `{"stdout": "1\n2\n...1200000\n", "exit_code": 0, "truncated": true}`},
			note: `lacks /(^|\D)200000(\D|$)/`},
		{step: "PNG read", res: toolResult{Text: "a PNG", Images: 1}, pass: true, note: "ok: image seen"},
		{step: "PNG read", res: toolResult{Text: "shown as image content"}, note: "no image, yet the note says"},
		{step: "PNG read", res: toolResult{Text: "a PNG: https://example.test/red.png"}, pass: true,
			note: "ok: no image; a note and a link"},
		{step: "PNG read", res: toolResult{Text: "a PNG"}, note: "no image and no link"},
		{step: "long job", res: toolResult{Text: `{"pid": 4242, "running": true}`}, pass: true,
			note: "ok: moved to the background", wantIn: func(r *run) string { return r.pid }, want: "4242"},
		{step: "long job", res: toolResult{Text: `{"stdout": "tick 6\nfinished\n", "exit_code": 0}`}, pass: true,
			note: "ok: ended within the call"},
		{step: "long job", res: toolResult{Text: `{"error": "sandbox gone"}`}, note: "neither running nor ended"},
		{step: "follow the job", res: toolResult{Text: `{"stdout": "finished\n", "exit_code": 0, "running": false}`},
			pass: true},
		{step: "delete (approval)", res: toolResult{Text: `{"error": "denied"}`}, note: "no approval link"},
		{step: "delete again", res: toolResult{Text: `{"success": true}`}, pass: true},
	} {
		r, handed := newRun()
		r.next = stepAt(t, c.step)
		r.record(c.res)
		if len(r.results) != 1 {
			t.Errorf("%s %q: %d results, want 1", c.step, c.res.Text, len(r.results))
			continue
		}
		got := r.results[0]
		if got.step != c.step || got.pass != c.pass || !strings.HasPrefix(got.note, c.note) {
			t.Errorf("%s %q: %+v, want pass %v and a note starting %q", c.step, c.res.Text, got, c.pass, c.note)
		}
		if r.next != stepAt(t, c.step)+1 {
			t.Errorf("%s: the run is at step %d after it", c.step, r.next)
		}
		if c.wantIn != nil && c.wantIn(r) != c.want {
			t.Errorf("%s: noted %q for the next steps, want %q", c.step, c.wantIn(r), c.want)
		}
		if !strings.Contains(handed.String(), `"step":"`+c.step+`"`) {
			t.Errorf("%s: not recorded: %q", c.step, handed)
		}
	}
}

// TestScenarioFollowsAJobBounded: the job is polled while it runs, at most maxRepeats times; a job that ended
// within its call is not followed at all.
func TestScenarioFollowsAJobBounded(t *testing.T) {
	follow := stepAt(t, "follow the job")
	r, _ := newRun()
	r.next, r.sandbox, r.pid = follow, "sbx-1", "4242"
	for i := 0; i < maxRepeats; i++ {
		if tool, args := r.nextCall(); tool != "e2b_read_output" || fmt.Sprint(args["pid"]) != "4242" {
			t.Fatalf("poll %d: called %s %v", i, tool, args)
		}
		r.record(toolResult{Text: `{"running": true, "stdout": "tick"}`})
		if len(r.results) != 0 || r.next != follow {
			t.Fatalf("poll %d of a running job ended the step: %+v", i, r.results)
		}
	}
	r.record(toolResult{Text: `{"running": true, "stdout": "tick"}`})
	if len(r.results) != 1 || r.results[0].pass || r.next != follow+1 {
		t.Errorf("a job still running after %d polls: %+v at step %d, want the step failed", maxRepeats, r.results, r.next)
	}

	ended, _ := newRun()
	ended.next, ended.sandbox = follow, "sbx-1"
	tool, _ := ended.nextCall()
	want := []stepResult{{"follow the job", true, "skipped: not needed"}}
	if tool != "e2b_manage_sandbox" || !reflect.DeepEqual(ended.results, want) {
		t.Errorf("a job that ended in its call: next call %s, results %+v, want it skipped", tool, ended.results)
	}
}

func TestIsImage(t *testing.T) {
	for in, want := range map[string]bool{
		pngBase64:                              true,
		"data:image/png;base64," + pngBase64:   true,
		"aGVsbG8gd29ybGQsIG5vdCBhbiBpbWFnZQ==": false, // base64, not a PNG
		"not base64 at all":                    false,
		"":                                     false,
	} {
		if got := isImage(in); got != want {
			t.Errorf("isImage(%.30q) = %v, want %v", in, got, want)
		}
	}
}

func TestClientName(t *testing.T) {
	for _, c := range []struct {
		offered []string
		tool    string
		want    string
	}{
		{[]string{"Bash", "mcp__e2b__e2b_exec"}, "e2b_exec", "mcp__e2b__e2b_exec"},
		{[]string{"mcp_e2b_e2b_exec"}, "e2b_exec", "mcp_e2b_e2b_exec"},
		{[]string{"e2b/e2b_exec"}, "e2b_exec", "e2b/e2b_exec"},
		{[]string{"e2b.e2b_exec"}, "e2b_exec", "e2b.e2b_exec"},
		{[]string{"e2b_exec"}, "e2b_exec", "e2b_exec"},
		{[]string{"mcp__e2b__e2b_exec_stream", "notmye2b_exec"}, "e2b_exec", ""},
		{[]string{"mcp__e2b__e2b_read_output"}, "e2b_read_file", ""},
	} {
		if got := clientName(c.offered, c.tool); got != c.want {
			t.Errorf("clientName(%v, %s) = %q, want %q", c.offered, c.tool, got, c.want)
		}
	}
}

func TestHead(t *testing.T) {
	if got := head("a\n  b\tc"); got != "a b c" {
		t.Errorf("head folds spaces to %q", got)
	}
	long := strings.Repeat("x", 200)
	if got := head(long); got != long[:160]+"…" {
		t.Errorf("head of 200 chars is %d bytes", len(got))
	}
}
