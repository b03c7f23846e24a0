package e2btest

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The process service: real processes (bwrap.go) behind envd's process.Process API.

const (
	// outputChunk is the largest data event, as envd reads stdout and stderr.
	outputChunk = 32 << 10
	// defaultKeepalive is envd's keepalive interval when the request names none.
	defaultKeepalive = 90 * time.Second
	// endRetention is how long Connect still answers for a process that has ended (envd's terminatedRetentionTTL).
	endRetention = 30 * time.Second
	// firstPID is the pid of a sandbox's first process. The pids are the sandbox's own, never the host's.
	firstPID = 1000
	// stopWait bounds how long stop waits for killed processes to be gone.
	stopWait = 10 * time.Second
)

// sandboxState is the envd side of one sandbox: its processes and the streams open on it.
type sandboxState struct {
	id string

	mu       sync.Mutex
	procs    map[uint32]*envdProcess // running
	ended    map[uint32]*envdProcess // ended, kept for Connect for endRetention
	nextPID  uint32
	frozen   bool
	stopped  bool
	cut      chan struct{} // closed when the sandbox pauses or stops: open streams break
	dirReady string        // the Dir prepared last
}

func newSandboxState(id string) *sandboxState {
	return &sandboxState{id: id, procs: map[uint32]*envdProcess{}, ended: map[uint32]*envdProcess{}, nextPID: firstPID, cut: make(chan struct{})}
}

// prepare makes sure the sandbox's directories exist (once per Dir).
func (st *sandboxState) prepare(dir string) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.dirReady == dir {
		return nil
	}
	if err := prepareSandboxDirs(dir); err != nil {
		return err
	}
	st.dirReady = dir
	return nil
}

func (st *sandboxState) cutChan() <-chan struct{} {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.cut
}

func (st *sandboxState) freeze() {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.frozen || st.stopped {
		return
	}
	st.frozen = true
	close(st.cut)
	for _, p := range st.procs {
		p.pauseDeadline()
		p.signalGroup(syscall.SIGSTOP)
	}
}

func (st *sandboxState) thaw() {
	st.mu.Lock()
	defer st.mu.Unlock()
	if !st.frozen || st.stopped {
		return
	}
	st.frozen = false
	st.cut = make(chan struct{})
	for _, p := range st.procs {
		p.signalGroup(syscall.SIGCONT)
		p.resumeDeadline()
	}
}

func (st *sandboxState) stop() {
	st.mu.Lock()
	if st.stopped {
		st.mu.Unlock()
		return
	}
	st.stopped = true
	if !st.frozen {
		close(st.cut)
	}
	procs := slices.Collect(maps.Values(st.procs))
	for _, p := range procs {
		p.signalGroup(syscall.SIGKILL)
	}
	st.mu.Unlock()
	deadline := time.After(stopWait)
	for _, p := range procs {
		select {
		case <-p.exited:
		case <-deadline:
			return
		}
	}
}

// forgetEnded drops the processes that ended more than endRetention ago. st.mu is held.
func (st *sandboxState) forgetEnded(now time.Time) {
	for pid, p := range st.ended {
		if now.Sub(p.endedAt) > endRetention {
			delete(st.ended, pid)
		}
	}
}

// lookup finds a process by pid or tag: a running one, or with ended also one that ended within endRetention.
func (st *sandboxState) lookup(sel *pbSelectorIn, now time.Time, ended bool) (*envdProcess, *rpcError) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.forgetEnded(now)
	switch {
	case sel == nil || (sel.PID == nil && sel.Tag == nil):
		return nil, rpcErrorf("unimplemented", "invalid input type %s", "*process.ProcessSelector")
	case sel.PID != nil:
		pid := uint32(*sel.PID)
		if p := st.procs[pid]; p != nil {
			return p, nil
		}
		if p := st.ended[pid]; p != nil && ended {
			return p, nil
		}
		return nil, rpcErrorf("not_found", "process with pid %d not found", pid)
	}
	sets := []map[uint32]*envdProcess{st.procs}
	if ended {
		sets = append(sets, st.ended)
	}
	for _, set := range sets {
		for _, pid := range slices.Sorted(maps.Keys(set)) {
			if p := set[pid]; p.tag != nil && *p.tag == *sel.Tag {
				return p, nil
			}
		}
	}
	return nil, rpcErrorf("not_found", "process with tag %s not found", *sel.Tag)
}

