// Package mcphttp serves MCP over HTTP with mcp-go's two transports, both on one listener so that any client finds
// the endpoint it speaks: streamable HTTP at /mcp, and SSE at /sse (the stream) and /message (the client's
// messages). Each protocol session is bound to the owner that opened it and bounded per owner (Sessions), a call
// ends when its session does, and a call's notifications leave on the stream of its response, before it. Calls of
// protocol 2026-07-28, which have no protocol session, are kept by caller and request ID for their cancels.
//
// The server authenticates the caller before a request reaches these handlers, and wraps them in its own rules
// (browsers' origins, body limits); this package knows the caller only through the functions it is given.
package mcphttp

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/e2b-mcp/e2b-mcp/internal/jsonrpc"
	"github.com/e2b-mcp/e2b-mcp/server/browsers"
	"github.com/e2b-mcp/e2b-mcp/tools"
)

// The paths of the transports.
const (
	PathMCP     = "/mcp"
	PathSSE     = "/sse"
	PathMessage = "/message"
)

// sessionIdleTTL is how long an idle streamable HTTP session (protocol 2025-11-25 and earlier) is kept.
const sessionIdleTTL = time.Hour

// Transport is the two HTTP transports of one MCP server.
type Transport struct {
	streamable *mcpserver.StreamableHTTPServer
	sse        *mcpserver.SSEServer
	sessions   *Sessions
	front      func(http.Handler) http.Handler
	// modern are the calls of protocol 2026-07-28 in flight over streamable HTTP, for their cancels (cancel.go),
	// each of the caller callerOf names.
	modern   *modernCalls
	callerOf func(context.Context) (tools.Caller, bool)
	now      func() time.Time
}

// Options are what a Transport is made with.
type Options struct {
	Sessions *Sessions // the server's: mcp-go's unregistering of a session must reach Sessions.Forget
	// Caller names a request's authenticated caller: the calls of protocol 2026-07-28, which have no protocol
	// session, are told apart by its owner and the session it named.
	Caller func(context.Context) (tools.Caller, bool)
	Now    func() time.Time // when a cancel comes, for how long it is kept
	Log    *slog.Logger
	// Front, if set, is put in front of mcp-go's streamable HTTP handler, behind the calls' notifier: it may
	// answer a POST itself, with Respond.
	Front func(http.Handler) http.Handler
}

// New makes the transports of m.
func New(m *mcpserver.MCPServer, o Options) *Transport {
	t := &Transport{
		streamable: mcpserver.NewStreamableHTTPServer(m,
			mcpserver.WithEndpointPath(PathMCP),
			mcpserver.WithSessionIdManagerResolver(o.Sessions),
			mcpserver.WithSessionIdleTTL(sessionIdleTTL),
			mcpserver.WithStreamableHTTPLogger(o.Log),
			mcpserver.WithDisableLocalhostProtection(true), // the server checks Host on every path, not only here
		),
		sse: mcpserver.NewSSEServer(m,
			mcpserver.WithSSEEndpoint(PathSSE),
			mcpserver.WithMessageEndpoint(PathMessage),
			mcpserver.WithSessionIDGenerator(o.Sessions.newSSESession),
			mcpserver.WithKeepAlive(true),
			mcpserver.WithKeepAliveInterval(30*time.Second),
			mcpserver.WithSSECORS(mcpserver.WithCORSAllowedOrigins(browsers.NoCORSOrigin)),
			mcpserver.WithSSEDisableLocalhostProtection(true),
		),
		sessions: o.Sessions,
		front:    o.Front,
		modern:   newModernCalls(),
		callerOf: o.Caller,
		now:      o.Now,
	}
	o.Sessions.setEnd(func(id string) { endStreamableSession(t.streamable, id) })
	return t
}

// MCP is the handler of /mcp, streamable HTTP.
func (t *Transport) MCP() http.Handler {
	h := takeArguments(t.streamable)
	if t.front != nil {
		h = t.front(h)
	}
	return t.cancelModernCalls(withPOSTNotifier(h))
}

// SSE is the handler of /sse, where an SSE client opens its stream.
func (t *Transport) SSE() http.Handler { return t.sessions.guardStreams(t.sse) }

// Messages is the handler of /message, where an SSE client posts its messages.
func (t *Transport) Messages() http.Handler {
	return t.sessions.guardMessages(withSSENotifier(t.sse, takeArguments(t.sse)))
}

// Shutdown closes the SSE streams and shuts the streamable transport down; ctx bounds the wait for its calls.
func (t *Transport) Shutdown(ctx context.Context) error {
	t.sse.CloseSessions()
	return t.streamable.Shutdown(ctx)
}

// endStreamableSession ends a streamable session in mcp-go through its own DELETE, as the session's client
// would, so that mcp-go lets go of what it holds for the session at once rather than after an idle hour.
func endStreamableSession(streamable http.Handler, id string) {
	req, err := http.NewRequest(http.MethodDelete, PathMCP, nil)
	if err != nil {
		return
	}
	req.Header.Set(mcpserver.HeaderKeySessionID, id)
	streamable.ServeHTTP(discardResponse{http.Header{}}, req)
}

// discardResponse is a ResponseWriter for answers nobody reads.
type discardResponse struct{ header http.Header }

func (d discardResponse) Header() http.Header       { return d.header }
func (discardResponse) Write(p []byte) (int, error) { return len(p), nil }
func (discardResponse) WriteHeader(int)             {}

// takeArguments hands mcp-go's transport (streamable HTTP, or SSE's messages) a POSTed tools/call without its
// arguments, which the one parse of the message decoded (jsonrpc.ReadPosted, jsonrpc.TakeArguments): the
// transport and mcp-go's handler each parse what they are given.
func takeArguments(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		posted, r, err := jsonrpc.ReadPosted(r)
		if err != nil || posted.Err != nil || posted.Envelope.Method != string(mcp.MethodToolsCall) ||
			len(posted.Envelope.ID) == 0 {
			next.ServeHTTP(w, r) // mcp-go answers what it is, as it always did
			return
		}
		if ctx, body, ok := jsonrpc.TakeArguments(r.Context(), posted.Body, posted.Envelope.Params.Arguments); ok {
			r = r.WithContext(ctx)
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		}
		next.ServeHTTP(w, r)
	})
}
