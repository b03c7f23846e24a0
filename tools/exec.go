package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/state"
)

const execName = "e2b_exec"

// maxExecTimeoutMs bounds timeout_ms; longer jobs belong in the background.
const maxExecTimeoutMs = 3_600_000

// execOutputDir is where the whole output of a truncated command is saved inside the sandbox, and where
// background commands write their logs.
const execOutputDir = "/tmp/e2b-mcp"

// backgroundTagPrefix begins the envd tag of every background command, so that e2b_list_processes and
// e2b_stop_process know them from the sandbox's other processes.
const backgroundTagPrefix = "e2b-mcp.bg."

// backgroundEnv is the environment a background command gets beyond the sandbox's: its output goes to a file
// that is read as it grows, where Python would hold it back in a buffer until it has 8 KiB (a server's ready line
// among it) unless told not to.
var backgroundEnv = map[string]string{"PYTHONUNBUFFERED": "1"}

type execArgs struct {
	SandboxID  string `json:"sandbox_id" jsonschema:"minLength=1" jsonschema_description:"The sandbox to run in, as returned by e2b_create_sandbox or e2b_list_sandboxes."`
	Command    string `json:"command" policy:"command" jsonschema:"minLength=1" jsonschema_description:"Shell command line, run with bash -l -c (pipes, &&, redirections and environment expansion work)."`
	Cwd        string `json:"cwd,omitempty" jsonschema:"minLength=1" jsonschema_description:"Working directory; relative paths are under /home/user."`
	TimeoutMs  *int   `json:"timeout_ms,omitempty" policy:"timeout_ms" jsonschema:"minimum=1,maximum=3600000" jsonschema_description:"Milliseconds before the command is killed (with everything it started)."`
	Background bool   `json:"background,omitempty" jsonschema_description:"Start the command and return at once with its pid and log_file (its stdout and stderr); it runs until it ends or e2b_stop_process stops it, with no timeout. For servers and long jobs. It does not keep the sandbox awake: when the sandbox sits unused past its timeout it is paused with the sandbox and goes on when the sandbox is next used (or killed with it, for on_timeout kill)."`
	WaitMs     *int   `json:"wait_ms,omitempty" jsonschema:"minimum=1,maximum=3600000" jsonschema_description:"Milliseconds to wait for the command before it is moved to the background (running true), for this call; the default is the server's foreground limit."`
	PTY        bool   `json:"pty,omitempty" jsonschema_description:"With background true: run the command on a terminal (its stdin and controlling terminal; its output still goes to log_file), for programs that want one: a prompt that reads /dev/tty, a REPL's line editing. Answer it with e2b_send_input."`
}

// execResult puts what happened first and the output last: a client that keeps only the start of a long result
// still shows whether the command still runs, its exit code, whether output was cut, and where the whole of it is.
// While the command runs its outcome is unknown, and the result says none: exit_code, success and error are
// absent until it has ended.
type execResult struct {
	Running      bool    `json:"running,omitempty" jsonschema_description:"True when the command still runs: started with background true, or still running at the foreground limit and moved to the background. It goes on as pid, its whole output in log_file (e2b_read_output); exit_code, success and error are absent until it ends."`
	PID          uint32  `json:"pid,omitempty" jsonschema_description:"While it runs: the process's pid, for e2b_read_output and e2b_stop_process."`
	ExitCode     *int    `json:"exit_code,omitempty" jsonschema_description:"The command's exit code; -1 when it was killed. Absent while it runs."`
	Success      *bool   `json:"success,omitempty" jsonschema_description:"True when the command exited with code 0. Absent while it runs."`
	Error        *string `json:"error,omitempty" jsonschema_description:"Why the command failed (exit status, or killed by the timeout); empty on success. Absent while it runs."`
	Truncated    bool    `json:"truncated" jsonschema_description:"True when stdout or stderr was cut to its head and tail; the whole stream is in stdout_file / stderr_file."`
	TotalLines   int64   `json:"total_lines" jsonschema_description:"Lines of stdout plus lines of stderr, before any cut."`
	StdoutFile   string  `json:"stdout_file,omitempty" jsonschema_description:"Path in the sandbox of the whole stdout, when it was truncated; read it with e2b_read_file."`
	StderrFile   string  `json:"stderr_file,omitempty" jsonschema_description:"Path in the sandbox of the whole stderr, when it was truncated."`
	LogFile      string  `json:"log_file,omitempty" jsonschema_description:"While it runs: the file in the sandbox that receives its stdout and stderr, from its first byte (what this result shows, then the rest); read it with e2b_read_output."`
	SandboxID    string  `json:"sandbox_id"`
	Resumed      bool    `json:"resumed,omitempty" jsonschema_description:"True when the sandbox had been paused at its timeout and this call resumed it first; its files, and the processes started before, are as they were."`
	Cwd          string  `json:"cwd"`
	CheckpointID string  `json:"checkpoint_id,omitempty" jsonschema_description:"The checkpoint taken automatically after this step, by the checkpoint policy."`
	Warning      string  `json:"warning,omitempty"`
	Stdout       string  `json:"stdout"`
	Stderr       string  `json:"stderr"`
	attachments          // its log, its files, an image
}

