package server

import (
	"fmt"
	"log/slog"

	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
)

func startLocalBackend(log *slog.Logger) (*localBackend, error) {
	emu, err := e2btest.New(e2btest.Options{NoRecording: true})
	if err != nil {
		return nil, fmt.Errorf("starting the local backend: %w", err)
	}
	log.Warn("LOCAL BACKEND: sandboxes are emulated on this machine, not in E2B's cloud; they vanish when the server stops",
		"emulator", emu.URL())
	return &localBackend{url: emu.URL(), stop: emu.Close}, nil
}