// chunk is a piece of output.
type chunk struct {
	stderr bool
	data   []byte
}

// subscriber is an open stream on a process.
type subscriber struct {
	ch   chan chunk
	gone chan struct{}
}

// envdProcess is a running (or recently ended) sandbox process.
type envdProcess struct {
	pid    uint32
	config pbProcessConfigOut
	tag    *string
	cmd    *exec.Cmd

	stdinMu sync.Mutex
	stdin   *os.File // nil when stdin was not asked for, or after CloseStdin

	exited  chan struct{} // closed once end is set
	end     pbEnd
	endedAt time.Time

	mu        sync.Mutex
	subs      map[*subscriber]struct{}
	timer     *time.Timer
	remaining time.Duration // of the deadline while frozen
	deadline  time.Time
	// termForced is set when a SIGTERM sent through envd had to be followed by SIGKILL (see terminate).
	termForced bool
}

// signalGroup signals bwrap's process group: bwrap and everything in the sandbox process.
func (p *envdProcess) signalGroup(sig syscall.Signal) {
	if p.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
}

// defaultTermGrace is how long a SIGTERM sent through envd may take to end the process before its group is killed.
// In a real sandbox SIGTERM reaches the process itself; here it reaches bwrap's process group, and one that
// arrives while bwrap is still setting up the namespaces can be lost, leaving the command running for good
// (a stream that never ends). Once bwrap is up, SIGTERM ends the whole group at once, so the grace never runs out.
const defaultTermGrace = 5 * time.Second

// terminate sends SIGTERM and makes sure it takes effect, reporting the end as SIGTERM's even when it had to be
// forced: that a signal could be lost is the emulator's artefact, not envd behaviour to show a client.
func (p *envdProcess) terminate(grace time.Duration) {
	p.signalGroup(syscall.SIGTERM)
	go func() {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-p.exited:
		case <-t.C:
			p.mu.Lock()
			p.termForced = true
			p.mu.Unlock()
			p.signalGroup(syscall.SIGKILL)
		}
	}()
}

// setDeadline kills the process when d runs out (Connect-Timeout-Ms).
func (p *envdProcess) setDeadline(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.deadline = time.Now().Add(d)
	p.timer = time.AfterFunc(d, func() { p.signalGroup(syscall.SIGKILL) })
}

// pauseDeadline holds the deadline while the sandbox is paused: a paused VM's clock does not run.
func (p *envdProcess) pauseDeadline() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.timer != nil && p.timer.Stop() {
		p.remaining = max(time.Until(p.deadline), 0)
		p.timer = nil
	}
}

func (p *envdProcess) resumeDeadline() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.timer == nil && !p.deadline.IsZero() {
		p.deadline = time.Now().Add(p.remaining)
		p.timer = time.AfterFunc(p.remaining, func() { p.signalGroup(syscall.SIGKILL) })
	}
}

func (p *envdProcess) subscribe() *subscriber {
	s := &subscriber{ch: make(chan chunk, 16), gone: make(chan struct{})}
	p.mu.Lock()
	p.subs[s] = struct{}{}
	p.mu.Unlock()
	return s
}

func (p *envdProcess) unsubscribe(s *subscriber) {
	p.mu.Lock()
	if _, ok := p.subs[s]; ok {
		delete(p.subs, s)
		close(s.gone)
	}
	p.mu.Unlock()
}

// broadcast gives a chunk to every open stream, waiting for each to take it: a slow reader slows the process
// down (its pipe fills up) rather than the emulator buffering without bound. Output nobody listens to is dropped,
// as envd drops it.
func (p *envdProcess) broadcast(c chunk) {
	p.mu.Lock()
	subs := slices.Collect(maps.Keys(p.subs))
	p.mu.Unlock()
	for _, s := range subs {
		select {
		case s.ch <- c:
		case <-s.gone:
		}
	}
}

// readOutput turns a pipe into data events of at most outputChunk bytes.
func (p *envdProcess) readOutput(f *os.File, stderr bool, wg *sync.WaitGroup) {
	defer wg.Done()
	buf := make([]byte, outputChunk)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			p.broadcast(chunk{stderr: stderr, data: slices.Clone(buf[:n])})
		}
		if err != nil {
			return
		}
	}
}

