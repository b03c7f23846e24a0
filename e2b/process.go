package e2b

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b/wire/envd"
)

// ProcessConfig is the process to start.
type ProcessConfig struct {
	Cmd  string
	Args []string
	Envs map[string]string
	Cwd  string // empty: the template's workdir or the user's home
}

// StartOptions are the options of Process/Start.
type StartOptions struct {
	Process ProcessConfig
	// Timeout is sent as Connect-Timeout-Ms: envd kills the process when it runs out. 0 means no limit.
	Timeout time.Duration
	// Stdin keeps stdin open for SendStdin; false attaches /dev/null.
	Stdin bool
	// PTY runs the process on a terminal of this size: its output comes as EventPTY, and its input goes through
	// SendPTYInput.
	PTY *PTYSize
	Tag string
	// KeepaliveInterval is sent as Keepalive-Ping-Interval; 0 means 50 s as the SDKs do.
	KeepaliveInterval time.Duration
}

// PTYSize is a terminal's size in characters.
type PTYSize struct {
	Cols uint32 `json:"cols"`
	Rows uint32 `json:"rows"`
}

// DefaultKeepaliveInterval is the Keepalive-Ping-Interval E2B's SDKs send on process streams.
const DefaultKeepaliveInterval = 50 * time.Second

// EventKind says what a ProcessEvent carries.
type EventKind int

// The kinds of process event, in the order a stream delivers them: one start, data and keepalives, one end.
const (
	EventStart EventKind = iota + 1
	EventStdout
	EventStderr
	EventPTY
	EventKeepalive
	EventEnd
)

