package e2btest

import (
	"bufio"
	"bytes"
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
	// stopWait bounds how long stop waits for killed processes to be gone.
	stopWait = 10 * time.Second
)

// sandboxState is the envd side of one sandbox: its processes and the streams open on it.
type sandboxState struct {
	id string

	mu       sync.Mutex
	procs    map[uint32]*envdProcess // running
	ended    map[uint32]*envdProcess // ended, kept for Connect for endRetention
	frozen   bool
	stopped  bool
	cut      chan struct{} // closed when the sandbox pauses or stops: open streams break
	dirReady string        // the Dir prepared last
	init     *sandboxInit  // the namespaces of the sandbox's processes; nil until the first process
}

// sandboxInit is the bwrap that holds a sandbox's namespaces (see bwrap.go).
type sandboxInit struct {
	iso    *isolation
	cmd    *exec.Cmd
	pid    int // host pid of the sandbox's pid 1
	dir    string
	stdin  *os.File // closing it ends the sandbox
	exited chan struct{}
}

// initStartWait bounds how long a sandbox's init may take to report its pid.
const initStartWait = 30 * time.Second

// ensureInit returns the sandbox's init for dir, starting one if there is none (or it ended); egressDir holds the
// sandbox's egress proxy socket ("": none). st.mu is held.
func (st *sandboxState) ensureInit(iso *isolation, dir, egressDir string) (*sandboxInit, error) {
	if in := st.init; in != nil {
		select {
		case <-in.exited:
		default:
			if in.dir == dir {
				return in, nil
			}
			in.kill()
		}
		st.init = nil
	}
	cmd, info, childFiles, err := iso.initCommand(dir, egressDir)
	if err != nil {
		return nil, err
	}
	defer info.Close()
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		for _, f := range childFiles {
			f.Close()
		}
		return nil, err
	}
	readyR, readyW, err := os.Pipe()
	if err != nil {
		stdinR.Close()
		stdinW.Close()
		for _, f := range childFiles {
			f.Close()
		}
		return nil, err
	}
	defer readyR.Close()
	var stderr strings.Builder
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, readyW, &stderr
	err = cmd.Start()
	stdinR.Close()
	readyW.Close()
	for _, f := range childFiles {
		f.Close()
	}
	if err != nil {
		stdinW.Close()
		return nil, err
	}
	in := &sandboxInit{iso: iso, cmd: cmd, dir: dir, stdin: stdinW, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(in.exited)
	}()
	pidc := make(chan error, 1)
	go func() {
		var err error
		if in.pid, err = readInitPID(info); err == nil {
			if line, rerr := bufio.NewReader(readyR).ReadString('\n'); line != "ready\n" {
				err = fmt.Errorf("e2btest: the sandbox did not start (%v)", rerr)
			}
		}
		pidc <- err
	}()
	select {
	case err = <-pidc:
	case <-time.After(initStartWait):
		err = errors.New("e2btest: bwrap did not report its pid")
	}
	if err != nil {
		in.kill()
		<-in.exited
		return nil, fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	st.init = in
	return in, nil
}

// kill ends the sandbox: its pid 1 dies, and the kernel kills every process in its pid namespace.
func (in *sandboxInit) kill() {
	select {
	case <-in.exited:
		return
	default:
	}
	if in.pid > 0 {
		_ = syscall.Kill(in.pid, syscall.SIGKILL)
	}
	_ = syscall.Kill(-in.cmd.Process.Pid, syscall.SIGKILL)
	in.stdin.Close()
}

// signalAll sends sig to every process of the sandbox but its pid 1, from inside (kill -1), so that a process
// forking meanwhile cannot slip through.
func (in *sandboxInit) signalAll(sig string) {
	cmd, h, err := in.iso.command(procSpec{initPID: in.pid, user: sandboxUser{UID: 1000}, cwd: "/",
		env: []string{"PATH=" + sandboxPATH}, cmd: "/bin/bash", args: []string{"-c", "kill -s " + sig + " -1"}})
	if err != nil {
		return
	}
	defer h.close() // not before the wrapper has written its pid: a closed pipe would kill it
	err = cmd.Start()
	h.started()
	h.proceed(err == nil) // nothing to hold: this process is only waited for
	if err == nil {
		_ = cmd.Wait()
	}
}

