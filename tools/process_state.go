package tools

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b"
)

// What the sandbox knows of a process of this server's, read from envd's process list and from the process's log
// and exit files (e2b.BackgroundFiles under execOutputDir), so that it holds after a restart of the server: a
// command started with background true, or moved to the background by e2b_exec.

// processState is one process of this server's, running or ended.
type processState struct {
	pid uint32
	// proc is the process as envd lists it, while it runs.
	proc *e2b.BackgroundProcess
	// running is true until envd no longer lists the process: it has ended, and all its output is in its log (the
	// wrapper of a command of e2b_exec exits only once its tees have written the command's output there).
	running bool
	// exitCode is the exit code the exit file holds once the process ended; nil while it runs, or when it ended
	// without one (killed by SIGKILL, or moved by a server that stopped before it ended).
	exitCode *int
	// command is its command line: envd's while it runs, from its command file once it ended ("" when it left
	// none).
	command string
	logFile string
	// size is the log's size in bytes, and modified when it was last written; logged is false when there is no log.
	size     int64
	modified time.Time
	logged   bool
}

// known says whether the process is one of this server's.
func (p processState) known() bool { return p.logged || p.proc != nil }

// processStates reads the state of the processes pids of a sandbox; with no pids, of every process of this server's
// the sandbox knows (running, or with a log), by pid. Of the ended ones, only the maxEnded (0: all) whose log was
// written last are read, and omitted says how many others there are: a sandbox that has run many commands costs
// one read per command shown.
func processStates(ctx context.Context, e *e2b.Envd, sandboxID string, maxEnded int,
	pids ...uint32) (states []processState, omitted int, err error) {
	// The list is read first: a process it no longer shows has written its exit file, which is read after.
	list, err := e.ListBackground(ctx, backgroundTagPrefix)
	if err != nil {
		return nil, 0, err
	}
	byPID := map[uint32]*processState{}
	var order []uint32
	add := func(pid uint32) *processState {
		if p, ok := byPID[pid]; ok {
			return p
		}
		log, _ := e2b.BackgroundFiles(execOutputDir, pid)
		p := &processState{pid: pid, logFile: log}
		byPID[pid] = p
		order = append(order, pid)
		return p
	}
	for _, pid := range pids {
		add(pid)
	}
	for i := range list {
		if p, ok := byPID[list[i].PID]; ok || len(pids) == 0 {
			if !ok {
				p = add(list[i].PID)
			}
			p.proc = &list[i]
			p.command = list[i].Command
		}
	}
	entries, err := e.ListDir(ctx, execOutputDir, 1)
	if err != nil && !errors.Is(err, e2b.ErrNotFound) {
		return nil, 0, err
	}
	exits, commands := map[uint32]bool{}, map[uint32]bool{}
	for _, entry := range entries {
		pid, kind, ok := backgroundFile(entry.Name)
		if !ok || (len(pids) == 0 && finished.has(sandboxID, pid)) {
			continue // a command that ended in the foreground, whose call answered its output
		}
		p, listed := byPID[pid]
		if !listed && len(pids) > 0 {
			continue
		}
		if !listed {
			p = add(pid)
		}
		switch kind {
		case "log":
			p.logged, p.size, p.modified = true, entry.Size, entry.ModifiedTime
		case "exit":
			exits[pid] = true
		case "cmd":
			commands[pid] = true
		}
	}
	// A process has ended once envd no longer lists it; only then is its exit file read (one a process with the
	// same pid left before is emptied when it starts and written when it ends).
	var ended []*processState
	for _, pid := range order {
		p := byPID[pid]
		if p.running = p.proc != nil; p.running {
			states = append(states, *p)
		} else {
			ended = append(ended, p)
		}
	}
	if maxEnded > 0 && len(ended) > maxEnded {
		slices.SortFunc(ended, func(a, b *processState) int { return b.modified.Compare(a.modified) })
		omitted, ended = len(ended)-maxEnded, ended[:maxEnded]
	}
	for _, p := range ended {
		if exits[p.pid] {
			if p.exitCode, err = readExitCode(ctx, e, p.pid); err != nil {
				return nil, 0, err
			}
		}
		if commands[p.pid] {
			if p.command, err = readCommand(ctx, e, p.pid); err != nil {
				return nil, 0, err
			}
		}
		states = append(states, *p)
	}
	slices.SortFunc(states, func(a, b processState) int { return cmp.Compare(a.pid, b.pid) })
	return states, omitted, nil
}

// backgroundFile reads the pid and kind ("log", "exit" or "cmd") of a name e2b.BackgroundFiles makes.
func backgroundFile(name string) (pid uint32, kind string, ok bool) {
	rest, found := bytes.CutPrefix([]byte(name), []byte("bg-"))
	if !found {
		return 0, "", false
	}
	dot := bytes.LastIndexByte(rest, '.')
	if dot < 0 {
		return 0, "", false
	}
	n, err := strconv.ParseUint(string(rest[:dot]), 10, 32)
	if err != nil || n == 0 {
		return 0, "", false
	}
	switch kind = string(rest[dot+1:]); kind {
	case "log", "exit", "cmd":
		return uint32(n), kind, true
	}
	return 0, "", false
}

// readExitCode reads a process's exit file; nil when it holds no exit code.
func readExitCode(ctx context.Context, e *e2b.Envd, pid uint32) (*int, error) {
	_, exit := e2b.BackgroundFiles(execOutputDir, pid)
	body, _, err := e.Download(ctx, exit, e2b.DownloadOptions{Length: 32})
	if errors.Is(err, e2b.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer body.Close()
	b, err := io.ReadAll(body)
	if err != nil {
		return nil, err
	}
	code, err := strconv.Atoi(string(bytes.TrimSpace(b)))
	if err != nil {
		return nil, nil // being written, or not the wrapper's
	}
	return &code, nil
}

// maxCommandShown bounds the bytes of an ended process's command line that are read and shown.
const maxCommandShown = 2000

// readCommand reads a process's command file, cut to maxCommandShown bytes (with "…" when cut).
func readCommand(ctx context.Context, e *e2b.Envd, pid uint32) (string, error) {
	body, _, err := e.Download(ctx, e2b.CommandFile(execOutputDir, pid), e2b.DownloadOptions{Length: maxCommandShown + 1})
	if errors.Is(err, e2b.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer body.Close()
	b, err := io.ReadAll(io.LimitReader(body, maxCommandShown+1))
	if err != nil {
		return "", err
	}
	if len(b) > maxCommandShown {
		return strings.ToValidUTF8(string(trimPartialRuneEnd(b[:maxCommandShown])), "\uFFFD") + "…", nil
	}
	return strings.ToValidUTF8(string(b), "\uFFFD"), nil
}