// ended sets the outcome of a command that has ended.
func (r *execResult) ended(exitCode int, success bool, why string) {
	r.ExitCode, r.Success, r.Error = &exitCode, &success, &why
}

// execTool is e2b_exec.
type execTool struct{ *base }

func (t execTool) tool() Tool {
	desc := fmt.Sprintf("Run a shell command in a sandbox and wait for it. Returns stdout, stderr, exit_code and success "+
		"(a non-zero exit is a normal result with success false, not a tool error). Runs with bash -l -c in cwd "+
		"(default %s). The command and everything it started are killed after timeout_ms (default %d ms, max %d). "+
		"A call waits at most %d ms (wait_ms): a command still running then is not killed but moved to the "+
		"background, and the call returns its output so far with running true and its pid (and no exit_code or success: "+
		"it has none yet); e2b_read_output reads the rest, and only a timeout_ms given still kills it. "+
		"Jobs a command leaves in the background (cmd &) keep running after it returns, their later output "+
		"discarded; for servers and long jobs use background true instead, which returns at once with a pid and a "+
		"log_file (read it with e2b_read_output, answer its prompts with e2b_send_input, with pty true for a terminal), "+
		"and see them with e2b_list_processes, stop them with e2b_stop_process. The result is kept within the result limit "+
		"(what your client shows whole): longer output keeps its head and tail around a line '... [N bytes / M lines "+
		"omitted] ...', truncated is true and the whole stream is saved in the sandbox (stdout_file / stderr_file) for "+
		"e2b_read_file. Output is streamed as progress notifications when the client asks for progress; cancelling the "+
		"call kills the command and everything it started.",
		WorkspacePath, t.cfg.ExecTimeout.Milliseconds(), maxExecTimeoutMs, t.cfg.ExecForegroundLimit.Milliseconds())
	return define(t.base, definition[execArgs, execResult]{
		name: execName, description: desc,
		hints:    hints{readOnly: false, destructive: true, idempotent: false, openWorld: true},
		defaults: execArgs{Cwd: WorkspacePath, TimeoutMs: new(int(t.cfg.ExecTimeout.Milliseconds()))},
		tasks:    TaskOfCommand,
		run:      t.run,
	})
}

