package emulator

import (
	"sort"
	"strconv"
	"syscall"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b/wire/envd"
)

// envd's process.Process RPCs (Start, Connect, List, SendSignal, SendInput, CloseStdin); their messages are
// package envd's (e2b/wire/envd), which the client speaks too.

// keepaliveInterval reads Keepalive-Ping-Interval (seconds), as envd's GetKeepAliveTicker does.
func keepaliveInterval(h string) time.Duration {
	if n, err := strconv.Atoi(h); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	return defaultKeepalive
}

func (e *envdService) procStart(c *rpcCall, sw *streamWriter) *rpcError {
	var req envd.StartRequest
	if rerr := decodeRequest(c.msg, &req, "*process.StartRequest"); rerr != nil {
		return rerr
	}
	if req.Process == nil {
		req.Process = &envd.ProcessConfig{}
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
	start := &envd.StartEvent{PID: envd.Uint32(p.pid)}
	if err := sw.send(envd.EventMessage{Event: &envd.ProcessEvent{Start: start}}); err != nil {
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
			if sw.send(envd.EventMessage{Event: &envd.ProcessEvent{Keepalive: &envd.KeepAlive{}}}) != nil {
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
			if sw.send(envd.EventMessage{Event: &envd.ProcessEvent{End: &end}}) != nil {
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
	var req envd.ProcessRequest
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
	c.st.mu.Lock()
	list := make([]envd.ProcessInfo, 0, len(c.st.procs))
	for _, p := range c.st.procs {
		list = append(list, envd.ProcessInfo{Config: &p.config, PID: envd.Uint32(p.pid), Tag: p.tag})
	}
	c.st.mu.Unlock()
	sort.Slice(list, func(i, j int) bool { return list[i].PID < list[j].PID })
	return envd.ListResponse{Processes: list}, nil
}

func (e *envdService) procSendSignal(c *rpcCall) (any, *rpcError) {
	var req envd.SendSignalRequest
	if rerr := decodeRequest(c.msg, &req, "*process.SendSignalRequest"); rerr != nil {
		return nil, rerr
	}
	p, rerr := c.st.lookup(req.Process, e.now(), false)
	if rerr != nil {
		return nil, rerr
	}
	var sig syscall.Signal
	switch req.Signal {
	case envd.SignalSIGKILL:
		sig = syscall.SIGKILL
	case envd.SignalSIGTERM:
		sig = syscall.SIGTERM
	case "":
		return nil, rpcErrorf("unimplemented", "invalid signal: %s", envd.SignalUnspecified)
	default:
		return nil, rpcErrorf("unimplemented", "invalid signal: %s", req.Signal)
	}
	p.signal(sig)
	return struct{}{}, nil
}

func (e *envdService) procSendInput(c *rpcCall) (any, *rpcError) {
	var req envd.SendInputRequest
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
	var req envd.ProcessRequest
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