// Wire shapes of process.proto.

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

// processEnv is envd's environment of a process: PATH, HOME, USER, LOGNAME, then the sandbox's variables, then
// the request's (a later value of a name wins).
func processEnv(u sandboxUser, sandboxVars, requestVars map[string]string) []string {
	env := []string{"PATH=" + sandboxPATH, "HOME=" + u.Home, "USER=" + u.Name, "LOGNAME=" + u.Name}
	for _, k := range slices.Sorted(maps.Keys(sandboxVars)) {
		env = append(env, k+"="+sandboxVars[k])
	}
	for _, k := range slices.Sorted(maps.Keys(requestVars)) {
		env = append(env, k+"="+requestVars[k])
	}
	return env
}

func (e *envdService) procStart(c *rpcCall, sw *streamWriter) *rpcError {
	var req struct {
		Process *pbProcessConfigIn `json:"process"`
		PTY     json.RawMessage    `json:"pty"`
		Tag     *string            `json:"tag"`
		Stdin   *bool              `json:"stdin"`
	}
	if rerr := decodeRequest(c.msg, &req, "*process.StartRequest"); rerr != nil {
		return rerr
	}
	if req.Process == nil {
		req.Process = &pbProcessConfigIn{}
	}
	if len(req.PTY) > 0 && string(req.PTY) != "null" {
		return rpcErrorf("unimplemented", "PTY processes are not supported by the e2btest emulator")
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
	p, sub, rerr := e.startProcess(c, req.Process, req.Tag, req.Stdin == nil || *req.Stdin, cwd, c.timeout)
	if rerr != nil {
		return rerr
	}
	return e.streamProcess(c, sw, p, sub)
}

// cwdExists checks a working directory: the sandbox's own directories as the filesystem RPC sees them, and the
// host's system directories that processes see read-only.
func (e *envdService) cwdExists(sfs *sandboxFS, cwd string) bool {
	if _, fi, err := sfs.stat(cwd); err == nil {
		return fi.IsDir()
	}
	for _, d := range []string{"/usr", "/etc", "/bin", "/sbin", "/lib", "/lib64"} {
		if cwd == d || strings.HasPrefix(cwd, d+"/") {
			fi, err := os.Stat(cwd)
			return err == nil && fi.IsDir()
		}
	}
	return false
}

// startProcess starts a process and subscribes a stream to it before any output can be missed.
func (e *envdService) startProcess(c *rpcCall, cfg *pbProcessConfigIn, tag *string, withStdin bool, cwd string, timeout time.Duration) (*envdProcess, *subscriber, *rpcError) {
	ps := procSpec{dir: c.view.dir, user: c.user, cwd: cwd, env: processEnv(c.user, c.view.envVars, cfg.Envs), cmd: cfg.Cmd, args: cfg.Args}
	userCmd := strings.Join(append([]string{cfg.Cmd}, cfg.Args...), " ")
	startErr := func(err error) *rpcError {
		return rpcErrorf("invalid_argument", "error starting process '%s': %v", userCmd, err)
	}
	e.mu.Lock()
	iso := e.iso
	e.mu.Unlock()
	cmd, childFiles, err := iso.command(ps)
	if err != nil {
		return nil, nil, startErr(err)
	}
	closeChild := func() {
		for _, f := range childFiles {
			f.Close()
		}
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		closeChild()
		return nil, nil, rpcErrorf("internal", "error creating stdout pipe for command '%s': %v", userCmd, err)
	}
	stderrR, stderrW, err := os.Pipe()
	if err != nil {
		closeChild()
		stdoutR.Close()
		stdoutW.Close()
		return nil, nil, rpcErrorf("internal", "error creating stderr pipe for command '%s': %v", userCmd, err)
	}
	cmd.Stdout, cmd.Stderr = stdoutW, stderrW
	childFiles = append(childFiles, stdoutW, stderrW)
	var stdinW *os.File
	if withStdin {
		stdinR, w, err := os.Pipe()
		if err != nil {
			closeChild()
			stdoutR.Close()
			stderrR.Close()
			return nil, nil, rpcErrorf("internal", "error creating stdin pipe for command '%s': %v", userCmd, err)
		}
		cmd.Stdin, stdinW = stdinR, w
		childFiles = append(childFiles, stdinR)
	}

	p := &envdProcess{
		config: pbProcessConfigOut{Cmd: cfg.Cmd, Args: cfg.Args, Envs: cfg.Envs, Cwd: cfg.Cwd},
		tag:    tag,
		cmd:    cmd,
		stdin:  stdinW,
		exited: make(chan struct{}),
		subs:   map[*subscriber]struct{}{},
	}
	sub := p.subscribe()

	st := c.st
	st.mu.Lock()
	if st.stopped || st.frozen {
		st.mu.Unlock()
		closeChild()
		stdoutR.Close()
		stderrR.Close()
		if stdinW != nil {
			stdinW.Close()
		}
		return nil, nil, rpcErrorf("unavailable", "sandbox is not running")
	}
	err = cmd.Start()
	closeChild()
	if err != nil {
		st.mu.Unlock()
		stdoutR.Close()
		stderrR.Close()
		if stdinW != nil {
			stdinW.Close()
		}
		return nil, nil, startErr(err)
	}
	p.pid = st.nextPID
	st.nextPID++
	st.procs[p.pid] = p
	st.mu.Unlock()

	if timeout > 0 {
		p.setDeadline(timeout)
	}
	var readers sync.WaitGroup
	readers.Add(2)
	go p.readOutput(stdoutR, false, &readers)
	go p.readOutput(stderrR, true, &readers)
	go e.waitProcess(st, p, &readers, stdoutR, stderrR)
	return p, sub, nil
}

// waitProcess reaps a process, waits for its output to be read, and publishes its end.
func (e *envdService) waitProcess(st *sandboxState, p *envdProcess, readers *sync.WaitGroup, stdout, stderr *os.File) {
	err := p.cmd.Wait()
	// Whatever is left of the process group goes with bwrap: a SIGTERM that reached bwrap while it was still
	// setting up leaves the namespace's init, which ignores it, running the command.
	p.signalGroup(syscall.SIGKILL)
	readers.Wait()
	stdout.Close()
	stderr.Close()
	p.stdinMu.Lock()
	if p.stdin != nil {
		p.stdin.Close()
		p.stdin = nil
	}
	p.stdinMu.Unlock()
	p.mu.Lock()
	if p.timer != nil {
		p.timer.Stop()
	}
	termForced := p.termForced
	p.mu.Unlock()

	state := p.cmd.ProcessState
	end := pbEnd{ExitCode: int32(state.ExitCode()), Exited: state.Exited(), Status: state.String()}
	if err != nil {
		msg := err.Error()
		end.Error = &msg
	}
	if termForced {
		msg := "signal: terminated"
		end = pbEnd{ExitCode: -1, Status: msg, Error: &msg}
	}
	now := e.now()
	st.mu.Lock()
	p.end = end
	p.endedAt = now
	delete(st.procs, p.pid)
	st.forgetEnded(now)
	st.ended[p.pid] = p
	st.mu.Unlock()
	close(p.exited)
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
	sendChunk := func(ch chunk) error { return sw.sendOutput(ch.stderr, ch.data) }
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
	if sig == syscall.SIGTERM {
		p.terminate(e.termGrace)
	} else {
		p.signalGroup(sig)
	}
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
		return nil, rpcErrorf("internal", "error writing to tty: tty not assigned to process — input should be written to the stdin, not the tty")
	case req.Input != nil && req.Input.Stdin != nil:
		if err := p.writeStdin(*req.Input.Stdin); err != nil {
			return nil, rpcErrorf("internal", "error writing to stdin: %v", err)
		}
		return struct{}{}, nil
	}
	return nil, rpcErrorf("unimplemented", "invalid input type %s", "<nil>")
}

func (p *envdProcess) writeStdin(data []byte) error {
	p.stdinMu.Lock()
	defer p.stdinMu.Unlock()
	if p.stdin == nil {
		return errors.New("stdin not enabled or closed")
	}
	if _, err := p.stdin.Write(data); err != nil {
		return fmt.Errorf("error writing to stdin of process '%d': %w", p.pid, err)
	}
	return nil
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
