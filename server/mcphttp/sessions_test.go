package mcphttp

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/internal/clocktest"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// openSSEStream opens an SSE stream for token and returns its answer, whose body stays open until the stream ends.
func openSSEStream(t *testing.T, base, owner string) *http.Response {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+PathSSE, nil)
	req.Header.Set("Authorization", "Bearer "+owner)
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
	clock := clocktest.New(time.Now())
	x := serve(t, clock.Now)
	var clients []func()
	for range 5 {
		c := streamableClient(t, x.base, "alice")
		clients = append(clients, func() { echo(t, c) })
	}
	var streams []*http.Response
	calls := 0
	for i := range 150 {
		clock.Advance(minStreamAge) // every stream open is old enough to be ended
		resp := openSSEStream(t, x.base, "alice")
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
	if sse, streamable := x.sessions.held("alice", true), x.sessions.held("alice", false); sse > maxSSEStreams ||
		streamable != 5 {
		t.Errorf("alice holds %d SSE streams and %d streamable sessions, want at most %d and 5", sse, streamable,
			maxSSEStreams)
	}
}

// At the bound of SSE streams, the oldest idle stream is the one ended; a stream with a call running is not, and
// when every stream has one, a new stream is refused.
func TestSSEStreamBoundEndsOldestIdle(t *testing.T) {
	o := NewSessions(ownerFrom)
	clock := clocktest.New(time.Now())
	o.now = clock.Now
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
	clock.Advance(minStreamAge)
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

// Clients that reconnect their SSE stream as soon as it ends, more of them than the bound, do not end each other's
// streams in a loop: a stream younger than minStreamAge is not ended to make room, and the reconnect is refused
// with 429 and Retry-After instead. With the clock held, 150 clients making 10 attempts each against a bound of
// 100 set up exactly 100 streams; once the streams are minStreamAge old, at most another 100 (the bound per
// minStreamAge, however fast the clients try).
func TestReconnectingSSEClientsPastTheBound(t *testing.T) {
	clock := clocktest.New(time.Now())
	base := serve(t, clock.Now).base

	const clients, attempts = 150, 10
	var (
		setups, refusals atomic.Int64
		noRetryAfter     atomic.Int64
		mu               sync.Mutex
		failures         []string
	)
	open := func(ctx context.Context) (*http.Response, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+PathSSE, nil)
		req.Header.Set("Authorization", "Bearer alice")
		return http.DefaultClient.Do(req)
	}
	// round lets each client that holds no stream make up to attempts attempts, reconnecting at once when its
	// stream ends or is refused; it returns once every client holds a stream or has used its attempts. A stream
	// still open stays open for the next round.
	var held sync.Map // client → the body of its open stream's
	round := func() (setupsInRound int64) {
		before := setups.Load()
		var wg sync.WaitGroup
		for c := range clients {
			if _, holding := held.Load(c); holding {
				continue
			}
			wg.Go(func() {
				for range attempts {
					resp, err := open(t.Context())
					if err != nil {
						mu.Lock()
						failures = append(failures, err.Error())
						mu.Unlock()
						return
					}
					if resp.StatusCode == http.StatusTooManyRequests {
						refusals.Add(1)
						if n, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || n < 1 {
							noRetryAfter.Add(1)
						}
						resp.Body.Close()
						continue // no wait: the harshest client
					}
					if resp.StatusCode != http.StatusOK {
						mu.Lock()
						failures = append(failures, resp.Status)
						mu.Unlock()
						resp.Body.Close()
						return
					}
					setups.Add(1)
					// Held until ended to make room for another (then reconnected), or to the round's end.
					ended := make(chan struct{})
					go func() { _, _ = io.Copy(io.Discard, resp.Body); close(ended) }()
					held.Store(c, resp.Body)
					select {
					case <-ended:
						held.Delete(c)
						resp.Body.Close()
					case <-time.After(2 * time.Second):
						return // holds its stream: nothing ended it
					}
				}
			})
		}
		waitfor.Return(t, 2*time.Minute, "the reconnecting clients' attempts", wg.Wait)
		return setups.Load() - before
	}

	first := round()
	clock.Advance(minStreamAge)
	second := round()
	t.Logf("stream setups: %d with the clock held, %d once the streams were %v old; %d refusals", first, second, minStreamAge, refusals.Load())
	held.Range(func(_, body any) bool { body.(io.Closer).Close(); return true })
	for _, f := range failures {
		t.Errorf("a reconnect failed: %s", f)
	}
	if first != maxSSEStreams {
		t.Errorf("%d stream setups of %d clients making %d attempts each with the clock held; want the bound, %d", first, clients, attempts, maxSSEStreams)
	}
	if second > maxSSEStreams {
		t.Errorf("%d stream setups once the streams were old enough; want at most the bound, %d", second, maxSSEStreams)
	}
	if noRetryAfter.Load() > 0 {
		t.Errorf("%d refusals without a Retry-After of at least a second", noRetryAfter.Load())
	}
}

