package server

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// modernHTTP is a server over streamable HTTP and a way to attach 2026-07-28 clients to it.
type modernHTTP struct {
	f    *fixture
	base string
}

func newModernHTTP(t *testing.T) *modernHTTP {
	t.Helper()
	f := newFixture(t, fixtureOpts{transport: TransportHTTP})
	return &modernHTTP{f: f, base: serveHTTP(t, f)}
}

// client attaches a 2026-07-28 client naming session.
func (m *modernHTTP) client(t *testing.T, session string) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(m.base+PathMCP, transport.WithHTTPHeaders(map[string]string{SessionHeader: session}))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithProtocolVersion(mcp.ProtocolVersion20260728))
	initialize(t, c, mcp.ProtocolVersion20260728)
	return c
}

// startCall starts an e2b_exec of command with the request ID id, and returns the channel of its answer.
func startCall(t *testing.T, c *client.Client, id, sandboxID, command string) <-chan error {
	answered := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		res, err := c.GetTransport().SendRequest(ctx, transport.JSONRPCRequest{
			JSONRPC: mcp.JSONRPC_VERSION,
			ID:      mcp.NewRequestId(id),
			Method:  string(mcp.MethodToolsCall),
			Header:  http.Header{mcp.HeaderMethod: {string(mcp.MethodToolsCall)}, mcp.HeaderName: {"e2b_exec"}},
			Params: withProtocolMeta(mcp.ProtocolVersion20260728, map[string]any{"name": "e2b_exec",
				"arguments": map[string]any{"sandbox_id": sandboxID, "command": command}, "_meta": map[string]any{}}),
		})
		if err == nil && res.Error != nil {
			err = res.Error.AsError()
		}
		answered <- err
	}()
	return answered
}

// sendCancel sends notifications/cancelled for the request ID id.
func sendCancel(t *testing.T, c *client.Client, id string) {
	t.Helper()
	var n mcp.JSONRPCNotification
	n.JSONRPC = mcp.JSONRPC_VERSION
	n.Method = string(mcp.MethodNotificationCancelled)
	n.Params.AdditionalFields = map[string]any{"requestId": id, "reason": "the user pressed Stop"}
	n.Params.Meta = map[string]any{mcp.MetaKeyProtocolVersion: mcp.ProtocolVersion20260728,
		mcp.MetaKeyClientInfo: map[string]any{"name": "cancel-test", "version": "1"}, mcp.MetaKeyClientCapabilities: map[string]any{}}
	if err := c.GetTransport().SendNotification(t.Context(), n); err != nil {
		t.Fatalf("sending notifications/cancelled: %v", err)
	}
}

// runs reports whether a command whose command line holds marker runs in the sandbox, as envd lists them.
func (m *modernHTTP) runs(t *testing.T, sandboxID, marker string) bool {
	t.Helper()
	return commandRuns(t, m.f.emu, m.f.emu.URL(), sandboxID, marker)
}

// Over streamable HTTP in protocol 2026-07-28 (no protocol session), notifications/cancelled cancels the sender's
// own call of that ID, not another client's call that has the same ID, and a cancel that arrives before its call
// (separate POSTs, in either order) still stops it.
func TestModernCancelIsTheCallersOwn(t *testing.T) {
	m := newModernHTTP(t)
	mine, other := m.client(t, "s1"), m.client(t, "s2")
	id := createSandbox(t, mine)

	answered := startCall(t, mine, "7", id, "exec sleep 4246")
	waitfor.Until(t, 30*time.Second, "the command runs", func() bool { return m.runs(t, id, "sleep 4246") })
	sendCancel(t, other, "7")
	time.Sleep(500 * time.Millisecond)
	if !m.runs(t, id, "sleep 4246") {
		t.Fatal("another client's notifications/cancelled for its own request 7 killed this client's call 7")
	}
	sendCancel(t, mine, "7")
	waitfor.Until(t, 30*time.Second, "the cancelled command is gone", func() bool { return !m.runs(t, id, "sleep 4246") })
	waitfor.Recv(t, answered, time.Minute, "the answer to the cancelled call 7")

	sendCancel(t, mine, "8")
	answered = startCall(t, mine, "8", id, "exec sleep 4247")
	waitfor.Recv(t, answered, 15*time.Second, "the answer to call 8, whose cancel came first (it ran on)")
	// envd lists a killed process until it has reaped it, so the listing may lag the answer a little.
	waitfor.Until(t, 10*time.Second, "the command of a call whose cancel came first is gone", func() bool { return !m.runs(t, id, "sleep 4247") })
}
