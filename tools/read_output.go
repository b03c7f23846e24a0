package tools

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b"
)

const readOutputName = "e2b_read_output"

// outputPoll is how often e2b_read_output looks at a process it waits for.
const outputPoll = 200 * time.Millisecond

// maxUntilLen bounds the text e2b_read_output waits for.
const maxUntilLen = 1000

type readOutputArgs struct {
	SandboxID string `json:"sandbox_id" jsonschema:"minLength=1" jsonschema_description:"The sandbox the process runs in."`
	PID       int    `json:"pid" jsonschema:"minimum=1,maximum=4194304" jsonschema_description:"The pid of a background command, as e2b_exec or e2b_list_processes gave it."`
	Offset    int64  `json:"offset,omitempty" jsonschema:"minimum=0" jsonschema_description:"The byte of the output to start from: 0 for all of it, or the next_offset of the previous read for what came since."`
	WaitMs    int    `json:"wait_ms,omitempty" jsonschema:"minimum=0,maximum=3600000" jsonschema_description:"Milliseconds to wait for the process to end (or for until to appear) before answering; 0 answers at once. A wait longer than the server's foreground limit (in the tool's description) is cut to it."`
	Until     string `json:"until,omitempty" jsonschema_description:"With wait_ms: answer as soon as this text is in the output after offset (a server's ready line such as 'Listening on')."`
}

// readOutputResult puts what is true of the process first (whether it runs, and only once it ended its exit code),
// then where this read stands in the output, and the output last.
type readOutputResult struct {
	Running  bool   `json:"running" jsonschema_description:"True while the process runs (its output may grow); false once it ended and all its output is in log_file."`
	PID      int    `json:"pid"`
	ExitCode *int   `json:"exit_code,omitempty" jsonschema_description:"The exit code once it ended (143 when e2b_stop_process stopped it with SIGTERM); absent while it runs or when it was killed without one."`
	Command  string `json:"command,omitempty" jsonschema_description:"Its command line, running or ended."`
	Found    *bool  `json:"found,omitempty" jsonschema_description:"Only with until: whether until's text is in the output from offset on (this read's bytes, not earlier ones). False with running false: it never will be."`
	Offset   int64  `json:"offset"`
	// NextOffset is where the next read starts to get only what comes after this one.
	NextOffset  int64  `json:"next_offset" jsonschema_description:"The offset to read on from: the end of the output read so far."`
	Truncated   bool   `json:"truncated" jsonschema_description:"True when the output was cut to its head and tail; the bytes omitted_from to omitted_to are left out, and a read from offset omitted_from shows them."`
	OmittedFrom int64  `json:"omitted_from,omitempty"`
	OmittedTo   int64  `json:"omitted_to,omitempty"`
	LogFile     string `json:"log_file" jsonschema_description:"The file in the sandbox that holds the whole output."`
	SandboxID   string `json:"sandbox_id"`
	Warning     string `json:"warning,omitempty"`
	Output      string `json:"output" jsonschema_description:"Its stdout and stderr from offset, as they were written."`
	attachments        // its log, its files, an image
}

// readOutput is e2b_read_output.
type readOutput struct{ *base }

func (t readOutput) tool() Tool {
	desc := fmt.Sprintf("Read the output (stdout and stderr) of a command started with e2b_exec background true, "+
		"or moved to the background by e2b_exec (its log holds its whole output: what e2b_exec returned, then the rest), "+
		"from a byte offset: at once, or waiting up to wait_ms (at most %d ms) for it to end or for the text until "+
		"to appear. Answers with running, exit_code only once it ended, its command, and next_offset for the next read. "+
		"The output is kept within the result limit (what your client shows whole): a longer one keeps its head and tail "+
		"around a line naming the bytes left out (omitted_from, omitted_to). Works for any command of this server's, also "+
		"after the server restarted: the output is in the sandbox.",
		t.cfg.ExecForegroundLimit.Milliseconds())
	return define(t.base, definition[readOutputArgs, readOutputResult]{
		name: readOutputName, description: desc,
		hints: hints{readOnly: true, destructive: false, idempotent: true, openWorld: true},
		run:   t.run,
	})
}