func (k EventKind) String() string {
	switch k {
	case EventStart:
		return "start"
	case EventStdout:
		return "stdout"
	case EventStderr:
		return "stderr"
	case EventPTY:
		return "pty"
	case EventKeepalive:
		return "keepalive"
	case EventEnd:
		return "end"
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// ProcessEvent is one message of a Start or Connect stream.
type ProcessEvent struct {
	Kind EventKind
	PID  uint32      // EventStart
	Data []byte      // EventStdout, EventStderr, EventPTY; valid only during the callback
	End  *ProcessEnd // EventEnd
}

// ProcessEnd is how a process ended. ExitCode is -1 when it was killed by a signal.
type ProcessEnd struct {
	ExitCode int
	Exited   bool
	Status   string
	Error    string
}

// endOf is how envd says the process ended.
func endOf(e *envd.EndEvent) *ProcessEnd {
	end := &ProcessEnd{ExitCode: int(e.ExitCode), Exited: e.Exited, Status: e.Status}
	if e.Error != nil {
		end.Error = *e.Error
	}
	return end
}

// decodeProcessEvent reads one StartResponse/ConnectResponse message. ok is false for an event this client does
// not know (a newer envd may add some); those are skipped.
func decodeProcessEvent(msg []byte) (ev ProcessEvent, ok bool, err error) {
	var m envd.EventMessage
	if err := json.Unmarshal(msg, &m); err != nil {
		return ProcessEvent{}, false, fmt.Errorf("malformed process event: %w", err)
	}
	pe := m.Event
	switch {
	case pe == nil:
		return ProcessEvent{}, false, nil
	case pe.Start != nil:
		return ProcessEvent{Kind: EventStart, PID: uint32(pe.Start.PID)}, true, nil
	case pe.Data != nil:
		switch {
		case pe.Data.Stdout != nil:
			return ProcessEvent{Kind: EventStdout, Data: *pe.Data.Stdout}, true, nil
		case pe.Data.Stderr != nil:
			return ProcessEvent{Kind: EventStderr, Data: *pe.Data.Stderr}, true, nil
		case pe.Data.PTY != nil:
			return ProcessEvent{Kind: EventPTY, Data: *pe.Data.PTY}, true, nil
		}
		return ProcessEvent{}, false, nil
	case pe.End != nil:
		return ProcessEvent{Kind: EventEnd, End: endOf(pe.End)}, true, nil
	case pe.Keepalive != nil:
		return ProcessEvent{Kind: EventKeepalive}, true, nil
	}
	return ProcessEvent{}, false, nil
}

// eventDecoder decodes the messages of one process stream. Output events, nearly all of a busy stream, take a
// fast path that decodes their base64 into one reused buffer, which is why ProcessEvent.Data is valid only
// during the callback.
type eventDecoder struct {
	buf []byte
}

// outputSuffix ends an output event in the exact form envd writes; any other form (spacing, escapes) takes the
// slow path.
const outputSuffix = `"}}}`

func (d *eventDecoder) decode(msg []byte) (ProcessEvent, bool, error) {
	if len(msg) > len(outputSuffix) && string(msg[len(msg)-len(outputSuffix):]) == outputSuffix {
		for _, p := range [...]struct {
			prefix string
			kind   EventKind
		}{
			{`{"event":{"data":{"stdout":"`, EventStdout},
			{`{"event":{"data":{"stderr":"`, EventStderr},
			{`{"event":{"data":{"pty":"`, EventPTY},
		} {
			if len(msg) < len(p.prefix)+len(outputSuffix) || string(msg[:len(p.prefix)]) != p.prefix {
				continue
			}
			b64 := msg[len(p.prefix) : len(msg)-len(outputSuffix)]
			if bytes.IndexByte(b64, '\\') >= 0 || bytes.IndexByte(b64, '"') >= 0 {
				break
			}
			if n := base64.StdEncoding.DecodedLen(len(b64)); cap(d.buf) < n {
				d.buf = make([]byte, n)
			}
			n, err := base64.StdEncoding.Decode(d.buf[:cap(d.buf)], b64)
			if err != nil {
				break // unpadded or URL-safe: the lenient slow path decides
			}
			return ProcessEvent{Kind: p.kind, Data: d.buf[:n]}, true, nil
		}
	}
	return decodeProcessEvent(msg)
}

// processStream runs a Start or Connect stream, giving events to onEvent as they arrive, and returns the end. An
// error from onEvent stops the stream and is returned as it is.
func (e *Envd) processStream(ctx context.Context, op, procedure string, in any, so streamOptions,
	onEvent func(ProcessEvent) error) (ProcessEnd, error) {
	var end *ProcessEnd
	var dec eventDecoder
	err := e.serverStream(ctx, op, procedure, in, so, func(msg []byte) error {
		ev, ok, err := dec.decode(msg)
		if err != nil {
			return errorf(op, ErrBadAnswer, "%w", err)
		}
		if !ok {
			return nil
		}
		if ev.Kind == EventEnd {
			end = ev.End
		}
		if onEvent != nil {
			return onEvent(ev)
		}
		return nil
	})
	if err != nil {
		return ProcessEnd{}, err
	}
	if end == nil {
		return ProcessEnd{}, errorf(op, ErrStreamCut, "the stream ended without the process's end event")
	}
	return *end, nil
}

func keepaliveOf(d time.Duration) time.Duration {
	if d <= 0 {
		return DefaultKeepaliveInterval
	}
	return d
}

// Start runs a process and calls onEvent for each event as it arrives, returning when the stream ends.
// Cancelling ctx closes the stream; envd does not kill the process for that (see RunCommand).
func (e *Envd) Start(ctx context.Context, opts StartOptions, onEvent func(ProcessEvent)) (ProcessEnd, error) {
	return e.start(ctx, opts, eachEvent(onEvent))
}

// start is Start with a callback that may stop the stream by returning an error.
func (e *Envd) start(ctx context.Context, opts StartOptions, onEvent func(ProcessEvent) error) (ProcessEnd, error) {
	req := envd.StartRequest{
		Process: &envd.ProcessConfig{Cmd: opts.Process.Cmd, Args: opts.Process.Args, Envs: opts.Process.Envs},
		Stdin:   &opts.Stdin,
	}
	if opts.Process.Cwd != "" {
		req.Process.Cwd = &opts.Process.Cwd
	}
	if opts.Tag != "" {
		req.Tag = &opts.Tag
	}
	if opts.PTY != nil {
		req.PTY = &envd.PTY{Size: &envd.PTYSize{Cols: envd.Uint32(opts.PTY.Cols), Rows: envd.Uint32(opts.PTY.Rows)}}
	}
	so := streamOptions{timeout: opts.Timeout, keepalive: keepaliveOf(opts.KeepaliveInterval)}
	return e.processStream(ctx, "envd Start", "process.Process/Start", req, so, onEvent)
}

// Signal is a signal envd can send (only SIGTERM and SIGKILL are supported by envd).
type Signal string

// The signals envd supports.
const (
	SIGTERM Signal = "SIGNAL_SIGTERM"
	SIGKILL Signal = "SIGNAL_SIGKILL"
)

// ProcessInfo is one entry of Process/List.
type ProcessInfo struct {
	PID    uint32
	Tag    string
	Config ProcessConfig
}

// SendSignal signals a process; an unknown pid matches ErrNotFound.
func (e *Envd) SendSignal(ctx context.Context, pid uint32, sig Signal) error {
	return e.unary(ctx, "envd SendSignal", "process.Process/SendSignal",
		envd.SendSignalRequest{Process: envd.SelectPID(pid), Signal: envd.Signal(sig)}, nil, false)
}

// SendStdin writes to a process's stdin.
func (e *Envd) SendStdin(ctx context.Context, pid uint32, data []byte) error {
	return e.sendInput(ctx, pid, &envd.ProcessInput{Stdin: (*envd.Bytes)(&data)})
}

// SendPTYInput writes to the terminal of a process started with a PTY, as typed keys.
func (e *Envd) SendPTYInput(ctx context.Context, pid uint32, data []byte) error {
	return e.sendInput(ctx, pid, &envd.ProcessInput{PTY: (*envd.Bytes)(&data)})
}

func (e *Envd) sendInput(ctx context.Context, pid uint32, in *envd.ProcessInput) error {
	return e.unary(ctx, "envd SendInput", "process.Process/SendInput",
		envd.SendInputRequest{Process: envd.SelectPID(pid), Input: in}, nil, false)
}

// CloseStdin closes a process's stdin (envd >= 0.5.2).
func (e *Envd) CloseStdin(ctx context.Context, pid uint32) error {
	return e.unary(ctx, "envd CloseStdin", "process.Process/CloseStdin", envd.ProcessRequest{Process: envd.SelectPID(pid)},
		nil, false)
}

// ListProcesses lists running processes.
func (e *Envd) ListProcesses(ctx context.Context) ([]ProcessInfo, error) {
	var out envd.ListResponse
	if err := e.unary(ctx, "envd List", "process.Process/List", envd.ListRequest{}, &out, true); err != nil {
		return nil, err
	}
	list := make([]ProcessInfo, 0, len(out.Processes))
	for _, p := range out.Processes {
		info := ProcessInfo{PID: uint32(p.PID), Tag: deref(p.Tag)}
		if c := p.Config; c != nil {
			info.Config = ProcessConfig{Cmd: c.Cmd, Args: c.Args, Envs: c.Envs, Cwd: deref(c.Cwd)}
		}
		list = append(list, info)
	}
	return list, nil
}

// ConnectProcess reattaches to a running process's stream (output from before is not replayed).
func (e *Envd) ConnectProcess(ctx context.Context, pid uint32, onEvent func(ProcessEvent)) (ProcessEnd, error) {
	so := streamOptions{keepalive: DefaultKeepaliveInterval}
	return e.processStream(ctx, "envd Connect", "process.Process/Connect",
		envd.ProcessRequest{Process: envd.SelectPID(pid)}, so, eachEvent(onEvent))
}

// eachEvent adapts a callback that cannot stop the stream.
func eachEvent(onEvent func(ProcessEvent)) func(ProcessEvent) error {
	if onEvent == nil {
		return nil
	}
	return func(ev ProcessEvent) error { onEvent(ev); return nil }
}

// deref is *s, or "" for nil: an optional string envd left out.
func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