// An owner's SSE streams and streamable sessions are bounded apart: at the bound of either, the session ended to
// make room is the owner's least recently used of that kind, never one of the other, even when that one is older.
func TestSessionBoundsNeverEndTheOtherKind(t *testing.T) {
	for _, sse := range []bool{true, false} {
		kind := map[bool]string{true: "SSE stream", false: "streamable session"}
		t.Run(kind[sse], func(t *testing.T) {
			o := NewSessions(ownerFrom)
			clock := clocktest.New(time.Now())
			o.now = clock.Now
			var mu sync.Mutex
			ended := map[string]bool{}
			end := func(id string) { mu.Lock(); ended[id] = true; mu.Unlock() }
			o.setEnd(end)
			open := func(sse bool) string {
				t.Helper()
				var id string
				var endStream func()
				if sse {
					endStream = func() { end(id) }
				}
				id, err := o.add("alice", sse, endStream)
				if err != nil {
					t.Fatal(err)
				}
				return id
			}
			other := open(!sse) // the owner's oldest session, idle, of the other kind
			first := open(sse)
			bound := sessionKind{"alice", sse}.bound()
			for range bound - 1 {
				open(sse)
			}
			clock.Advance(minStreamAge) // every stream is old enough to be ended
			open(sse)                   // past the bound
			// A streamable session is ended on a goroutine of its own.
			waitfor.Until(t, 10*time.Second, "a session to be ended to make room", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(ended) > 0
			})
			mu.Lock()
			defer mu.Unlock()
			if ended[other] {
				t.Fatalf("a new %s past its bound ended the owner's %s", kind[sse], kind[!sse])
			}
			if !ended[first] || len(ended) != 1 {
				t.Errorf("ended %v, want only the oldest %s %s", ended, kind[sse], first)
			}
		})
	}
}

// One owner cannot hold protocol sessions without end by initializing over and over: past the bound the least
// recently used streamable session is ended (its ID no longer works, and mcp-go lets go of it) and the one in use
// goes on working. SSE streams have a bound of their own: see TestIdleSSEStreamsLeaveStreamableClientsAlone.
func TestProtocolSessionsBounded(t *testing.T) {
	x := serve(t, nil)
	bob := streamableClient(t, x.base, "bob")
	kept := streamableClient(t, x.base, "alice")

	initialize := func() string {
		_, h, body := do(t, http.MethodPost, x.base+PathMCP, "alice", initializeBody, nil)
		id := h.Get("Mcp-Session-Id")
		if id == "" {
			t.Fatalf("initialize gave no session: %s", body)
		}
		return id
	}
	first := initialize()
	if err := x.mcp.DeleteSessionTools(first); err != nil {
		t.Fatalf("mcp-go does not hold a session just made: %v", err)
	}
	for range 2 * maxProtocolSessions {
		initialize()
		echo(t, kept) // in use all along: never the least recently used
	}
	x.sessions.mu.Lock()
	alice, total := x.sessions.perOwner[sessionKind{"alice", false}], len(x.sessions.sessions)
	x.sessions.mu.Unlock()
	if alice > maxProtocolSessions || total > maxProtocolSessions+1 {
		t.Fatalf("alice holds %d protocol sessions (%d in all), want at most %d", alice, total, maxProtocolSessions)
	}
	ping := `{"jsonrpc":"2.0","id":2,"method":"ping"}`
	if code, _, _ := do(t, http.MethodPost, x.base+PathMCP, "alice", ping,
		map[string]string{"Mcp-Session-Id": first, "Mcp-Protocol-Version": "2025-11-25"}); code != http.StatusNotFound {
		t.Errorf("an ended session: HTTP %d, want 404", code)
	}
	// mcp-go let go of it too (it is ended in the background).
	waitfor.Until(t, 10*time.Second, "mcp-go to let go of the ended session", func() bool {
		return x.mcp.DeleteSessionTools(first) != nil
	})
	echo(t, bob) // another owner's session is untouched
}

