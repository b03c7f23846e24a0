package emulator

import (
	"encoding/json"
	"sort"
	"strconv"
	"syscall"
	"time"
)

// envd's process.Process RPCs (Start, Connect, List, SendSignal, SendInput, CloseStdin) and their wire shapes.

type pbProcessConfigIn struct {
	Cmd  string            `json:"cmd"`
	Args []string          `json:"args"`
	Envs map[string]string `json:"envs"`
	Cwd  *string           `json:"cwd"`
}

type pbProcessConfigOut struct {
	Cmd  string            `json:"cmd,omitempty"`
	Args []string          `json:"args,omitempty"`
	Envs map[string]string `json:"envs,omitempty"`
	Cwd  *string           `json:"cwd,omitempty"`
}

type pbSelectorIn struct {
	PID *pbUint `json:"pid"`
	Tag *string `json:"tag"`
}

type pbEnd struct {
	ExitCode int32   `json:"exitCode,omitempty"`
	Exited   bool    `json:"exited,omitempty"`
	Status   string  `json:"status,omitempty"`
	Error    *string `json:"error,omitempty"`
}

// pbEvent is a ProcessEvent other than output (see streamWriter.sendOutput).
type pbEvent struct {
	Start     *pbStartEvent `json:"start,omitempty"`
	End       *pbEnd        `json:"end,omitempty"`
	Keepalive *struct{}     `json:"keepalive,omitempty"`
}

type pbStartEvent struct {
	PID uint32 `json:"pid,omitempty"`
}

type pbEventMsg struct {
	Event pbEvent `json:"event"`
}

// keepaliveInterval reads Keepalive-Ping-Interval (seconds), as envd's GetKeepAliveTicker does.
func keepaliveInterval(h string) time.Duration {
	if n, err := strconv.Atoi(h); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	return defaultKeepalive
}

func (e *envdService) procStart(c *rpcCall, sw *streamWriter) *rpcError {
	var req struct {
		Process *pbProcessConfigIn `json:"process"`
		PTY     *struct {
			Size *struct {
				Cols uint32 `json:"cols"`
				Rows uint32 `json:"rows"`
			} `json:"size"`
		} `json:"pty"`
		Tag   *string `json:"tag"`
		Stdin *bool   `json:"stdin"`
	}
	if rerr := decodeRequest(c.msg, &req, "*process.StartRequest"); rerr != nil {
		return rerr
	}
	if req.Process == nil {
		req.Process = &pbProcessConfigIn{}
	}
	var tty *ptySize
	if req.PTY != nil {
		tty = &ptySize{cols: 80, rows: 24}
		if sz := req.PTY.Size; sz != nil && sz.Cols > 0 && sz.Rows > 0 {
			tty = &ptySize{cols: uint16(min(sz.Cols, 1<<15)), rows: uint16(min(sz.Rows, 1<<15))}
		}
	}
	cwd := ""
	if req.Process.Cwd != nil {
		cwd = *req.Process.Cwd
	}
	cwd, rerr := c.expand(cwd)
	if rerr != nil {
		return rerr
	}
	if !e.cwdExists(c.fs, cwd) {
		return rpcErrorf("invalid_argument", "cwd '%s' does not exist", cwd)
	}
	p, sub, rerr := e.startProcess(c, req.Process, req.Tag, tty == nil && (req.Stdin == nil || *req.Stdin),
		tty, cwd, c.timeout)
	if rerr != nil {
		return rerr
	}
	return e.streamProcess(c, sw, p, sub)
}

// streamProcess writes a process's events to a Start or Connect stream: start, then data and keepalives, then
// end and the end-of-stream message. A stream whose client goes away leaves the process running.
func (e *envdService) streamProcess(c *rpcCall, sw *streamWriter, p *envdProcess, sub *subscriber) *rpcError {
	defer p.unsubscribe(sub)
	cut := c.st.cutChan()
	if err := sw.send(pbEventMsg{Event: pbEvent{Start: &pbStartEvent{PID: p.pid}}}); err != nil {
		return nil
	}
	interval := keepaliveInterval(c.r.Header.Get("Keepalive-Ping-Interval"))
	keepalive := time.NewTimer(interval)
	defer keepalive.Stop()
	// Connect-Timeout-Ms is the stream's deadline: envd ends the stream there with deadline_exceeded and no end
	// event, whatever still holds the process's pipes.
	var deadline <-chan time.Time
	if c.timeout > 0 {
		t := time.NewTimer(c.timeout)
		defer t.Stop()
		deadline = t.C
	}
	sendChunk := func(ch chunk) error { return sw.sendOutput(ch.stream, ch.data) }
	for {
		select {
		case ch := <-sub.ch:
			if sendChunk(ch) != nil {
				return nil
			}
			keepalive.Reset(interval)
		case <-keepalive.C:
			if sw.send(pbEventMsg{Event: pbEvent{Keepalive: &struct{}{}}}) != nil {
				return nil
			}
			keepalive.Reset(interval)
		case <-p.exited:
			// The output was all handed over before the end was published; what is queued comes first.
			for drained := false; !drained; {
				select {
				case ch := <-sub.ch:
					if sendChunk(ch) != nil {
						return nil
					}
				default:
					drained = true
				}
			}
			end := p.end
			if sw.send(pbEventMsg{Event: pbEvent{End: &end}}) != nil {
				return nil
			}
			_ = sw.end(nil)
			return nil
		case <-deadline:
			_ = sw.end(rpcErrorf("deadline_exceeded", "context deadline exceeded"))
			return nil
		case <-cut:
			abortStream()
		case <-c.r.Context().Done():
			return nil
		}
	}
}

