package emulator

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b/wire/envd"
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

// outputStream names the stream of a data event as envd's proto does.
type outputStream string

const (
	streamStdout outputStream = "stdout"
	streamStderr outputStream = "stderr"
	streamPTY    outputStream = "pty"
)

// ptySize is the terminal of a PTY process.
type ptySize struct{ cols, rows uint16 }

// chunk is a piece of output.
type chunk struct {
	stream outputStream
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
	config envd.ProcessConfig
	tag    *string
	cmd    *exec.Cmd   // nsenter, which waits for the process and ends as it does
	proc   *os.Process // the process itself, by pidfd

	stdinMu sync.Mutex
	stdin   *os.File // nil when stdin was not asked for, or after CloseStdin
	tty     *os.File // the terminal's master end, for a PTY process; nil once it ended
	pty     bool     // started on a terminal

	exited  chan struct{} // closed once end is set
	end     envd.EndEvent
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
func (p *envdProcess) readOutput(f *os.File, stream outputStream, wg *sync.WaitGroup) {
	defer wg.Done()
	buf := make([]byte, outputChunk)
	for {
		n, err := f.Read(buf)
		if n > 0 {
			p.broadcast(chunk{stream: stream, data: slices.Clone(buf[:n])})
		}
		if err != nil {
			return
		}
	}
}

// Wire shapes of process.proto.

// processEnv is envd's environment of a process: PATH, HOME, USER, LOGNAME, the way out through the emulated
// egress proxy (but not for the sandbox's own loopback, which on E2B is reached directly: a server started in the
// sandbox answers curl localhost), then the sandbox's variables, then the request's (a later value of a name wins).
func processEnv(u sandboxUser, sandboxVars, requestVars map[string]string) []string {
	env := []string{"PATH=" + sandboxPATH, "HOME=" + u.Home, "USER=" + u.Name, "LOGNAME=" + u.Name,
		"ALL_PROXY=" + egressProxyURL, "all_proxy=" + egressProxyURL, "NO_PROXY=" +
			loopbackHosts, "no_proxy=" + loopbackHosts}
	for _, k := range slices.Sorted(maps.Keys(sandboxVars)) {
		env = append(env, k+"="+sandboxVars[k])
	}
	for _, k := range slices.Sorted(maps.Keys(requestVars)) {
		env = append(env, k+"="+requestVars[k])
	}
	return env
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
func (e *envdService) startProcess(c *rpcCall, cfg *envd.ProcessConfig, tag *string, withStdin bool, tty *ptySize,
	cwd string, timeout time.Duration) (*envdProcess, *subscriber, *rpcError) {
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
	iso := e.isolation()
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
	// The ends the process gets (closed here once it has them) and the ends read here: two pipes, or one
	// terminal for all three of its standard streams.
	var childOut, childErr, childIn *os.File
	var outputs []*os.File
	var streams []outputStream
	var stdinW, master *os.File
	if tty != nil {
		m, slave, err := openPTY(tty.cols, tty.rows)
		if err != nil {
			return nil, nil, rpcErrorf("internal", "error starting pty for command '%s': %v", userCmd, err)
		}
		files = append(files, m, slave)
		master, childOut, childErr, childIn = m, slave, slave, slave
		outputs, streams = []*os.File{m}, []outputStream{streamPTY}
	} else {
		stdoutR, stdoutW, err := pipe()
		if err != nil {
			return nil, nil, rpcErrorf("internal", "error creating stdout pipe for command '%s': %v", userCmd, err)
		}
		stderrR, stderrW, err := pipe()
		if err != nil {
			closeAll()
			return nil, nil, rpcErrorf("internal", "error creating stderr pipe for command '%s': %v", userCmd, err)
		}
		childOut, childErr = stdoutW, stderrW
		outputs, streams = []*os.File{stdoutR, stderrR}, []outputStream{streamStdout, streamStderr}
		if withStdin {
			if childIn, stdinW, err = pipe(); err != nil {
				closeAll()
				return nil, nil, rpcErrorf("internal", "error creating stdin pipe for command '%s': %v", userCmd, err)
			}
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
		env: processEnv(c.user, c.view.envVars, cfg.Envs), cmd: cfg.Cmd, args: cfg.Args, tty: tty != nil})
	if err != nil {
		closeAll()
		return nil, nil, startErr(err)
	}
	cmd.Stdout, cmd.Stderr = childOut, childErr
	if childIn != nil {
		cmd.Stdin = childIn
	}
	if err := cmd.Start(); err != nil {
		h.close()
		closeAll()
		return nil, nil, startErr(err)
	}
	h.started()
	for _, f := range []*os.File{childOut, childErr, childIn} {
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
		for _, f := range append(outputs, stdinW) {
			if f != nil {
				f.Close()
			}
		}
		return nil, nil, startErr(err)
	}

	p := &envdProcess{
		pid:    pid,
		config: *cfg,
		tag:    tag,
		cmd:    cmd,
		proc:   proc,
		stdin:  stdinW,
		tty:    master,
		pty:    master != nil,
		exited: make(chan struct{}),
		subs:   map[*subscriber]struct{}{},
	}
	sub := p.subscribe()
	st.procs[p.pid] = p
	if timeout > 0 {
		p.setDeadline(timeout)
	}
	var readers sync.WaitGroup
	readers.Add(len(outputs))
	for i, f := range outputs {
		go p.readOutput(f, streams[i], &readers)
	}
	go e.waitProcess(st, p, &readers, outputs)
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
func (e *envdService) waitProcess(st *sandboxState, p *envdProcess, readers *sync.WaitGroup, outputs []*os.File) {
	err := p.cmd.Wait()
	p.mu.Lock()
	if p.timer != nil {
		p.timer.Stop()
	}
	p.mu.Unlock()
	readers.Wait()
	p.stdinMu.Lock()
	for _, f := range outputs {
		f.Close() // a terminal's master among them
	}
	p.tty = nil
	if p.stdin != nil {
		p.stdin.Close()
		p.stdin = nil
	}
	p.stdinMu.Unlock()
	p.proc.Release()

	state := p.cmd.ProcessState
	end := envd.EndEvent{ExitCode: envd.Int32(state.ExitCode()), Exited: state.Exited(), Status: state.String()}
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

func (p *envdProcess) writeStdin(data []byte) error {
	p.stdinMu.Lock()
	defer p.stdinMu.Unlock()
	if p.pty {
		return errors.New("tty assigned to process — input should be written to the pty, not the stdin")
	}
	if p.stdin == nil {
		return errors.New("stdin not enabled or closed")
	}
	if _, err := p.stdin.Write(data); err != nil {
		return fmt.Errorf("error writing to stdin of process '%d': %w", p.pid, err)
	}
	return nil
}

// writeTTY types data on a PTY process's terminal.
func (p *envdProcess) writeTTY(data []byte) error {
	p.stdinMu.Lock()
	defer p.stdinMu.Unlock()
	if p.tty == nil {
		return errors.New("tty not assigned to process — input should be written to the stdin, not the tty")
	}
	if _, err := p.tty.Write(data); err != nil {
		return fmt.Errorf("error writing to tty of process '%d': %w", p.pid, err)
	}
	return nil
}
