package server

import (
	"fmt"
	"log/slog"

	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/tools"
)

// localBackend is the E2B emulator run in-process for --backend local: sandboxes are emulated on this machine
// in a temporary directory that goes away with the server, and no E2B account or keyring key is needed.
type localBackend struct {
	emu *e2btest.Server
}

func startLocalBackend(log *slog.Logger) (*localBackend, error) {
	emu, err := e2btest.New(e2btest.Options{})
	if err != nil {
		return nil, fmt.Errorf("starting the local backend: %w", err)
	}
	log.Warn("LOCAL BACKEND: sandboxes are emulated on this machine, not in E2B's cloud; they vanish when the server stops",
		"emulator", emu.URL())
	return &localBackend{emu: emu}, nil
}

// clients points every owner at the emulator with a key of its own (each owner is its own team there). The
// location flags are ignored: the emulator is the only E2B the local backend knows.
func (l *localBackend) clients(e2b.Config) tools.ClientSource {
	return StaticClients(l.emu.URL(), newSharedHTTPClient(), localKey)
}

func (l *localBackend) close() { l.emu.Close() }