// A protocol session belongs to the owner that opened it: another owner cannot use or end it with its ID.
func TestSessionsBoundToOwner(t *testing.T) {
	x := serve(t, nil)
	code, hdr, body := do(t, http.MethodPost, x.base+PathMCP, "alice", initializeBody, nil)
	sid := hdr.Get("Mcp-Session-Id")
	if code != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %q %s", code, sid, body)
	}
	legacy := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}
	if code, _, _ := do(t, http.MethodPost, x.base+PathMCP, "bob", toolsList, legacy); code != http.StatusNotFound {
		t.Errorf("bob posting into alice's session: %d, want 404", code)
	}
	if code, _, _ := do(t, http.MethodDelete, x.base+PathMCP, "bob", "", legacy); code == http.StatusOK {
		t.Errorf("bob ended alice's session")
	}
	if code, _, body := do(t, http.MethodPost, x.base+PathMCP, "alice", toolsList, legacy); code != http.StatusOK {
		t.Errorf("alice in her own session: %d %s", code, body)
	}

	// SSE: the message endpoint of alice's stream refuses bob.
	resp := openSSEStream(t, x.base, "alice")
	endpoint := ""
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if e, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			endpoint = strings.TrimSpace(e)
			break
		}
	}
	if !strings.HasPrefix(endpoint, PathMessage+"?sessionId=") {
		t.Fatalf("SSE endpoint event: %q", endpoint)
	}
	if code, _, _ := do(t, http.MethodPost, x.base+endpoint, "bob", toolsList, nil); code != http.StatusNotFound {
		t.Errorf("bob posting into alice's SSE session: %d, want 404", code)
	}
	if code, _, _ := do(t, http.MethodPost, x.base+endpoint, "alice", toolsList, nil); code != http.StatusAccepted {
		t.Errorf("alice posting into her SSE session: %d, want 202", code)
	}
}

// A call ends when its session does: mcp-go runs an SSE client's calls detached from every request, so without
// Track a call whose client went away would run on. A call of another session runs on.
func TestSessionEndEndsItsCalls(t *testing.T) {
	x := serve(t, nil)
	leaving, staying := sseClient(t, x.base, "alice"), sseClient(t, x.base, "alice")
	start := func(c *client.Client) {
		go func() {
			var req mcp.CallToolRequest
			req.Params.Name = "wait"
			_, _ = c.CallTool(t.Context(), req)
		}()
	}
	start(staying)
	start(leaving)
	waitfor.Until(t, 30*time.Second, "both calls to be tracked", func() bool {
		x.sessions.mu.Lock()
		defer x.sessions.mu.Unlock()
		running := 0
		for _, sess := range x.sessions.sessions {
			running += len(sess.calls)
		}
		return running == 2
	})
	if err := leaving.Close(); err != nil {
		t.Fatalf("closing the SSE client: %v", err)
	}
	if err := waitfor.Recv(t, x.ended, 30*time.Second, "the leaving client's call to end"); !errors.Is(err,
		errSessionEnded) {
		t.Errorf("the call ended with %v, want %v", err, errSessionEnded)
	}
	select {
	case err := <-x.ended:
		t.Errorf("the other session's call ended too: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
}
