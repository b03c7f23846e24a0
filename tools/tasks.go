package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/state"
)

// Long calls as MCP tasks (the Tasks extension, io.modelcontextprotocol/tasks). The server offers a call a task
// when its client declared the extension on the request (TaskOffer). A tool whose call can outlive the client's
// patience takes the offer when its work still runs after the offer's wait: e2b_exec does so for a command it
// moves to the background, whose output goes on into a log file in the sandbox and whose exit code into an exit
// file there. Everything a task needs is therefore in the sandbox and the state store, and TaskCommands answers
// for it from there, on any server that shares the store and after a restart.

// TasksExtension names the Tasks extension. A tool that may answer with a task says so in its _meta under this
// name ({"taskSupport": "optional"}): the extension itself has no field for it (the server decides per call), and
// 2025-11-25's execution.taskSupport would promise the task parameter and tasks/result of that revision's tasks,
// which this server does not serve.
const TasksExtension = "io.modelcontextprotocol/tasks"

// DefaultTaskWait is how long a call offered a task waits for its work before it becomes a task: short, since a
// client that declared tasks moves a task to the background at once and keeps its model working.
const DefaultTaskWait = time.Second

// TaskKind says how a tool's call may become a task.
type TaskKind int

const (
	// NoTasks: the call is always answered with its result.
	NoTasks TaskKind = iota
	// TaskOfCommand: the tool takes a TaskOffer when its command still runs after TaskWait, and the task follows
	// the command in the sandbox, from anywhere (e2b_exec).
	TaskOfCommand
	// TaskOfServer: the server that runs the call holds it as a task once it outlives TaskWait, and records its
	// result when it ends; it cannot outlive that server (e2b_run_code, whose execution E2B's code interpreter
	// interrupts when the request that runs it goes).
	TaskOfServer
)

// TaskOffer is on the context of a call whose client declared the Tasks extension. The call waits
// Config.TaskWait for its work before it becomes a task.
type TaskOffer struct {
	mu    sync.Mutex
	taken *TaskCommand
}

// TaskCommand is the command a task follows.
type TaskCommand struct {
	SandboxID string
	PID       uint32
	LogFile   string
	// Head is the call's structured result when it became a task: the output so far.
	Head json.RawMessage
}

type taskOfferKey struct{}

// WithTaskOffer offers the call on ctx a task.
func WithTaskOffer(ctx context.Context, o *TaskOffer) context.Context {
	return context.WithValue(ctx, taskOfferKey{}, o)
}

func taskOfferFrom(ctx context.Context) *TaskOffer {
	o, _ := ctx.Value(taskOfferKey{}).(*TaskOffer)
	return o
}

func (o *TaskOffer) take(c TaskCommand) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.taken = &c
}

// Taken says whether the call took the offer, and the command the task follows if it did.
func (o *TaskOffer) Taken() (TaskCommand, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.taken == nil {
		return TaskCommand{}, false
	}
	return *o.taken, true
}

// TaskCommands answers for the commands of tasks from the sandbox they run in.
type TaskCommands struct{ t execTool }

// NewTaskCommands makes the TaskCommands of the tools made with d.
func NewTaskCommands(d Deps) TaskCommands { return TaskCommands{execTool{newBase(d)}} }

// Outcome is the result of the call whose task is t once its command ended (done), in the shape of e2b_exec's
// result: the facts first, then all the output, from the log (which holds it from the first byte). A failure
// to reach the sandbox is err; an answer the model should read (the sandbox is gone) is a result.
func (tc TaskCommands) Outcome(ctx context.Context, call Caller,
	t state.Task) (res *mcp.CallToolResult, done bool, err error) {
	b := tc.t.base
	rec, c, err := b.sandbox(ctx, call, t.SandboxID, true)
	var told *toolError
	if errors.As(err, &told) { // the sandbox is gone, or no longer the caller's: the command ended with it
		return b.failure(ctx, b.errorText(ctx, call, execName, err)), true, nil
	}
	if err != nil {
		return nil, false, err
	}
	e := envd(c, rec)
	states, _, err := processStates(ctx, e, rec.ID, 0, t.PID)
	if err != nil || states[0].running {
		return nil, false, err
	}
	var head execResult
	if err := json.Unmarshal(t.Head, &head); err != nil {
		return nil, false, fmt.Errorf("the task's record is damaged: %w", err)
	}
	answer, err := tc.t.ended(ctx, e, rec, head, states[0])
	if err != nil {
		return nil, false, err
	}
	return b.success(ctx, execName, answer), true, nil
}