func (t execTool) run(ctx context.Context, call Caller, a *execArgs) (*execResult, error) {
	switch {
	case strings.ContainsRune(a.Command, 0) || strings.ContainsRune(a.Cwd, 0):
		return nil, userErrorf("Invalid command or cwd: it contains a NUL byte, which no command line or path can " +
			"hold. Nothing was run.")
	case a.PTY && !a.Background:
		return nil, userErrorf("pty true needs background true: a command on a terminal is answered with e2b_send_input " +
			"while it runs. Nothing was run.")
	}
	// Without timeout_ms the server's timeout applies, unless the command outlives the foreground limit
	// (runCommand): a default timeout_ms, unlike a given one, does not kill a moved command.
	timeout := t.cfg.ExecTimeout
	if a.TimeoutMs != nil {
		timeout = time.Duration(*a.TimeoutMs) * time.Millisecond
	}
	use, err := t.running(ctx, call, a.SandboxID)
	if err != nil {
		return nil, err
	}
	c := use.c
	// The step counts whatever the command's fate: a failed command changed the sandbox as much as any.
	rec, err := t.countStep(call, use.rec.ID)
	if err != nil {
		return nil, err
	}

	if a.Background {
		return t.background(ctx, use, rec, call, a.Command, a.Cwd, a.PTY)
	}
	// A call offered a task runs its command in the background from the start, unless it gave a timeout, which
	// only a command this server streams can be held to: that one becomes a task if it is moved (below).
	if o := taskOfferFrom(ctx); o != nil && a.TimeoutMs == nil {
		return t.runAsTask(ctx, use, rec, call, a, o)
	}
	stdout, stderr := newCapture(t.limit(ctx), ""), newCapture(t.limit(ctx), "")
	defer stdout.close()
	defer stderr.close()
	prog := startProgress(ctx, t.cfg.ProgressInterval, t.log)
	// The sandbox must not time out under a command that runs longer than its timeout.
	awake := t.keepAwake(ctx, c, call, rec)
	out, moved, err := t.runCommand(ctx, c, call, rec, a, timeout, func(kind e2b.EventKind, data []byte) {
		switch kind {
		case e2b.EventStdout:
			stdout.write(data)
		case e2b.EventStderr:
			stderr.write(data)
		default:
			return
		}
		prog.add(data)
	})
	prog.finish()
	awake()
	if err != nil {
		return nil, t.sandboxFailure(ctx, c, call, rec, err)
	}

	res := execResult{
		SandboxID:  rec.ID,
		Resumed:    use.resumed,
		Cwd:        a.Cwd,
		TotalLines: stdout.lines() + stderr.lines(),
	}
	switch {
	case moved != nil:
		res.Running, res.PID, res.LogFile = true, moved.pid, moved.logFile
	case out.TimedOut:
		res.ended(out.ExitCode, false, fmt.Sprintf("The command and everything it started were killed by the timeout after "+
			"%d ms (timeout_ms). Raise timeout_ms, or start it with background true and read its log_file.",
			timeout.Milliseconds()))
	case out.ExitCode != 0:
		why := out.Error
		if why == "" {
			why = out.Status
		}
		if why == "" {
			why = fmt.Sprintf("exit status %d", out.ExitCode)
		}
		res.ended(out.ExitCode, false, why)
	default:
		res.ended(0, true, "")
	}
	streams := [2]stream{
		{c: stdout, name: "stdout", text: &res.Stdout, file: &res.StdoutFile},
		{c: stderr, name: "stderr", text: &res.Stderr, file: &res.StderrFile},
	}
	// Which streams the result cannot hold whole is known before they are saved, from the result with both files
	// named; what is shown of them is decided last, once every other field is known.
	probe := res
	probe.Truncated, probe.StdoutFile, probe.StderrFile = true, t.outputPath(rec, "stdout"), t.outputPath(rec, "stderr")
	probe.attach(t.outputLinks(rec, "stdout", "stderr")...)
	rooms := splitRoom(t.limit(ctx)-sizeOf(probe), stdout, stderr)
	warnings := []string{use.warning}
	if moved != nil {
		warnings = append(warnings, movedNote(moved, t.foregroundLimit(ctx, a)), moved.warning)
	}
	var links []mcp.Content
	for i, s := range streams {
		if s.c.fits(rooms[i]) {
			continue
		}
		p := t.outputPath(rec, s.name)
		if err := t.save(ctx, c, rec, s.c, p); err != nil {
			warnings = append(warnings, fmt.Sprintf("The whole %s could not be saved in the sandbox: %s", s.name,
				t.errorText(ctx, call, execName, err)))
			continue
		}
		*s.file = p
		links = append(links, t.outputLinks(rec, s.name)...)
	}
	var warn string
	res.CheckpointID, warn = t.afterStep(ctx, c, call, rec, execName)
	res.Warning = joinWarnings(append(warnings, warn)...)
	answer := fitOutput(t.limit(ctx), &res, links, streams)
	if o := taskOfferFrom(ctx); o != nil && moved != nil {
		if head, err := json.Marshal(res); err == nil {
			o.take(TaskCommand{SandboxID: rec.ID, PID: moved.pid, LogFile: moved.logFile, Head: head})
		}
	}
	return answer, nil
}

