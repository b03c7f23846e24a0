package server

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/e2b-mcp/e2b-mcp/e2b/emulator"
	"github.com/e2b-mcp/e2b-mcp/internal/scratch"
)

// startLocalBackend starts the emulator with its sandboxes and their records in one temporary directory of this process
// (see localBackend), after removing those that killed predecessors left. What it finds out about this machine
// (bubblewrap, Jupyter) it finds in the background, so that the server answers its client at once (a create where
// sandboxes cannot be made says why); codeInterpreterCheck says whether the code-interpreter template can be offered
// (nil: ask this machine).
func startLocalBackend(log *slog.Logger, codeInterpreterCheck func(context.Context) error) (*localBackend, error) {
	dir, err := scratch.New(localDirPrefix)
	if err != nil {
		return nil, fmt.Errorf("starting the local backend: %w", err)
	}
	keys := newLocalKeys()
	if codeInterpreterCheck == nil {
		codeInterpreterCheck = emulator.CodeInterpreterAvailableContext
	}
	// The check runs in the background from now on; the backend's close ends it.
	checks, endChecks := context.WithCancel(context.Background())
	// E2B's code-interpreter template is offered where this machine has Jupyter; elsewhere its creates say why not.
	emu, err := emulator.New(emulator.Options{Dir: filepath.Join(dir.Path, "sandboxes"), AcceptKey: keys.accepts,
		CodeInterpreterCheck: func() error { return codeInterpreterCheck(checks) }})
	if err != nil {
		endChecks()
		dir.Remove()
		return nil, fmt.Errorf("starting the local backend: %w", err)
	}
	log.Warn("LOCAL BACKEND: sandboxes are emulated on this machine, not in E2B's cloud; they vanish "+
		"when the server stops",
		"emulator", emu.URL())
	return &localBackend{url: emu.URL(), keys: keys, stop: func() { endChecks(); emu.Close() }, dir: dir}, nil
}
