package tools

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/state"
)

const sendInputName = "e2b_send_input"

// maxInputBytes bounds the data of one e2b_send_input: what is typed or piped at a prompt, not a file (which
// e2b_write_file writes).
const maxInputBytes = 64 << 10

// ptyEOF is what ends the input of a program on a terminal (Ctrl-D), which has no stdin to close.
const ptyEOF = "\x04"

type sendInputArgs struct {
	SandboxID string `json:"sandbox_id" jsonschema:"minLength=1" jsonschema_description:"The sandbox the process runs in."`
	PID       int    `json:"pid" jsonschema:"minimum=1,maximum=4194304" jsonschema_description:"The pid of a command started with e2b_exec background true, as e2b_exec or e2b_list_processes gave it."`
	// The input is what a program running as the sandbox's user does next, so the policy judges it as a command.
	Data  string `json:"data,omitempty" policy:"command" jsonschema_description:"What to write to its stdin (or type on its terminal, for pty true), with the newline that ends a line: \"ada\\n\"."`
	Close bool   `json:"close,omitempty" jsonschema_description:"Close its stdin after data (end of input); on a terminal, send Ctrl-D."`
}

type sendInputResult struct {
	SandboxID string `json:"sandbox_id"`
	PID       int    `json:"pid"`
	Bytes     int    `json:"bytes" jsonschema_description:"How many bytes of data were written."`
	Closed    bool   `json:"closed" jsonschema_description:"True when its stdin was closed (or Ctrl-D sent) after data."`
	PTY       bool   `json:"pty" jsonschema_description:"True when the process runs on a terminal, which got data as typed keys."`
	LogFile   string `json:"log_file" jsonschema_description:"Where its answer goes; read it with e2b_read_output."`
}

// sendInput is e2b_send_input.
type sendInput struct{ *base }

func (t sendInput) tool() Tool {
	desc := fmt.Sprintf("Write to the stdin of a command started with e2b_exec background true that still runs (a "+
		"prompt, a REPL, y/N), or type on its terminal when it was started with pty true; close true ends its "+
		"input. Up to %d bytes at a time. Read what it answers with e2b_read_output (next_offset of the last read, "+
		"wait_ms and until for the next prompt).", maxInputBytes)
	return define(t.base, definition[sendInputArgs, sendInputResult]{
		name: sendInputName, description: desc,
		// Input to a running program does whatever the program does with it, as a command would.
		hints: hints{readOnly: false, destructive: true, idempotent: false, openWorld: true},
		run:   t.run,
	})
}

func (t sendInput) run(ctx context.Context, call Caller, a *sendInputArgs) (*sendInputResult, error) {
	switch {
	case a.Data == "" && !a.Close:
		return nil, userErrorf("Missing required parameter: data (or close true, to end its input)")
	case len(a.Data) > maxInputBytes:
		return nil, userErrorf("The data is %d bytes, over the %d of one e2b_send_input: send it in parts, or write a file "+
			"with e2b_write_file.", len(a.Data), maxInputBytes)
	}
	rec, c, err := t.sandbox(ctx, call, a.SandboxID, true)
	if err != nil {
		return nil, err
	}
	e := envd(c, rec)
	list, err := e.ListBackground(ctx, backgroundTagPrefix)
	if err != nil {
		return nil, t.sandboxFailure(ctx, c, call, rec, err)
	}
	var proc *e2b.BackgroundProcess
	var pids []string
	for i, p := range list {
		if p.Background {
			pids = append(pids, fmt.Sprint(p.PID))
		}
		if p.PID == uint32(a.PID) {
			proc = &list[i]
		}
	}
	switch {
	case proc != nil && !proc.Background:
		return nil, userErrorf("Process %d was started in the foreground and moved to the background, with its stdin "+
			"at /dev/null: it cannot take input. Start a command that asks for input with e2b_exec background true.", a.PID)
	case proc == nil:
		running := "none"
		if len(pids) > 0 {
			running = strings.Join(pids, ", ")
		}
		return nil, userErrorf("Process %d is not a running background command of sandbox '%s' (running: %s). "+
			"e2b_send_input writes only to commands started with e2b_exec background true.", a.PID, rec.ID, running)
	}
	pid := uint32(a.PID)
	send, closeInput := e.SendStdin, func() error { return e.CloseStdin(ctx, pid) }
	if proc.PTY {
		send = e.SendPTYInput
		closeInput = func() error { return e.SendPTYInput(ctx, pid, []byte(ptyEOF)) }
	}
	if err := send(ctx, pid, []byte(a.Data)); err != nil {
		return nil, t.inputFailure(ctx, c, call, rec, a.PID, err)
	}
	if a.Close {
		if err := closeInput(); err != nil {
			return nil, t.inputFailure(ctx, c, call, rec, a.PID, err)
		}
	}
	logFile, _ := e2b.BackgroundFiles(execOutputDir, pid)
	return &sendInputResult{SandboxID: rec.ID, PID: a.PID, Bytes: len(a.Data), Closed: a.Close, PTY: proc.PTY,
		LogFile: logFile}, nil
}

// inputFailure words a failure to write to a process: one that ended meanwhile, or closed its stdin, is the
// model's to know of; the rest is E2B's.
func (t sendInput) inputFailure(ctx context.Context, c *e2b.Client, call Caller, rec state.SandboxRecord,
	pid int, err error) error {
	var ae *e2b.APIError
	if errors.As(err, &ae) && (ae.Code == "not_found" || strings.Contains(ae.Message, "stdin")) {
		return userErrorf("Process %d takes no more input: %s. See how it ended with e2b_read_output.", pid, ae.Message)
	}
	return t.sandboxFailure(ctx, c, call, rec, err)
}
