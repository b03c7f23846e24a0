package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"
)

// The terminal-UI check: Claude Code run interactively (its terminal UI, on a tmux pseudo-terminal) declares MCP
// Tasks on every tools/call, which `claude -p` does not. A stand-in model makes it run a 6-second e2b_exec, which
// e2b-mcp must answer as a task whose result reaches the model in Claude Code's completion notification; then a
// command that never ends, which the model stops with TaskStop (tasks/cancel), after which no process of it may
// be left. The audit must show one entry per call.

// Commands of the check. The sleeps' lengths are odd so that pgrep finds only this check's processes.
const (
	tuiJob      = "for i in 1 2 3 4 5 6; do echo tick $i; sleep 1; done; echo finished"
	tuiEndless  = "sleep 4417 & sleep 4418; echo never"
	tuiLeftover = "sleep 441[78]"
)

// tuiModel is the stand-in model of the check, a step each request: create a sandbox, run the job, wait for its
// notification, run the endless command, stop its task, end.
type tuiModel struct {
	mu         sync.Mutex
	raw        io.Writer
	jobResult  string    // what the model got for the job's call (a task started, not its output)
	notified   string    // the completion notification of the job's task
	endless    string    // what the model got for the endless command's call
	stoppedAt  time.Time // when the model called TaskStop
	stopResult string
	done       chan struct{}
	closeOnce  sync.Once
}

var (
	taskIDRE   = regexp.MustCompile(`(?i)task[_ ]?id[^A-Za-z0-9]{1,6}([A-Za-z0-9_-]{4,})`)
	notifiedRE = regexp.MustCompile(`(?s)<task-notification>.*?</task-notification>`)
)

func (m *tuiModel) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	if m.raw != nil {
		fmt.Fprintf(m.raw, "%s %s %s\n", req.Method, req.URL.Path, truncate(string(body), 20000))
	}
	var msg map[string]any
	if err := json.Unmarshal(body, &msg); err != nil {
		writeError(w, http.StatusBadRequest, "stand-in: the request body is not a JSON object")
		return
	}
	if strings.HasSuffix(req.URL.Path, "/count_tokens") {
		writeJSON(w, map[string]any{"input_tokens": 1000})
		return
	}
	name, args, id, text := m.turn(msg)
	answerAnthropic(w, msg, name, args, id, text)
}

