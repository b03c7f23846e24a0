//go:build !linux

package server

import (
	"context"
	"errors"
	"log/slog"
)

// startLocalBackend: the emulator isolates sandboxes with Linux namespaces (bubblewrap), so the local backend
// exists on Linux only; everywhere else the server still runs against E2B.
func startLocalBackend(*slog.Logger, func(context.Context) error) (*localBackend, error) {
	return nil, errors.New("the local backend emulates sandboxes with Linux namespaces and is only available on Linux; " +
		"use E2B itself (e2b-mcp auth login)")
}
