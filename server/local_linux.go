package server

import (
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
func startLocalBackend(log *slog.Logger, codeInterpreterCheck func() error) (*localBackend, error) {
	dir, err := scratch.New(localDirPrefix)
	if err != nil {
		return nil, fmt.Errorf("starting the local backend: %w", err)
	}
	keys := newLocalKeys()
	if codeInterpreterCheck == nil {
		codeInterpreterCheck = emulator.CodeInterpreterAvailable
	}
	// E2B's code-interpreter template is offered where this machine has Jupyter; elsewhere its creates say why not.
	emu, err := emulator.New(emulator.Options{Dir: filepath.Join(dir.Path, "sandboxes"), AcceptKey: keys.accepts,
		CodeInterpreterCheck: codeInterpreterCheck})
	if err != nil {
		dir.Remove()
		return nil, fmt.Errorf("starting the local backend: %w", err)
	}
	log.Warn("LOCAL BACKEND: sandboxes are emulated on this machine, not in E2B's cloud; they vanish "+
		"when the server stops",
		"emulator", emu.URL())
	return &localBackend{url: emu.URL(), keys: keys, stop: emu.Close, dir: dir}, nil
}