// turn reads the conversation so far and makes the model's next move.
func (m *tuiModel) turn(msg map[string]any) (name string, args map[string]any, id, text string) {
	offered := map[string]bool{}
	for _, t := range list(msg["tools"]) {
		offered[str(obj(t)["name"])] = true
	}
	if !offered["mcp__e2b__e2b_exec"] {
		return "", nil, "", "OK." // a title or another request on the side
	}
	results := map[string]string{}
	var said strings.Builder
	for _, mm := range list(msg["messages"]) {
		if s, ok := obj(mm)["content"].(string); ok {
			said.WriteString(s + "\n")
		}
		for _, c := range list(obj(mm)["content"]) {
			block := obj(c)
			switch block["type"] {
			case "tool_result":
				res := openAIOutput(block["content"]) // text parts, as Anthropic's are shaped alike
				if s, ok := block["content"].(string); ok {
					res.Text = s
				}
				results[strings.TrimPrefix(str(block["tool_use_id"]), "toolu_")] = res.Text
			case "text":
				said.WriteString(str(block["text"]) + "\n")
			}
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	sandbox := ""
	if sm := sandboxIDRE.FindStringSubmatch(results["toolu_create"]); sm != nil {
		sandbox = sm[1]
	}
	switch {
	case results["toolu_create"] == "":
		return "mcp__e2b__e2b_create_sandbox", map[string]any{"title": "terminal UI check"}, "toolu_create", ""
	case results["toolu_job"] == "":
		return "mcp__e2b__e2b_exec", map[string]any{"sandbox_id": sandbox, "command": tuiJob}, "toolu_job", ""
	}
	m.jobResult = results["toolu_job"]
	note := notifiedRE.FindString(said.String())
	switch {
	case note == "" && strings.Contains(m.jobResult, "finished"):
		m.finish() // the call ended with its output: no task
		return "", nil, "", "The job ended within the call."
	case note == "":
		return "", nil, "", "The job runs; I will wait for it."
	case results["toolu_endless"] == "":
		m.notified = note
		return "mcp__e2b__e2b_exec", map[string]any{"sandbox_id": sandbox, "command": tuiEndless}, "toolu_endless", ""
	case results["toolu_stop"] == "":
		m.endless = results["toolu_endless"]
		ids := taskIDRE.FindAllStringSubmatch(m.endless, -1)
		if len(ids) == 0 {
			m.finish()
			return "", nil, "", "The endless command did not become a task."
		}
		m.stoppedAt = time.Now()
		return "TaskStop", map[string]any{"task_id": ids[len(ids)-1][1]}, "toolu_stop", ""
	}
	m.stopResult = results["toolu_stop"]
	m.finish()
	return "", nil, "", "All the checks are done."
}

func (m *tuiModel) finish() { m.closeOnce.Do(func() { close(m.done) }) }

// tuiSession runs the check and returns its results, a row of the table.
func tuiSession(bin, prefix, dir string, timeout time.Duration) *run {
	r := &run{client: "claude TUI stdio"}
	fail := func(step, note string) *run {
		r.results = append(r.results, stepResult{step, false, note})
		return r
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fail("session", err.Error())
	}
	raw, err := os.Create(filepath.Join(dir, "standin.log"))
	if err != nil {
		return fail("session", err.Error())
	}
	defer raw.Close()
	model := &tuiModel{raw: raw, done: make(chan struct{})}
	srv := &http.Server{Handler: model}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail("session", err.Error())
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	home := filepath.Join(dir, "home")
	work := filepath.Join(dir, "work")
	state := filepath.Join(dir, "state")
	for _, d := range []string{home, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fail("session", err.Error())
		}
	}
	const apiKey = "sk-ant-standin-0123456789abcdefghijklmn"
	// What Claude Code asks on a first start, answered beforehand: onboarding, the API key, trusting the folder.
	if err := writeJSONFile(filepath.Join(home, ".claude.json"), map[string]any{
		"hasCompletedOnboarding": true, "theme": "dark",
		"customApiKeyResponses": map[string]any{"approved": []string{apiKey[len(apiKey)-20:]}, "rejected": []string{}},
		"projects": map[string]any{work: map[string]any{"hasTrustDialogAccepted": true,
			"hasCompletedProjectOnboarding": true}},
	}); err != nil {
		return fail("session", err.Error())
	}
	mcpConfig := filepath.Join(dir, "mcp.json")
	server := map[string]any{
		"type": "stdio", "command": bin, "args": []string{"serve", "--backend", "local", "--state-dir", state}}
	if err := writeJSONFile(mcpConfig, map[string]any{"mcpServers": map[string]any{"e2b": server}}); err != nil {
		return fail("session", err.Error())
	}
	socket := "e2b-mcp-clients-" + fmt.Sprint(os.Getpid())
	tmux := func(args ...string) ([]byte, error) {
		return exec.Command("tmux", append([]string{"-L", socket}, args...)...).CombinedOutput()
	}
	claude := strings.Join([]string{shellQuote(filepath.Join(prefix, "node_modules", ".bin", "claude")),
		"--mcp-config", shellQuote(mcpConfig), "--strict-mcp-config", "--allowedTools", "mcp__e2b",
		"--model", "claude-sonnet-4-5", "2>" + shellQuote(filepath.Join(dir, "claude.err"))}, " ")
	env := []string{"HOME=" + home, "ANTHROPIC_BASE_URL=http://" + ln.Addr().String(), "ANTHROPIC_API_KEY=" + apiKey,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1", "MCP_TIMEOUT=60000",
		"ENABLE_TOOL_SEARCH=false", "TERM=xterm-256color"}
	var envArgs []string
	for _, e := range env {
		envArgs = append(envArgs, "-e", e)
	}
	if out, err := tmux(append(append([]string{"new-session", "-d", "-x", "200", "-y", "50", "-c", work}, envArgs...),
		claude)...); err != nil {
		return fail("session", fmt.Sprintf("tmux: %v: %s", err, out))
	}
	defer func() { _, _ = tmux("kill-server") }()
	screen := func() string { out, _ := tmux("capture-pane", "-p"); return string(out) }
	defer func() { _ = os.WriteFile(filepath.Join(dir, "screen.txt"), []byte(screen()), 0o644) }()

	// The prompt, once the terminal UI reads input.
	ready := time.Now().Add(60 * time.Second)
	for !strings.Contains(screen(), "❯") && time.Now().Before(ready) {
		time.Sleep(500 * time.Millisecond)
	}
	time.Sleep(2 * time.Second) // the MCP server connects
	// The prompt, then Enter on its own: typed at once, Enter is taken as part of a paste.
	const prompt = "Run the long job in a sandbox, then stop the endless one."
	if out, err := tmux("send-keys", "-t", "0", "-l", prompt); err != nil {
		return fail("session", fmt.Sprintf("tmux send-keys: %v: %s", err, out))
	}
	time.Sleep(time.Second)
	if out, err := tmux("send-keys", "-t", "0", "Enter"); err != nil {
		return fail("session", fmt.Sprintf("tmux send-keys: %v: %s", err, out))
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	select {
	case <-model.done:
	case <-ctx.Done():
		return fail("session", fmt.Sprintf("the session did not end within %v (see %s)", timeout, dir))
	}
	// The check of the stop: no process of the endless command left, polled for up to 5 s, timed from the call.
	var left time.Duration
	if !model.stoppedAt.IsZero() {
		for {
			if exec.Command("pgrep", "-f", tuiLeftover).Run() != nil { // exit status 1: none
				left = time.Since(model.stoppedAt)
				break
			}
			if time.Since(model.stoppedAt) > 5*time.Second {
				left = -1
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	r.results = append(r.results, connection(home))
	model.mu.Lock()
	defer model.mu.Unlock()
	r.results = append(r.results, check("job answered as a task", model.jobResult,
		!strings.Contains(model.jobResult, "finished") && taskIDRE.MatchString(model.jobResult)))
	r.results = append(r.results, check("notification: all output, exit code 0", model.notified,
		strings.Contains(model.notified, "tick 6") && strings.Contains(model.notified, "finished") &&
			regexp.MustCompile(`exit_code\\?"?:\s*0\b|exit code 0`).MatchString(model.notified)))
	r.results = append(r.results, check("endless command answered as a task", model.endless,
		taskIDRE.MatchString(model.endless)))
	stop := stepResult{"TaskStop leaves no process", left > 0, "processes left 5 s after TaskStop"}
	if left > 0 {
		stop.note = fmt.Sprintf("none left %d ms after the model's TaskStop", left.Milliseconds())
	}
	r.results = append(r.results, stop)
	calls, err := auditedCalls(filepath.Join(state, "audit.jsonl"), "e2b_exec")
	r.results = append(r.results, stepResult{"audit: one entry per call", err == nil && calls == 2,
		fmt.Sprintf("%d e2b_exec entries for 2 calls %v", calls, errOrEmpty(err))})
	return r
}

// connection reads Claude Code's log of its MCP connection: how long e2b-mcp took to connect, and the protocol
// version they agreed. MCP Tasks need 2026-07-28; Claude Code falls back to 2025-11-25 when the server is slow to
// answer its first requests.
func connection(home string) stepResult {
	logs, _ := filepath.Glob(filepath.Join(home, ".cache", "claude-cli-nodejs", "*", "mcp-logs-e2b", "*.jsonl"))
	var text strings.Builder
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		text.Write(b)
	}
	took := regexp.MustCompile(`Successfully connected \(transport: \w+\) in (\d+)ms`).FindStringSubmatch(text.String())
	version := regexp.MustCompile(`negotiatedProtocolVersion\\?":\\?"([0-9-]+)`).FindStringSubmatch(text.String())
	if took == nil || version == nil {
		return stepResult{"connection", false, "no connection in Claude Code's MCP log"}
	}
	return stepResult{"connection", version[1] >= "2026-07-28",
		fmt.Sprintf("protocol %s, connected in %s ms", version[1], took[1])}
}

// check is a step's result: its text's head as the note.
func check(step, text string, pass bool) stepResult {
	note := "ok: " + head(text)
	if !pass {
		note = "got: " + head(text)
	}
	return stepResult{step, pass, note}
}

// auditedCalls counts the calls of tool in an audit log (the entries that start one; ends refer to them).
func auditedCalls(path, tool string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e struct {
			ID   string `json:"id"`
			Tool string `json:"tool"`
		}
		if json.Unmarshal(sc.Bytes(), &e) == nil && e.Tool == tool && e.ID != "" {
			n++
		}
	}
	return n, sc.Err()
}

func errOrEmpty(err error) string {
	if err != nil {
		return err.Error()
	}
	return ""
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
