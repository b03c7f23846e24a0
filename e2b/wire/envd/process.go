package envd

import (
	"encoding/json"
	"strconv"
)

// The messages of envd's process.Process service (process/process.proto) that the client and the emulator use.

// ProcessConfig is process.ProcessConfig: the process to start, or the one a List entry runs.
type ProcessConfig struct {
	Cmd  string            `json:"cmd,omitempty"`
	Args []string          `json:"args,omitempty"`
	Envs map[string]string `json:"envs,omitempty"`
	// Cwd unset is the template's workdir or the user's home.
	Cwd *string `json:"cwd,omitempty"`
}

// PTY is process.PTY: run the process on a terminal of this size.
type PTY struct {
	Size *PTYSize `json:"size,omitempty"`
}

// PTYSize is process.PTY.Size, in characters.
type PTYSize struct {
	Cols Uint32 `json:"cols,omitempty"`
	Rows Uint32 `json:"rows,omitempty"`
}

// StartRequest is the request of Process/Start.
type StartRequest struct {
	Process *ProcessConfig `json:"process,omitempty"`
	PTY     *PTY           `json:"pty,omitempty"`
	Tag     *string        `json:"tag,omitempty"`
	// Stdin unset means true (envd keeps stdin open for older clients); false attaches /dev/null.
	Stdin *bool `json:"stdin,omitempty"`
}

// ProcessSelector is process.ProcessSelector, a oneof: a process by pid or by tag.
type ProcessSelector struct {
	PID *Uint32 `json:"pid,omitempty"`
	Tag *string `json:"tag,omitempty"`
}

// SelectPID selects the process pid.
func SelectPID(pid uint32) *ProcessSelector {
	p := Uint32(pid)
	return &ProcessSelector{PID: &p}
}

// ProcessRequest is a request that names only a process: ConnectRequest and CloseStdinRequest.
type ProcessRequest struct {
	Process *ProcessSelector `json:"process,omitempty"`
}

// ListRequest is the request of Process/List.
type ListRequest struct{}

// ListResponse is the answer of Process/List.
type ListResponse struct {
	Processes []ProcessInfo `json:"processes,omitempty"`
}

// ProcessInfo is process.ProcessInfo, one running process.
type ProcessInfo struct {
	Config *ProcessConfig `json:"config,omitempty"`
	PID    Uint32         `json:"pid,omitempty"`
	Tag    *string        `json:"tag,omitempty"`
}

// Signal is the process.Signal enum, by name.
type Signal string

// The signals envd knows. It sends only SIGTERM and SIGKILL.
const (
	SignalUnspecified Signal = "SIGNAL_UNSPECIFIED"
	SignalSIGTERM     Signal = "SIGNAL_SIGTERM"
	SignalSIGKILL     Signal = "SIGNAL_SIGKILL"
)

// signalNumbers are the enum's numbers, which proto3 JSON parsers accept for its names.
var signalNumbers = map[int]Signal{0: SignalUnspecified, 9: SignalSIGKILL, 15: SignalSIGTERM}

// UnmarshalJSON reads a signal by name or by number; a number the enum does not name reads as its digits.
func (s *Signal) UnmarshalJSON(b []byte) error {
	var name string
	if json.Unmarshal(b, &name) == nil {
		*s = Signal(name)
		return nil
	}
	var n int
	if err := json.Unmarshal(b, &n); err != nil {
		return err
	}
	if sig, ok := signalNumbers[n]; ok {
		*s = sig
	} else {
		*s = Signal(strconv.Itoa(n))
	}
	return nil
}

// SendSignalRequest is the request of Process/SendSignal.
type SendSignalRequest struct {
	Process *ProcessSelector `json:"process,omitempty"`
	Signal  Signal           `json:"signal,omitempty"`
}

// SendInputRequest is the request of Process/SendInput.
type SendInputRequest struct {
	Process *ProcessSelector `json:"process,omitempty"`
	Input   *ProcessInput    `json:"input,omitempty"`
}

// ProcessInput is process.ProcessInput, a oneof: bytes for a pipe's stdin or for a terminal. The one set is sent
// even when empty.
type ProcessInput struct {
	Stdin *Bytes `json:"stdin,omitempty"`
	PTY   *Bytes `json:"pty,omitempty"`
}

// EventMessage is a message of a Start or a Connect stream: StartResponse and ConnectResponse.
type EventMessage struct {
	Event *ProcessEvent `json:"event,omitempty"`
}

// ProcessEvent is process.ProcessEvent, a oneof: a stream's first message is Start, then come Data and Keepalive,
// and the last is End.
type ProcessEvent struct {
	Start     *StartEvent `json:"start,omitempty"`
	Data      *DataEvent  `json:"data,omitempty"`
	End       *EndEvent   `json:"end,omitempty"`
	Keepalive *KeepAlive  `json:"keepalive,omitempty"`
}

// StartEvent is process.ProcessEvent.StartEvent: the process started as PID.
type StartEvent struct {
	PID Uint32 `json:"pid,omitempty"`
}

// DataEvent is process.ProcessEvent.DataEvent, a oneof: a chunk of the process's output on one stream.
type DataEvent struct {
	Stdout *Bytes `json:"stdout,omitempty"`
	Stderr *Bytes `json:"stderr,omitempty"`
	PTY    *Bytes `json:"pty,omitempty"`
}

// EndEvent is process.ProcessEvent.EndEvent: how the process ended.
type EndEvent struct {
	// ExitCode is -1 when a signal killed the process.
	ExitCode Int32 `json:"exitCode,omitempty"`
	// Exited is true when the process exited by itself.
	Exited bool `json:"exited,omitempty"`
	// Status is Go's ProcessState.String(): "exit status 1", "signal: killed".
	Status string `json:"status,omitempty"`
	// Error is set when the process did not exit 0.
	Error *string `json:"error,omitempty"`
}

// UnmarshalJSON reads an end event with its members' JSON or proto names.
func (e *EndEvent) UnmarshalJSON(b []byte) error {
	type plain EndEvent
	var v struct {
		plain
		ProtoExitCode Int32 `json:"exit_code"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*e = EndEvent(v.plain)
	if e.ExitCode == 0 {
		e.ExitCode = v.ProtoExitCode
	}
	return nil
}

// KeepAlive is process.ProcessEvent.KeepAlive, sent on an idle stream.
type KeepAlive struct{}
