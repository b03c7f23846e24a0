package tools

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/e2b"
)

const listProcessesName = "e2b_list_processes"
const stopProcessName = "e2b_stop_process"

// stopGrace is how long e2b_stop_process lets a process and its children end after SIGTERM before SIGKILL.
const stopGrace = 5 * time.Second

type listProcessesArgs struct {
	SandboxID string `json:"sandbox_id" jsonschema:"minLength=1" jsonschema_description:"The sandbox whose background processes to list."`
}

type processInfo struct {
	Running    bool   `json:"running"`
	PID        uint32 `json:"pid"`
	ExitCode   *int   `json:"exit_code,omitempty" jsonschema_description:"Its exit code once it ended; absent while it runs or when it was killed without one."`
	Command    string `json:"command,omitempty" jsonschema_description:"Its command line, running or ended."`
	LogFile    string `json:"log_file" jsonschema_description:"The file that receives its stdout and stderr; e2b_read_output reads it."`
	OutputSize int64  `json:"output_size" jsonschema_description:"The bytes of output in log_file so far."`
	Cwd        string `json:"cwd,omitempty"`
	PTY        bool   `json:"pty,omitempty" jsonschema_description:"True when it runs on a terminal (pty true)."`
	Foreground bool   `json:"foreground,omitempty" jsonschema_description:"True for a command of e2b_exec without background: one a call still waits for, or one moved to the background at the foreground limit (its stdin is /dev/null)."`
}

type listProcessesResult struct {
	SandboxID string        `json:"sandbox_id"`
	Processes []processInfo `json:"processes" jsonschema_description:"The background commands of e2b_exec, running or ended (while their log is in the sandbox), by pid."`
	Count     int           `json:"count"`
	Running   int           `json:"running" jsonschema_description:"How many of them still run."`
	// EndedOmitted keeps the list within the result limit however many commands a sandbox has run.
	EndedOmitted int `json:"ended_omitted,omitempty" jsonschema_description:"How many older ended commands are left out of the list (e2b_read_output still reads them by pid)."`
	attachments      // its log, its files, an image
}

// maxEndedListed is how many ended commands e2b_list_processes shows, the last to write their log first.
const maxEndedListed = 20

// listProcesses is e2b_list_processes.
type listProcesses struct{ *base }

func (t listProcesses) tool() Tool {
	const desc = "List the commands started with e2b_exec background true, or moved to the background by e2b_exec, " +
		"in a sandbox: each with whether it runs, its pid, its exit code once it ended, its command line, " +
		"and its log_file with the output's size. Read one's output with e2b_read_output, stop it with e2b_stop_process."
	return define(t.base, definition[listProcessesArgs, listProcessesResult]{
		name: listProcessesName, description: desc,
		hints: hints{readOnly: true, destructive: false, idempotent: true, openWorld: true},
		run:   t.run,
	})
}

func (t listProcesses) run(ctx context.Context, call Caller, a *listProcessesArgs) (*listProcessesResult, error) {
	rec, c, err := t.sandbox(ctx, call, a.SandboxID, true)
	if err != nil {
		return nil, err
	}
	states, omitted, err := processStates(ctx, envd(c, rec), rec.ID, maxEndedListed)
	if err != nil {
		return nil, t.sandboxFailure(ctx, c, call, rec, err)
	}
	res := listProcessesResult{SandboxID: rec.ID, Processes: []processInfo{}, EndedOmitted: omitted}
	var links []mcp.Content
	for _, p := range states {
		info := processInfo{Running: p.running, PID: p.pid, ExitCode: p.exitCode, Command: p.command,
			LogFile: p.logFile, OutputSize: p.size}
		if p.proc != nil {
			info.Cwd, info.PTY, info.Foreground = p.proc.Cwd, p.proc.PTY, !p.proc.Background
		}
		res.Processes = append(res.Processes, info)
		if p.running {
			res.Running++
		}
		if p.logged {
			links = append(links, fileLink(rec.ID, p.logFile, fmt.Sprintf("the log of background process %d", p.pid)))
		}
	}
	res.Count = len(res.Processes)
	res.attach(links...)
	return &res, nil
}

type stopProcessArgs struct {
	SandboxID string `json:"sandbox_id" jsonschema:"minLength=1" jsonschema_description:"The sandbox the process runs in."`
	PID       int    `json:"pid" jsonschema:"minimum=1,maximum=4194304" jsonschema_description:"The pid of a background command, as e2b_exec or e2b_list_processes gave it."`
}

type stopProcessResult struct {
	SandboxID string `json:"sandbox_id"`
	PID       int    `json:"pid"`
	Stopped   bool   `json:"stopped"`
	Signal    string `json:"signal" jsonschema:"enum=SIGTERM,enum=SIGKILL,enum=none" jsonschema_description:"What ended it: SIGTERM, or SIGKILL when it had not ended within the grace after SIGTERM; none when it had already ended."`
}

// checkProcessArgs checks the sandbox and pid that every tool on one of this server's processes takes.
// stopProcess is e2b_stop_process.
type stopProcess struct{ *base }

func (t stopProcess) tool() Tool {
	desc := fmt.Sprintf("Stop a command started with e2b_exec background true, and every process it started: "+
		"SIGTERM first, then SIGKILL to what is left after %d seconds. Its log_file stays.", int(stopGrace/time.Second))
	return define(t.base, definition[stopProcessArgs, stopProcessResult]{
		name: stopProcessName, description: desc,
		// Stopping kills a process tree; stopping one already gone changes nothing more.
		hints: hints{readOnly: false, destructive: true, idempotent: true, openWorld: true},
		run:   t.run,
	})
}

func (t stopProcess) run(ctx context.Context, call Caller, a *stopProcessArgs) (*stopProcessResult, error) {
	rec, c, err := t.sandbox(ctx, call, a.SandboxID, true)
	if err != nil {
		return nil, err
	}
	e := envd(c, rec)
	list, err := e.ListBackground(ctx, backgroundTagPrefix)
	if err != nil {
		return nil, t.sandboxFailure(ctx, c, call, rec, err)
	}
	var pids []string
	found := false
	for _, p := range list {
		found = found || p.PID == uint32(a.PID)
		pids = append(pids, fmt.Sprint(p.PID))
	}
	if !found {
		running := "none"
		if len(pids) > 0 {
			running = strings.Join(pids, ", ")
		}
		return nil, userErrorf("Process %d is not a running background command of sandbox '%s' (running: %s). "+
			"e2b_stop_process stops only commands started with e2b_exec background true; stop others with e2b_exec (kill).",
			a.PID, rec.ID, running)
	}
	how, err := e.SignalTree(ctx, uint32(a.PID), stopGrace)
	if err != nil {
		return nil, t.sandboxFailure(ctx, c, call, rec, err)
	}
	res := stopProcessResult{SandboxID: rec.ID, PID: a.PID, Stopped: how != e2b.TreeGone, Signal: string(how)}
	if how == e2b.TreeGone {
		res.Signal = "none"
	}
	return &res, nil
}
