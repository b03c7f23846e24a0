package mcphttp

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/e2b-mcp/e2b-mcp/tools"
)

// ownerKey carries the owner a test request authenticated as.
type ownerKey struct{}

// authenticate stands in for the server's authentication: the owner is the bearer token itself ("Bearer alice").
func authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		owner, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || owner == "" {
			http.Error(w, "no caller", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ownerKey{}, owner)))
	})
}

func ownerFrom(ctx context.Context) (string, bool) {
	owner, ok := ctx.Value(ownerKey{}).(string)
	return owner, ok
}

// callerFrom is the caller of a test request: its owner, in one session.
func callerFrom(ctx context.Context) (tools.Caller, bool) {
	owner, ok := ownerFrom(ctx)
	return tools.Caller{Owner: owner, Session: "s"}, ok
}

// served is an MCP server behind both transports on a loopback port.
type served struct {
	base     string
	sessions *Sessions
	tr       *Transport
	mcp      *mcpserver.MCPServer
	// ended receives why a call of the tool "wait" ended.
	ended chan error
	// started receives a value as a call of "wait" starts, when there is room.
	started chan struct{}
}

// serve serves, until the test ends, an MCP server with two tools behind the transports, as the server wires
// them: "echo" answers at once, "wait" runs until its call's context ends (Track's, as the server's pipeline
// gives every call). now, if set, is the sessions' clock.
func serve(t *testing.T, now func() time.Time) *served {
	t.Helper()
	return serveFront(t, now, nil)
}

// serveFront is serve with front, if not nil, as the transports' Options.Front.
func serveFront(t *testing.T, now func() time.Time, front func(http.Handler) http.Handler) *served {
	t.Helper()
	sessions := NewSessions(ownerFrom)
	if now != nil {
		sessions.now = now
	}
	x := &served{sessions: sessions, ended: make(chan error, 16), started: make(chan struct{}, 16)}
	hooks := &mcpserver.Hooks{}
	hooks.AddOnUnregisterSession(func(_ context.Context, cs mcpserver.ClientSession) { sessions.Forget(cs.SessionID()) })
	x.mcp = mcpserver.NewMCPServer("mcphttp-test", "1", mcpserver.WithToolCapabilities(false),
		mcpserver.WithHooks(hooks))
	x.mcp.AddTool(mcp.NewTool("echo"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("echo"), nil
	})
	x.mcp.AddTool(mcp.NewTool("wait"), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		ctx, done := sessions.Track(ctx)
		defer done()
		select {
		case x.started <- struct{}{}:
		default: // a test that does not read them
		}
		select {
		case <-ctx.Done():
			x.ended <- context.Cause(ctx)
		case <-time.After(time.Minute):
			x.ended <- errors.New("the call ran on for a minute")
		}
		return mcp.NewToolResultText("ended"), nil
	})
	tr := New(x.mcp, Options{Sessions: sessions, Caller: callerFrom, Now: time.Now, Log: slog.New(slog.DiscardHandler),
		Front: front})
	x.tr = tr
	mux := http.NewServeMux()
	mux.Handle(PathMCP, authenticate(tr.MCP()))
	mux.Handle(PathSSE, authenticate(tr.SSE()))
	mux.Handle(PathMessage, authenticate(tr.Messages()))
	hs := httptest.NewServer(mux)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = tr.Shutdown(ctx)
		hs.CloseClientConnections()
		hs.Close()
	})
	x.base = hs.URL
	return x
}

// held is how many sessions of the kind owner holds.
func (o *Sessions) held(owner string, sse bool) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.perOwner[sessionKind{owner, sse}]
}

// streamableClient attaches an initialized 2025-11-25 client (a protocol session of its own) for owner.
func streamableClient(t *testing.T, base, owner string) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(base+PathMCP,
		transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + owner}))
	if err != nil {
		t.Fatal(err)
	}
	return initialized(t, client.NewClient(tr, client.WithProtocolVersion(mcp.ProtocolVersion20251125)))
}

// sseClient attaches an initialized SSE client for owner.
func sseClient(t *testing.T, base, owner string) *client.Client {
	t.Helper()
	tr, err := transport.NewSSE(base+PathSSE, transport.WithHeaders(map[string]string{"Authorization": "Bearer " + owner}))
	if err != nil {
		t.Fatal(err)
	}
	return initialized(t, client.NewClient(tr, client.WithProtocolVersion(mcp.ProtocolVersion20251125)))
}

func initialized(t *testing.T, c *client.Client) *client.Client {
	t.Helper()
	// The SSE transport's stream lives as long as Start's context: the test's, not the handshake's.
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var req mcp.InitializeRequest
	req.Params.ProtocolVersion = mcp.ProtocolVersion20251125
	req.Params.ClientInfo = mcp.Implementation{Name: "mcphttp-test", Version: "1"}
	if _, err := c.Initialize(ctx, req); err != nil {
		t.Fatal(err)
	}
	return c
}

// echo calls the tool "echo" and fails the test unless it answers.
func echo(t *testing.T, c *client.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var req mcp.CallToolRequest
	req.Params.Name = "echo"
	res, err := c.CallTool(ctx, req)
	if err != nil || res.IsError {
		t.Fatalf("echo: %v %v", err, res)
	}
}

// do sends a request as owner ("" for none) and returns the answer's status, headers and body.
func do(t *testing.T, method, url, owner, body string, hdr map[string]string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if owner != "" {
		req.Header.Set("Authorization", "Bearer "+owner)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

const (
	initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",` +
		`"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	toolsList = `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`
)
