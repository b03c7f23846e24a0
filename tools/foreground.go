package tools

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/state"
)

// A call of e2b_exec never outlives the client: a command still running at the foreground limit is moved to the
// background. Its output so far is the call's result; what it prints from then on is written, as it comes, to a
// log file in the sandbox (a cat fed through envd, e2b.FileWriter), with its exit code in an exit file once it
// ends: the same files a command started with background true has, so e2b_read_output reads both alike. The
// command's stream stays with this server, so a restart of the server loses what it prints after that (the
// command itself goes on).

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
	if a.WaitMs > 0 {
		return time.Duration(a.WaitMs) * time.Millisecond
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
	a *execArgs, cwd string,
	timeout time.Duration, onOutput func(e2b.EventKind, []byte)) (e2b.CommandResult, *movedCommand, error) {
	limit := t.foregroundLimit(ctx, a)
	if a.TimeoutMs == 0 && limit < timeout {
		timeout = 0
	}
	e := envd(c, rec)
	// The command runs on a context of its own, which the call's cancellation ends only while the command is in the
	// foreground: cancelling the call kills it, a call that returned does not.
	runCtx, cancelRun := context.WithCancel(context.WithoutCancel(ctx))
	var (
		mu      sync.Mutex
		moved   bool
		log     *e2b.FileWriter
		logErr  error
		started = make(chan uint32, 1)
		done    = make(chan runEnd, 1)
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
			Cwd:     cwd,
			Timeout: timeout,
			Tag:     backgroundTagPrefix + "fg",
			OnStart: func(pid uint32) { started <- pid },
			OnOutput: func(kind e2b.EventKind, data []byte) {
				mu.Lock()
				defer mu.Unlock()
				switch {
				case !moved:
					onOutput(kind, data)
				case log != nil && logErr == nil:
					_, logErr = log.Write(data)
				}
			},
		})
		done <- runEnd{out, err}
	}()
	var pid uint32
	for pid == 0 {
		select {
		case end := <-done:
			stopCancelling()
			cancelRun()
			return end.out, nil, end.err
		case pid = <-started:
		}
	}
	// The limit counts from envd's start event: time the start spent queued behind a slow envd is not the
	// command's, and a command moved before it could print would answer nothing.
	limitTimer := time.NewTimer(limit)
	defer limitTimer.Stop()
	select {
	case end := <-done:
		stopCancelling()
		cancelRun()
		return end.out, nil, end.err
	case <-limitTimer.C:
	}

	// Moved: from here on the output goes to the log, created before any more of it is taken.
	mu.Lock()
	moved = true
	logFile, exitFile := e2b.BackgroundFiles(execOutputDir, pid)
	m := &movedCommand{pid: pid, logFile: logFile}
	// An exit file of an earlier process with this pid would say this one ended.
	if logErr = e.Remove(runCtx, exitFile); errors.Is(logErr, e2b.ErrNotFound) {
		logErr = nil
	}
	if logErr == nil {
		_, logErr = e.Upload(runCtx, e2b.CommandFile(execOutputDir, pid), strings.NewReader(a.Command))
	}
	if logErr == nil {
		log, logErr = e.NewFileWriter(runCtx, logFile)
	}
	if logErr != nil {
		m.warning = "Its later output could not be kept: " + t.errorText(ctx, call, execName, logErr)
	}
	relays.add(rec.ID, pid)
	mu.Unlock()
	stopCancelling()
	go func() {
		defer cancelRun()
		defer relays.remove(rec.ID, pid)
		end := <-done
		mu.Lock()
		defer mu.Unlock()
		if log == nil {
			return
		}
		if err := log.Close(); err != nil && logErr == nil {
			logErr = err
		}
		if logErr != nil {
			t.log.Warn("the log of a command moved to the background is incomplete", "sandbox", rec.ID,
				"pid", pid, "err", logErr)
		}
		if end.err != nil {
			t.log.Warn("a command moved to the background ended without its exit code", "sandbox", rec.ID, "pid",
				pid, "err", end.err)
			return
		}
		if _, err := e.Upload(runCtx, exitFile, strings.NewReader(fmt.Sprintf("%d\n", end.out.ExitCode))); err != nil {
			t.log.Warn("the exit code of a command moved to the background could not be saved", "sandbox", rec.ID,
				"pid", pid, "err", err)
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
		"stderr are what it printed so far, the rest goes to %s. Read it with e2b_read_output (pid %d, offset 0; "+
		"wait_ms waits for the end), stop it with e2b_stop_process. Its stdin is /dev/null: a command that asks for "+
		"input belongs in background true, where e2b_send_input answers it.", limit.Milliseconds(), m.pid, m.logFile, m.pid)
}

// relays are the commands moved to the background whose output this server is still writing to their log: one
// has ended only once its relay has finished (its log complete and its exit file written).
var relays = relaySet{m: map[relayKey]struct{}{}}

type relayKey struct {
	sandbox string
	pid     uint32
}

type relaySet struct {
	mu sync.Mutex
	m  map[relayKey]struct{}
}

func (r *relaySet) add(sandbox string, pid uint32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m[relayKey{sandbox, pid}] = struct{}{}
}

func (r *relaySet) remove(sandbox string, pid uint32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, relayKey{sandbox, pid})
}

func (r *relaySet) active(sandbox string, pid uint32) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.m[relayKey{sandbox, pid}]
	return ok
}