func newSandboxState(id string) *sandboxState {
	return &sandboxState{id: id, procs: map[uint32]*envdProcess{}, ended: map[uint32]*envdProcess{}, cut: make(chan struct{})}
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
	}
	if st.init != nil {
		st.init.signalAll("STOP")
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
	if st.init != nil {
		st.init.signalAll("CONT")
	}
	for _, p := range st.procs {
		// nsenter stops itself when the process it waits for stops, and continues it again once continued.
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
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
	if st.init != nil {
		st.init.kill()
	}
	for _, p := range procs {
		// nsenter, which may be stopped (see thaw), goes too, so that the end is published.
		_ = p.cmd.Process.Kill()
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
	cmd    *exec.Cmd   // nsenter, which waits for the process and ends as it does
	proc   *os.Process // the process itself, by pidfd

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
}

// signal signals the process envd started, and nothing else (envd's kill(pid)).
func (p *envdProcess) signal(sig syscall.Signal) {
	_ = p.proc.Signal(sig)
}

// setDeadline kills the process when d runs out (Connect-Timeout-Ms).
func (p *envdProcess) setDeadline(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.deadline = time.Now().Add(d)
	p.timer = time.AfterFunc(d, func() { p.signal(syscall.SIGKILL) })
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
		p.timer = time.AfterFunc(p.remaining, func() { p.signal(syscall.SIGKILL) })
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

// processEnv is envd's environment of a process: PATH, HOME, USER, LOGNAME, the way out through the emulated
// egress proxy (but not for the sandbox's own loopback, which on E2B is reached directly: a server started in the
// sandbox answers curl localhost), then the sandbox's variables, then the request's (a later value of a name wins).
func processEnv(u sandboxUser, sandboxVars, requestVars map[string]string) []string {
	env := []string{"PATH=" + sandboxPATH, "HOME=" + u.Home, "USER=" + u.Name, "LOGNAME=" + u.Name,
		"ALL_PROXY=" + egressProxyURL, "all_proxy=" + egressProxyURL, "NO_PROXY=" + loopbackHosts, "no_proxy=" + loopbackHosts}
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
	userCmd := strings.Join(append([]string{cfg.Cmd}, cfg.Args...), " ")
	startErr := func(err error) *rpcError {
		return rpcErrorf("invalid_argument", "error starting process '%s': %v", userCmd, err)
	}
	egressDir := ""
	if e.srv != nil {
		var err error
		if egressDir, err = e.srv.egress.socketDir(c.view.id); err != nil {
			return nil, nil, startErr(err)
		}
	}
	e.mu.Lock()
	iso := e.iso
	e.mu.Unlock()
	if iso.err != nil {
		return nil, nil, startErr(iso.err)
	}
	var files []*os.File // every pipe end this function still holds
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	stdoutR, stdoutW, err := pipe()
	if err != nil {
		return nil, nil, rpcErrorf("internal", "error creating stdout pipe for command '%s': %v", userCmd, err)
	}
	stderrR, stderrW, err := pipe()
	if err != nil {
		closeAll()
		return nil, nil, rpcErrorf("internal", "error creating stderr pipe for command '%s': %v", userCmd, err)
	}
	var stdinR, stdinW *os.File
	if withStdin {
		if stdinR, stdinW, err = pipe(); err != nil {
			closeAll()
			return nil, nil, rpcErrorf("internal", "error creating stdin pipe for command '%s': %v", userCmd, err)
		}
	}

	st := c.st
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.stopped || st.frozen {
		closeAll()
		return nil, nil, rpcErrorf("unavailable", "sandbox is not running")
	}
	in, err := st.ensureInit(&iso, c.view.dir, egressDir)
	if err != nil {
		closeAll()
		return nil, nil, startErr(err)
	}
	cmd, h, err := iso.command(procSpec{initPID: in.pid, user: c.user, cwd: cwd,
		env: processEnv(c.user, c.view.envVars, cfg.Envs), cmd: cfg.Cmd, args: cfg.Args})
	if err != nil {
		closeAll()
		return nil, nil, startErr(err)
	}
	cmd.Stdout, cmd.Stderr = stdoutW, stderrW
	if stdinR != nil {
		cmd.Stdin = stdinR
	}
	if err := cmd.Start(); err != nil {
		h.close()
		closeAll()
		return nil, nil, startErr(err)
	}
	h.started()
	for _, f := range []*os.File{stdoutW, stderrW, stdinR} {
		if f != nil {
			f.Close()
		}
	}
	proc, pid, err := enteredProcess(cmd.Process.Pid, h.pidR)
	h.proceed(err == nil)
	h.close()
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		stdoutR.Close()
		stderrR.Close()
		if stdinW != nil {
			stdinW.Close()
		}
		return nil, nil, startErr(err)
	}

	p := &envdProcess{
		pid:    pid,
		config: pbProcessConfigOut{Cmd: cfg.Cmd, Args: cfg.Args, Envs: cfg.Envs, Cwd: cfg.Cwd},
		tag:    tag,
		cmd:    cmd,
		proc:   proc,
		stdin:  stdinW,
		exited: make(chan struct{}),
		subs:   map[*subscriber]struct{}{},
	}
	sub := p.subscribe()
	st.procs[p.pid] = p
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

// enteredProcess finds the process that nsenter (host pid) started in the sandbox: its pid in the sandbox, which
// it writes on the pid pipe before it runs the command, and its host process (nsenter's only child), held by a
// pidfd so that a signal can never reach another process that reused the pid.
func enteredProcess(nsenterPID int, pidR *os.File) (*os.Process, uint32, error) {
	line, err := bufio.NewReader(pidR).ReadString('\n')
	if err != nil {
		return nil, 0, errors.New("the process did not start")
	}
	pid, err := strconv.ParseUint(strings.TrimSpace(line), 10, 32)
	if err != nil {
		return nil, 0, fmt.Errorf("the process reported pid %q", line)
	}
	host, err := childOf(nsenterPID)
	if err != nil {
		return nil, 0, err
	}
	proc, err := os.FindProcess(host)
	if err != nil {
		return nil, 0, err
	}
	// The pid was read before the pidfd was opened: make sure it still is nsenter's child.
	if pp, err := parentOf(host); err != nil || pp != nsenterPID {
		proc.Release()
		return nil, 0, errors.New("the process ended as it started")
	}
	return proc, uint32(pid), nil
}

// childOf finds the child of a process that has one child, by the parents /proc reports: first among the pids
// allocated just after it (where a new child nearly always is), then among all.
func childOf(ppid int) (int, error) {
	for pid := ppid + 1; pid <= ppid+64; pid++ {
		if pp, err := parentOf(pid); err == nil && pp == ppid {
			return pid, nil
		}
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, de := range entries {
		pid, err := strconv.Atoi(de.Name())
		if err != nil {
			continue
		}
		if pp, err := parentOf(pid); err == nil && pp == ppid {
			return pid, nil
		}
	}
	return 0, errors.New("the process ended as it started")
}

// parentOf reads a process's parent from /proc/PID/stat ("pid (comm) state ppid ...").
func parentOf(pid int) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("malformed stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 {
		return 0, errors.New("malformed stat")
	}
	return strconv.Atoi(f[1])
}

// waitProcess reaps a process, waits for its output to be read (every holder of its pipes, background jobs
// included, has closed them, as envd waits), and publishes its end.
func (e *envdService) waitProcess(st *sandboxState, p *envdProcess, readers *sync.WaitGroup, stdout, stderr *os.File) {
	err := p.cmd.Wait()
	p.mu.Lock()
	if p.timer != nil {
		p.timer.Stop()
	}
	p.mu.Unlock()
	readers.Wait()
	stdout.Close()
	stderr.Close()
	p.stdinMu.Lock()
	if p.stdin != nil {
		p.stdin.Close()
		p.stdin = nil
	}
	p.stdinMu.Unlock()
	p.proc.Release()

	state := p.cmd.ProcessState
	end := pbEnd{ExitCode: int32(state.ExitCode()), Exited: state.Exited(), Status: state.String()}
	if err != nil {
		msg := err.Error()
		end.Error = &msg
	}
	now := e.now()
	st.mu.Lock()
	p.end = end
	p.endedAt = now
	if st.procs[p.pid] == p { // a process that kept its pipes open may have ended after its pid was reused
		delete(st.procs, p.pid)
	}
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
	// Connect-Timeout-Ms is the stream's deadline: envd ends the stream there with deadline_exceeded and no end
	// event, whatever still holds the process's pipes.
	var deadline <-chan time.Time
	if c.timeout > 0 {
		t := time.NewTimer(c.timeout)
		defer t.Stop()
		deadline = t.C
	}
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
