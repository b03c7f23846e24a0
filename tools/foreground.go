package tools

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/state"
)

// A call of e2b_exec never outlives the client: a command still running at the foreground limit is moved to the
// background, and its output so far is the call's result. Every command of e2b_exec writes its whole output, from
// its first byte, to a log file in the sandbox beside the stream this server reads, and its command line and exit
// code to the files a command started with background true has (e2b.CommandOptions.LogDir): its own wrapper
// writes them, so they outlive this server. e2b_read_output reads a moved command as it reads a background one,
// and all of it, also after the server that ran it was killed or restarted, whether the command had been moved or
// was still in the foreground then. A command that ends in the foreground has given the call its output, and its
// files are removed later (finished.go).

// DefaultExecForegroundLimit is how long e2b_exec waits for a command before it moves it to the background:
// below the 60 s after which claude.ai's connectors give up on a call.
const DefaultExecForegroundLimit = 45 * time.Second

// MaxExecForegroundLimit bounds the foreground limit as timeout_ms is bounded.
const MaxExecForegroundLimit = maxExecTimeoutMs * time.Millisecond

// movedCommand is a command of e2b_exec that was moved to the background.
type movedCommand struct {
	pid     uint32
	logFile string
	// warning says what went wrong with the log, if anything did.
	warning string
}

// foregroundLimit is how long this call waits for its command: wait_ms, or the wait of a task offered to it, or
// the server's limit.
func (t execTool) foregroundLimit(ctx context.Context, a *execArgs) time.Duration {
	if a.WaitMs != nil {
		return time.Duration(*a.WaitMs) * time.Millisecond
	}
	if taskOfferFrom(ctx) != nil {
		return t.cfg.TaskWait
	}
	return t.cfg.ExecForegroundLimit
}

// runCommand runs a command of e2b_exec as RunCommand does, within the foreground limit: it returns the command's
// end, or (moved) the command still running at the limit, which goes on in the background. timeout kills the
// command, moved or not; a default timeout (timeout_ms not given) beyond the limit does not apply.
func (t execTool) runCommand(ctx context.Context, c *e2b.Client, call Caller, rec state.SandboxRecord,
	a *execArgs, timeout time.Duration, onOutput func(e2b.EventKind, []byte)) (e2b.CommandResult, *movedCommand, error) {
	limit := t.foregroundLimit(ctx, a)
	if a.TimeoutMs == nil && limit < timeout {
		timeout = 0
	}
	e := envd(c, rec)
	// The command runs on a context of its own, which the call's cancellation ends only while the command is in the
	// foreground: cancelling the call kills it, a call that returned does not.
	runCtx, cancelRun := context.WithCancel(context.WithoutCancel(ctx))
	var (
		mu      sync.Mutex
		moved   bool
		started = make(chan uint32, 1)
		done    = make(chan runEnd, 1)
		removed = func() {}
	)
	stopCancelling := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !moved {
			cancelRun()
		}
	})
	go func() {
		out, err := e.RunCommand(runCtx, a.Command, e2b.CommandOptions{
			Cwd:     a.Cwd,
			Timeout: timeout,
			Tag:     backgroundTagPrefix + "fg",
			LogDir:  execOutputDir,
			OnStart: func(pid uint32) { started <- pid },
			OnOutput: func(kind e2b.EventKind, data []byte) {
				mu.Lock()
				defer mu.Unlock()
				if !moved {
					onOutput(kind, data)
				}
			},
		})
		done <- runEnd{out, err}
	}()
	ended := func(end runEnd) (e2b.CommandResult, *movedCommand, error) {
		stopCancelling()
		cancelRun()
		removed()
		if end.err == nil && end.out.PID != 0 {
			finished.add(rec.ID, end.out.PID)
		}
		return end.out, nil, end.err
	}
	var pid uint32
	for pid == 0 {
		select {
		case end := <-done:
			return ended(end)
		case pid = <-started:
		}
	}
	// The files of the commands that ended before this one go while it runs (its own, should its pid be one of
	// theirs, stay).
	removed = t.removeFinished(ctx, e, rec.ID, pid)
	// The limit counts from envd's start event: time the start spent queued behind a slow envd is not the
	// command's, and a command moved before it could print would answer nothing.
	limitTimer := time.NewTimer(limit)
	defer limitTimer.Stop()
	select {
	case end := <-done:
		return ended(end)
	case <-limitTimer.C:
	}

	// Moved: the output from here on is the log's alone.
	removed()
	mu.Lock()
	moved = true
	mu.Unlock()
	stopCancelling()
	logFile, exitFile := e2b.BackgroundFiles(execOutputDir, pid)
	m := &movedCommand{pid: pid, logFile: logFile}
	if _, err := e.Stat(ctx, logFile); err != nil {
		m.warning = "Its log could not be made in the sandbox, so its later output is not kept and e2b_read_output " +
			"cannot read it: " + t.errorText(ctx, call, execName, err)
	}
	go func() {
		defer cancelRun()
		end := <-done
		switch {
		case end.err != nil:
			t.log.Warn("a command moved to the background ended without its exit code", "sandbox", rec.ID,
				"pid", pid, "err", end.err)
		case end.out.TimedOut || (end.out.Unmarked && end.out.Exited):
			// Killed by its timeout_ms, or exited without its shell's exit trap: the shell wrote no exit code.
			if _, err := e.Upload(runCtx, exitFile, strings.NewReader(fmt.Sprintf("%d\n", end.out.ExitCode))); err != nil {
				t.log.Warn("the exit code of a command moved to the background could not be saved",
					"sandbox", rec.ID, "pid", pid, "err", err)
			}
		}
	}()
	return e2b.CommandResult{PID: pid}, m, nil
}

// runEnd is how RunCommand returned.
type runEnd struct {
	out e2b.CommandResult
	err error
}

// movedNote tells the model where the rest of a moved command's output goes.
func movedNote(m *movedCommand, limit time.Duration) string {
	return fmt.Sprintf("The command still runs after %d ms and goes on in the background as process %d: stdout and "+
		"stderr are what it printed so far. %s holds its whole output, from its first byte (what this result shows, "+
		"then the rest). Read it with e2b_read_output (pid %d; offset 0 reads it all, wait_ms waits for the end), "+
		"stop it with e2b_stop_process. Its stdin is /dev/null: a command that asks for input belongs in background "+
		"true, where e2b_send_input answers it.", limit.Milliseconds(), m.pid, m.logFile, m.pid)
}
