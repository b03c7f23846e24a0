package emulator

import (
	"bufio"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b/wire/envd"
)

// The envd side of a sandbox: the init that holds its namespaces, its processes, pausing and stopping them.

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
				err = fmt.Errorf("emulator: the sandbox did not start (%v)", rerr)
			}
		}
		pidc <- err
	}()
	select {
	case err = <-pidc:
	case <-time.After(initStartWait):
		err = errors.New("emulator: bwrap did not report its pid")
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
	return &sandboxState{id: id, procs: map[uint32]*envdProcess{}, ended: map[uint32]*envdProcess{},
		cut: make(chan struct{})}
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
func (st *sandboxState) lookup(sel *envd.ProcessSelector, now time.Time, ended bool) (*envdProcess, *rpcError) {
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
