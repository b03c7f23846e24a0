package server

import (
	"context"
	"encoding/json"
	"io"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
)

// A call's notifications (progress) must reach its client before the call's response: a client forgets a
// call's progress token once the response is in, and drops (Claude Code: "Received a progress notification for
// an unknown token") whatever comes after. mcp-go's transports queue notifications for a goroutine of their own,
// which writes them whenever it gets to them, after the response as often as not; over streamable HTTP with a
// protocol session they may even leave on another stream of the session (its GET stream, or another call's
// POST). So every transport gives the calls a tools.Notifier that writes the notification on the stream of the
// call's response before it returns (stdio here, HTTP in server/mcphttp); the tools send their notifications
// before they return.

// stdioOut is the stdout of a stdio server, shared by mcp-go's writes and the calls' notifications. mcp-go writes
// each message with one Write, so under mu messages never interleave.
type stdioOut struct {
	mu sync.Mutex
	w  io.Writer
}

func (o *stdioOut) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.w.Write(p)
}

// notify writes n as one line, as mcp-go writes every message.
func (o *stdioOut) notify(_ context.Context, n mcp.JSONRPCNotification) error {
	b, err := json.Marshal(n)
	if err != nil {
		return err
	}
	_, err = o.Write(append(b, '\n'))
	return err
}