// ended is the result of a command of e2b_exec that ended in the background: head's facts (the sandbox, the cwd)
// with the exit code, and as stdout its log (all it printed, from the first byte, what head showed included),
// within the result limit (the log is read from the sandbox, as a stream, whatever its length).
func (t execTool) ended(ctx context.Context, e *e2b.Envd, rec state.SandboxRecord, head execResult, p processState,
	warnings ...string) (*execResult, error) {
	res := execResult{SandboxID: rec.ID, Resumed: head.Resumed, Cwd: head.Cwd, CheckpointID: head.CheckpointID}
	switch {
	case p.exitCode == nil:
		res.ended(-1, false, "The command ended without an exit code: it was killed (SIGKILL), and what it printed "+
			"until then is all there is.")
	case *p.exitCode == 0:
		res.ended(0, true, "")
	default:
		res.ended(*p.exitCode, false, fmt.Sprintf("exit status %d", *p.exitCode))
	}
	stdout, stderr := newCapture(t.limit(ctx), ""), newCapture(t.limit(ctx), "")
	defer stdout.close()
	defer stderr.close()
	if p.logged && p.size > 0 {
		body, _, err := e.Download(ctx, p.logFile, e2b.DownloadOptions{Length: p.size})
		if err != nil {
			return nil, err
		}
		_, err = io.Copy(captureWriter{stdout}, io.LimitReader(body, p.size))
		body.Close()
		if err != nil {
			return nil, err
		}
	}
	res.TotalLines = stdout.lines() + stderr.lines()
	if !stdout.fits(t.limit(ctx) / 2) {
		res.StdoutFile = p.logFile
	}
	note := "stdout is the command's stdout and stderr together, as written to " + p.logFile + "."
	res.Warning = joinWarnings(append(warnings, note)...)
	streams := [2]stream{
		{c: stdout, name: "stdout", text: &res.Stdout, file: &res.StdoutFile},
		{c: stderr, name: "stderr", text: &res.Stderr, file: &res.StderrFile},
	}
	return fitOutput(t.limit(ctx), &res, []mcp.Content{fileLink(rec.ID, p.logFile, "the log (stdout and "+
		"stderr) of the command")}, streams), nil
}

// runAsTask runs the command of a call offered a task as a background command from its start, so that its
// output and exit code are written in the sandbox from the first byte and any server can answer for it later,
// and waits for it the call's foreground limit: a command that ended by then is answered as e2b_exec answers,
// one still running becomes the call's task (o), and the call answers what a client without tasks would get.
func (t execTool) runAsTask(ctx context.Context, use inUse, rec state.SandboxRecord, call Caller, a *execArgs,
	o *TaskOffer) (*execResult, error) {
	c := use.c
	e := envd(c, rec)
	id := fmt.Sprintf("%d-%d", rec.Steps, time.Now().UnixNano()%1e9)
	pid, err := e.StartBackground(ctx, a.Command, e2b.BackgroundOptions{Cwd: a.Cwd, Envs: backgroundEnv,
		LogDir: execOutputDir, Tag: backgroundTagPrefix + id})
	if err != nil {
		return nil, t.sandboxFailure(ctx, c, call, rec, err)
	}
	logFile, _ := e2b.BackgroundFiles(execOutputDir, pid)
	head := execResult{SandboxID: rec.ID, Resumed: use.resumed, Cwd: a.Cwd, PID: pid, LogFile: logFile, Running: true}
	awake := t.keepAwake(ctx, c, call, rec)
	defer awake()
	limit := t.foregroundLimit(ctx, a)
	deadline := time.Now().Add(limit)
	for {
		states, _, err := processStates(ctx, e, rec.ID, 0, pid)
		if err != nil {
			return nil, t.sandboxFailure(ctx, c, call, rec, err)
		}
		if !states[0].running {
			var warning string
			head.CheckpointID, warning = t.afterStep(ctx, c, call, rec, execName)
			answer, err := t.ended(ctx, e, rec, head, states[0], use.warning, warning)
			if err != nil {
				return nil, t.sandboxFailure(ctx, c, call, rec, err)
			}
			return answer, nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		select {
		case <-ctx.Done(): // a cancelled call takes its command along, as in the foreground
			_, _ = e.SignalTree(context.WithoutCancel(ctx), pid, stopGrace)
			return nil, ctx.Err()
		case <-time.After(min(outputPoll, left)):
		}
	}
	var warning string
	head.CheckpointID, warning = t.afterStep(ctx, c, call, rec, execName)
	if b, err := json.Marshal(head); err == nil {
		o.take(TaskCommand{SandboxID: rec.ID, PID: pid, LogFile: logFile, Head: b})
	}
	head.Warning = joinWarnings(use.warning, movedNote(&movedCommand{pid: pid, logFile: logFile}, limit), warning)
	head.attach(fileLink(rec.ID, logFile, "the log (stdout and stderr) of the command"))
	return &head, nil
}

// Stop stops the task's command and everything it started, as e2b_stop_process does; a command that already
// ended is no error.
func (tc TaskCommands) Stop(ctx context.Context, call Caller, t state.Task) error {
	rec, c, err := tc.t.sandbox(ctx, call, t.SandboxID, true)
	if err != nil {
		return err
	}
	_, err = envd(c, rec).SignalTree(ctx, t.PID, stopGrace)
	return err
}

// captureWriter writes into a capture.
type captureWriter struct{ c *capture }

func (w captureWriter) Write(p []byte) (int, error) {
	w.c.write(p)
	return len(p), nil
}