func (t readOutput) run(ctx context.Context, call Caller, a *readOutputArgs) (*readOutputResult, error) {
	if len(a.Until) > maxUntilLen {
		return nil, userErrorf("Invalid until: it is %d bytes long, over %d.", len(a.Until), maxUntilLen)
	}
	rec, c, err := t.sandbox(ctx, call, a.SandboxID, true)
	if err != nil {
		return nil, err
	}
	e := envd(c, rec)
	pid := uint32(a.PID)
	wait := min(time.Duration(a.WaitMs)*time.Millisecond, t.cfg.ExecForegroundLimit)
	deadline := time.Now().Add(wait)
	until := []byte(a.Until)
	scanned, found := a.Offset, false // the output before scanned does not hold until, but for its last bytes
	var p processState
	for {
		states, _, err := processStates(ctx, e, rec.ID, 0, pid)
		if err != nil {
			return nil, t.sandboxFailure(ctx, c, call, rec, err)
		}
		if p = states[0]; !p.known() {
			return nil, userErrorf("Process %d is not a command of this server's in sandbox '%s': e2b_read_output reads "+
				"the output of commands started with e2b_exec background true or moved to the background (see "+
				"e2b_list_processes).", a.PID, rec.ID)
		}
		if a.Offset > p.size {
			return nil, userErrorf("Offset %d is past the end of the output of process %d, which is %d bytes.",
				a.Offset, a.PID, p.size)
		}
		if len(until) > 0 && p.size > scanned {
			if found, scanned, err = scanFor(ctx, e, p.logFile, until, max(a.Offset, scanned-int64(len(until))+1),
				p.size); err != nil {
				return nil, t.sandboxFailure(ctx, c, call, rec, err)
			}
		}
		left := time.Until(deadline)
		if found || !p.running || left <= 0 {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(min(outputPoll, left)):
		}
	}
	res := readOutputResult{Running: p.running, PID: a.PID, ExitCode: p.exitCode, Command: p.command,
		Offset: a.Offset, NextOffset: p.size, LogFile: p.logFile, SandboxID: rec.ID}
	var warnings []string
	if len(until) > 0 {
		res.Found = &found
		if !found && !p.running {
			warnings = append(warnings, fmt.Sprintf("The process has ended and its output from offset %d on does not hold "+
				"%q: it will not come.", a.Offset, a.Until))
		}
	}
	if !p.running && p.exitCode == nil {
		warnings = append(warnings, "The process ended without an exit code: it was killed (SIGKILL), and what it "+
			"printed until then is all there is.")
	}
	res.Warning = joinWarnings(warnings...)
	res.attach(fileLink(rec.ID, p.logFile, fmt.Sprintf("the whole output of process %d", a.PID)))
	if err := t.fillOutput(ctx, e, &res); err != nil {
		return nil, t.sandboxFailure(ctx, c, call, rec, err)
	}
	return &res, nil
}

// scanFor looks for text in the file's bytes from to end, and says whether it is there and how far it looked.
func scanFor(ctx context.Context, e *e2b.Envd, file string, text []byte, from, end int64) (bool, int64, error) {
	body, _, err := e.Download(ctx, file, e2b.DownloadOptions{Offset: from, Length: end - from})
	if err != nil {
		return false, from, err
	}
	defer body.Close()
	buf := make([]byte, 0, 64<<10+len(text))
	pos := from
	for {
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		pos += int64(n)
		if bytes.Contains(buf, text) {
			return true, pos, nil
		}
		if err == io.EOF {
			return false, pos, nil
		}
		if err != nil {
			return false, pos, err
		}
		// Keep what could be the start of the text.
		keep := min(len(buf), len(text)-1)
		buf = append(buf[:0], buf[len(buf)-keep:]...)
	}
}

// omittedMarker is the line that stands for the middle of an output cut to its head and tail.
func omittedMarker(from, to int64) string {
	return fmt.Sprintf("... [bytes %d to %d omitted; e2b_read_output with offset %d reads on from there] ...\n", from, to,
		from)
}

// fillOutput sets res.Output to the log's bytes from res.Offset to res.NextOffset, cut to head and tail when they
// do not fit the result.
func (t readOutput) fillOutput(ctx context.Context, e *e2b.Envd, res *readOutputResult) error {
	total := res.NextOffset - res.Offset
	if total == 0 {
		return nil
	}
	probe := *res
	probe.Truncated, probe.OmittedFrom, probe.OmittedTo = true, res.NextOffset, res.NextOffset
	room := max(t.limit(ctx)-sizeOf(probe), 0)
	// Every byte costs at least two (it is in the text content and in structuredContent).
	window := int64(room/2 + 1)
	head, err := readRange(ctx, e, res.LogFile, res.Offset, min(total, window))
	if err != nil {
		return err
	}
	if int64(len(head)) == total && fieldCost(head) <= room {
		res.Output = string(head)
		return nil
	}
	tail, err := readRange(ctx, e, res.LogFile, max(res.NextOffset-window, res.Offset), min(total, window))
	if err != nil {
		return err
	}
	room = max(room-fieldCost([]byte(omittedMarker(res.NextOffset, res.NextOffset)))-1, 0)
	// Cuts fall on line ends where one is near, as headAndTail's do.
	h := head[:headWithin(trimPartialRuneEnd(head), room/2)]
	if i := bytes.LastIndexByte(h, '\n'); i >= len(h)/2 {
		h = h[:i+1]
	}
	tl := trimPartialRuneStart(tail)
	tl = tl[tailWithin(tl, room-fieldCost(h)):]
	if j := bytes.IndexByte(tl, '\n'); j >= 0 && j < len(tl)/2 {
		tl = tl[j+1:]
	}
	res.Truncated = true
	res.OmittedFrom, res.OmittedTo = res.Offset+int64(len(h)), res.NextOffset-int64(len(tl))
	var sb strings.Builder
	sb.Write(h)
	if len(h) > 0 && h[len(h)-1] != '\n' {
		sb.WriteByte('\n')
	}
	sb.WriteString(omittedMarker(res.OmittedFrom, res.OmittedTo))
	sb.Write(tl)
	res.Output = sb.String()
	return nil
}

// readRange reads length bytes of a file from offset.
func readRange(ctx context.Context, e *e2b.Envd, file string, offset, length int64) ([]byte, error) {
	body, _, err := e.Download(ctx, file, e2b.DownloadOptions{Offset: offset, Length: length})
	if err != nil {
		return nil, err
	}
	defer body.Close()
	return io.ReadAll(io.LimitReader(body, length))
}