func (e *envdService) procConnect(c *rpcCall, sw *streamWriter) *rpcError {
	var req struct {
		Process *pbSelectorIn `json:"process"`
	}
	if rerr := decodeRequest(c.msg, &req, "*process.ConnectRequest"); rerr != nil {
		return rerr
	}
	p, rerr := c.st.lookup(req.Process, e.now(), true)
	if rerr != nil {
		return rerr
	}
	return e.streamProcess(c, sw, p, p.subscribe())
}

func (e *envdService) procList(c *rpcCall) (any, *rpcError) {
	if rerr := decodeRequest(c.msg, &struct{}{}, "*process.ListRequest"); rerr != nil {
		return nil, rerr
	}
	type info struct {
		Config pbProcessConfigOut `json:"config"`
		PID    uint32             `json:"pid,omitempty"`
		Tag    *string            `json:"tag,omitempty"`
	}
	c.st.mu.Lock()
	list := make([]info, 0, len(c.st.procs))
	for _, p := range c.st.procs {
		list = append(list, info{Config: p.config, PID: p.pid, Tag: p.tag})
	}
	c.st.mu.Unlock()
	sort.Slice(list, func(i, j int) bool { return list[i].PID < list[j].PID })
	return struct {
		Processes []info `json:"processes,omitempty"`
	}{list}, nil
}

func (e *envdService) procSendSignal(c *rpcCall) (any, *rpcError) {
	var req struct {
		Process *pbSelectorIn   `json:"process"`
		Signal  json.RawMessage `json:"signal"`
	}
	if rerr := decodeRequest(c.msg, &req, "*process.SendSignalRequest"); rerr != nil {
		return nil, rerr
	}
	p, rerr := c.st.lookup(req.Process, e.now(), false)
	if rerr != nil {
		return nil, rerr
	}
	var sig syscall.Signal
	switch name := signalName(req.Signal); name {
	case "SIGNAL_SIGKILL":
		sig = syscall.SIGKILL
	case "SIGNAL_SIGTERM":
		sig = syscall.SIGTERM
	default:
		return nil, rpcErrorf("unimplemented", "invalid signal: %s", name)
	}
	p.signal(sig)
	return struct{}{}, nil
}

// signalName reads the Signal enum by name or number.
func signalName(raw json.RawMessage) string {
	var name string
	if json.Unmarshal(raw, &name) == nil {
		return name
	}
	var n int
	if json.Unmarshal(raw, &n) == nil {
		switch n {
		case 9:
			return "SIGNAL_SIGKILL"
		case 15:
			return "SIGNAL_SIGTERM"
		case 0:
			return "SIGNAL_UNSPECIFIED"
		}
		return strconv.Itoa(n)
	}
	return "SIGNAL_UNSPECIFIED"
}

func (e *envdService) procSendInput(c *rpcCall) (any, *rpcError) {
	var req struct {
		Process *pbSelectorIn `json:"process"`
		Input   *struct {
			Stdin *pbBytes `json:"stdin"`
			PTY   *pbBytes `json:"pty"`
		} `json:"input"`
	}
	if rerr := decodeRequest(c.msg, &req, "*process.SendInputRequest"); rerr != nil {
		return nil, rerr
	}
	p, rerr := c.st.lookup(req.Process, e.now(), false)
	if rerr != nil {
		return nil, rerr
	}
	switch {
	case req.Input != nil && req.Input.PTY != nil:
		if err := p.writeTTY(*req.Input.PTY); err != nil {
			return nil, rpcErrorf("internal", "error writing to tty: %v", err)
		}
		return struct{}{}, nil
	case req.Input != nil && req.Input.Stdin != nil:
		if err := p.writeStdin(*req.Input.Stdin); err != nil {
			return nil, rpcErrorf("internal", "error writing to stdin: %v", err)
		}
		return struct{}{}, nil
	}
	return nil, rpcErrorf("unimplemented", "invalid input type %s", "<nil>")
}

func (e *envdService) procCloseStdin(c *rpcCall) (any, *rpcError) {
	var req struct {
		Process *pbSelectorIn `json:"process"`
	}
	if rerr := decodeRequest(c.msg, &req, "*process.CloseStdinRequest"); rerr != nil {
		return nil, rerr
	}
	p, rerr := c.st.lookup(req.Process, e.now(), false)
	if rerr != nil {
		return nil, rerr
	}
	if p.pty {
		return nil, rpcErrorf("unknown", "error closing stdin: cannot close stdin for PTY process — send "+
			"Ctrl+D (0x04) instead")
	}
	p.stdinMu.Lock()
	defer p.stdinMu.Unlock()
	if p.stdin != nil {
		err := p.stdin.Close()
		p.stdin = nil
		if err != nil {
			return nil, rpcErrorf("unknown", "error closing stdin: %v", err)
		}
	}
	return struct{}{}, nil
}
