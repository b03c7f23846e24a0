package mcphttp

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/e2b-mcp/e2b-mcp/tools"
)

// A call's notifications (progress) must reach its client before the call's response (see the server's
// notify.go): mcp-go's transports queue them for a goroutine of their own, which may write them after the
// response, or on another stream of the session. So the calls of both transports get a tools.Notifier that
// writes each notification on the stream of the call's response before the call returns.

// sseNotifier queues a call's notifications on its SSE session's event queue, the queue its response goes to
// after them.
func sseNotifier(sse *mcpserver.SSEServer, sessionID string) tools.Notifier {
	return func(_ context.Context, n mcp.JSONRPCNotification) error {
		return sse.SendEventToSession(sessionID, n)
	}
}

// withSSENotifier gives the calls of a POST to /message the notifier of its SSE session.
func withSSENotifier(sse *mcpserver.SSEServer, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		notifier := sseNotifier(sse, r.URL.Query().Get("sessionId"))
		next.ServeHTTP(w, r.WithContext(tools.WithNotifier(r.Context(), notifier)))
	})
}

// postStream is the response of a POST to /mcp, which the call's notifications share with mcp-go: the first
// notification turns it into an SSE stream, as mcp-go does, and marks the session so that mcp-go writes the
// response as an event of the stream too.
type postStream struct {
	w       http.ResponseWriter
	flusher http.Flusher // nil when w cannot stream
	mu      sync.Mutex
	wrote   bool // the header was written
}

func (p *postStream) Header() http.Header { return p.w.Header() }

func (p *postStream) WriteHeader(code int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.writeHeaderLocked(code)
}

func (p *postStream) writeHeaderLocked(code int) {
	if p.wrote {
		return // mcp-go writes the SSE header once more before the response event
	}
	p.wrote = true
	p.w.WriteHeader(code)
}

func (p *postStream) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.wrote = true
	return p.w.Write(b)
}

func (p *postStream) Flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.flusher != nil {
		p.flusher.Flush()
	}
}

func (p *postStream) Unwrap() http.ResponseWriter { return p.w }

// notify writes n as an event of the POST's SSE stream, the header first if nothing was written yet.
func (p *postStream) notify(ctx context.Context, n mcp.JSONRPCNotification) error {
	if p.flusher == nil {
		return nil // no stream to carry it: dropped, as mcp-go drops it
	}
	b, err := json.Marshal(n)
	if err != nil {
		return err
	}
	if s, ok := mcpserver.ClientSessionFromContext(ctx).(mcpserver.SessionWithStreamableHTTPConfig); ok {
		s.UpgradeToSSEWhenReceiveNotification()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.wrote {
		h := p.w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Connection", "keep-alive")
		h.Set("Cache-Control", "no-cache")
		p.writeHeaderLocked(http.StatusOK)
	}
	if _, err := fmt.Fprintf(p.w, "event: message\ndata: %s\n\n", b); err != nil {
		return err
	}
	p.flusher.Flush()
	return nil
}

// Respond writes answer, a JSON-RPC response the server made without mcp-go, as the response of a POST to /mcp: a
// JSON body, or the last event of the POST's stream once a notification of the call made it one.
func Respond(w http.ResponseWriter, answer []byte) {
	p, ok := w.(*postStream)
	if !ok {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
		return
	}
	p.respond(answer)
}

// respond writes the POST's response: a JSON body, or the last event of its stream once a notification made it one.
func (p *postStream) respond(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.wrote {
		p.w.Header().Set("Content-Type", "application/json")
		p.writeHeaderLocked(http.StatusOK)
		_, _ = p.w.Write(b)
		return
	}
	_, _ = fmt.Fprintf(p.w, "event: message\ndata: %s\n\n", b)
	if p.flusher != nil {
		p.flusher.Flush()
	}
}

// withPOSTNotifier gives the calls of a POST to /mcp a notifier that writes on the POST's own stream.
func withPOSTNotifier(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		p := &postStream{w: w}
		p.flusher, _ = w.(http.Flusher)
		next.ServeHTTP(p, r.WithContext(tools.WithNotifier(r.Context(), p.notify)))
	})
}
