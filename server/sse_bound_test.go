package server

import (
	"context"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"
)

// openSSEStream opens an SSE stream for token and returns its answer, whose body stays open until the stream ends.
func openSSEStream(t *testing.T, base, token string) *http.Response {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+PathSSE, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// streamEnds reports whether an open stream's body ends within wait.
func streamEnds(body io.Reader, wait time.Duration) bool {
	ended := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, body)
		close(ended)
	}()
	select {
	case <-ended:
		return true
	case <-time.After(wait):
		return false
	}
}

// Idle SSE streams of an owner do not crowd out its streamable clients: SSE streams and streamable sessions are
// bounded apart, so 150 idle streams end the oldest streams, not a 2025-11-25 client's session, and every call
// of five such clients goes through.
func TestIdleSSEStreamsLeaveStreamableClientsAlone(t *testing.T) {
	tokens, toks := tokensFor(t, "alice")
	f := newFixture(t, fixtureOpts{transport: TransportHTTP, tokensFile: tokens, policy: allowAll})
	base := serveHTTP(t, f)
	var clients []func()
	for range 5 {
		c := streamableClient(t, base, toks["alice"], "", eras[1])
		defer c.Close()
		clients = append(clients, func() {
			res := callTool(t, c, "e2b_list_sandboxes", map[string]any{})
			if res.IsError {
				t.Errorf("a call of a 2025-11-25 client: %s", resultText(res))
			}
		})
	}
	var streams []*http.Response
	calls := 0
	for i := range 150 {
		resp := openSSEStream(t, base, toks["alice"])
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("SSE stream %d: HTTP %d", i, resp.StatusCode)
		}
		streams = append(streams, resp)
		if i%5 == 0 && calls < 35 { // the clients' calls go on among the streams
			clients[calls%5]()
			calls++
		}
	}
	for ; calls < 35; calls++ {
		clients[calls%5]()
	}
	if !streamEnds(streams[0].Body, 10*time.Second) {
		t.Error("the oldest idle SSE stream is still open past the bound")
	}
	if streamEnds(streams[len(streams)-1].Body, 100*time.Millisecond) {
		t.Error("the newest SSE stream ended")
	}
	f.srv.sessions.mu.Lock()
	sse, streamable := f.srv.sessions.perOwner[sessionKind{"alice", true}], f.srv.sessions.perOwner[sessionKind{"alice", false}]
	f.srv.sessions.mu.Unlock()
	if sse > maxSSEStreams || streamable != 5 {
		t.Errorf("alice holds %d SSE streams and %d streamable sessions, want at most %d and 5", sse, streamable, maxSSEStreams)
	}
}

// At the bound of SSE streams, the oldest idle stream is the one ended; a stream with a call running is not, and
// when every stream has one, a new stream is refused.
func TestSSEStreamBoundEndsOldestIdle(t *testing.T) {
	o := newSessionOwners()
	var mu sync.Mutex
	ended := map[string]bool{}
	open := func() (string, error) {
		var id string
		var err error
		id, err = o.add("alice", true, func() { mu.Lock(); ended[id] = true; mu.Unlock() })
		return id, err
	}
	var ids []string
	for range maxSSEStreams {
		id, err := open()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	busy := func(id string) {
		o.mu.Lock()
		o.sessions[id].calls[uint64(len(o.sessions[id].calls)+1)] = func(error) {}
		o.mu.Unlock()
	}
	busy(ids[0])  // the oldest has a call running
	o.use(ids[1]) // the second oldest was just used: ids[2] is now the least recently used idle stream
	if _, err := open(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if !ended[ids[2]] || ended[ids[0]] || ended[ids[1]] || len(ended) != 1 {
		t.Errorf("ended %v, want only the least recently used idle stream %s", ended, ids[2])
	}
	mu.Unlock()
	o.mu.Lock()
	for _, sess := range o.sessions {
		sess.calls[1] = func(error) {}
	}
	o.mu.Unlock()
	if _, err := open(); err == nil {
		t.Error("a new stream while every stream has a call running was let in")
	}
}