// stream is one output stream of a command and the fields of the result that show it.
type stream struct {
	c          *capture
	name       string
	text, file *string
}

// outputPath is where the whole of a command's stream is saved in the sandbox.
func (t execTool) outputPath(rec state.SandboxRecord, name string) string {
	return fmt.Sprintf("%s/exec-%d.%s", execOutputDir, rec.Steps, name)
}

// outputLinks link the saved streams as resources.
func (t execTool) outputLinks(rec state.SandboxRecord, names ...string) []mcp.Content {
	var links []mcp.Content
	for _, name := range names {
		links = append(links, fileLink(rec.ID, t.outputPath(rec, name), "the whole "+name+" of the command"))
	}
	return links
}

// splitRoom shares the room of a result between stdout and stderr: a stream that needs less than half keeps all
// of it, and leaves the rest to the other.
func splitRoom(room int, stdout, stderr *capture) [2]int {
	room = max(room, 0)
	half := room / 2
	switch o, e := stdout.cost(), stderr.cost(); {
	case o >= 0 && o <= half:
		return [2]int{o, room - o}
	case e >= 0 && e <= half:
		return [2]int{room - e, e}
	}
	return [2]int{half, room - half}
}

// fitOutput fills in the streams' text (fields of res) within what the result's other fields leave of room.
// The cost model (fieldCost) is exact, so this needs no second measure; success checks the whole answer anyway.
func fitOutput(room int, res *execResult, links []mcp.Content, streams [2]stream) *execResult {
	res.attach(links...)
	res.Truncated = false // sized with its longer value
	rooms := splitRoom(room-sizeOf(res), streams[0].c, streams[1].c)
	for i, s := range streams {
		var cut bool
		*s.text, cut = s.c.text(rooms[i])
		res.Truncated = res.Truncated || cut
	}
	return res
}

// save uploads a truncated stream's spool file to p in the sandbox.
func (t execTool) save(ctx context.Context, c *e2b.Client, rec state.SandboxRecord, s *capture, p string) error {
	r, err := s.spooled()
	if err != nil {
		return fmt.Errorf("spooling the output on the server: %w", err)
	}
	_, err = envd(c, rec).Upload(ctx, p, r)
	return err
}

// background starts a command that outlives the call, with its output in a log file under execOutputDir.
func (t execTool) background(ctx context.Context, use inUse, rec state.SandboxRecord, call Caller, command, cwd string,
	pty bool) (*execResult, error) {
	c := use.c
	id := fmt.Sprintf("%d-%d", rec.Steps, time.Now().UnixNano()%1e9)
	pid, err := envd(c, rec).StartBackground(ctx, command, e2b.BackgroundOptions{Cwd: cwd, Envs: backgroundEnv,
		LogDir: execOutputDir, Tag: backgroundTagPrefix + id, PTY: pty})
	if err != nil {
		return nil, t.sandboxFailure(ctx, c, call, rec, err)
	}
	logFile, _ := e2b.BackgroundFiles(execOutputDir, pid)
	res := execResult{Running: true, PID: pid, LogFile: logFile, SandboxID: rec.ID, Resumed: use.resumed, Cwd: cwd}
	var warning string
	res.CheckpointID, warning = t.afterStep(ctx, c, call, rec, execName)
	res.Warning = joinWarnings(use.warning, warning)
	res.attach(fileLink(rec.ID, logFile, "the log (stdout and stderr) of the background command"))
	return &res, nil
}
