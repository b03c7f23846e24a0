package tools

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b"
)

// The files of a command that ended in the foreground (its log, exit and command files) are the call's to remove:
// its result holds the output. They are not removed after the call, whose requests would then reach the sandbox
// when nothing uses it (a pause right after would race them, an auto-resume would wake the sandbox), nor before
// the call answers, which would cost every command a round trip to envd. They are removed during the sandbox's
// next command of e2b_exec, beside its own requests; until then e2b_list_processes leaves them out. A server that
// stops first leaves them, and the next lists them as ended commands, which they are.

// finished are, by sandbox, the pids of commands that ended in the foreground whose files are still to remove.
var finished = finishedSet{m: map[string]map[uint32]struct{}{}}

type finishedSet struct {
	mu sync.Mutex
	m  map[string]map[uint32]struct{}
}

// add records that pid's files in the sandbox are to be removed.
func (f *finishedSet) add(sandbox string, pid uint32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m[sandbox] == nil {
		f.m[sandbox] = map[uint32]struct{}{}
	}
	f.m[sandbox][pid] = struct{}{}
}

// has says whether pid's files in the sandbox are waiting to be removed.
func (f *finishedSet) has(sandbox string, pid uint32) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.m[sandbox][pid]
	return ok
}

// take returns the sandbox's pids but running (the pid of a command that now runs, whose files are its own), and
// forgets them.
func (f *finishedSet) take(sandbox string, running uint32) []uint32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var pids []uint32
	for pid := range f.m[sandbox] {
		if pid != running {
			pids = append(pids, pid)
		}
	}
	delete(f.m, sandbox)
	return pids
}

// removeTimeout bounds the removal of finished commands' files.
const removeTimeout = 10 * time.Second

// removeFinished removes the files of the sandbox's finished commands but running's, and returns a function that
// waits for that to be done.
func (t execTool) removeFinished(ctx context.Context, e *e2b.Envd, sandbox string, running uint32) (wait func()) {
	pids := finished.take(sandbox, running)
	if len(pids) == 0 {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeTimeout)
		defer cancel()
		for _, pid := range pids {
			logFile, exitFile := e2b.BackgroundFiles(execOutputDir, pid)
			for _, p := range []string{logFile, exitFile, e2b.CommandFile(execOutputDir, pid)} {
				if err := e.Remove(rctx, p); err != nil && !errors.Is(err, e2b.ErrNotFound) {
					t.log.Debug("the files of a finished command could not be removed", "path", p, "err", err)
				}
			}
		}
	}()
	return func() { <-done }
}
