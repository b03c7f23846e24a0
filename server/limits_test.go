package server

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
	"github.com/e2b-mcp/e2b-mcp/state"
	"github.com/e2b-mcp/e2b-mcp/tools"
)

// The body limit fits the largest legitimate call and nothing bigger: an e2b_write_file of the whole write limit,
// its content all newlines (each escaped to two bytes of JSON), goes through; a body one byte over the limit is
// answered 413, whether its length is declared or it comes chunked, on every endpoint that takes a body.
func TestHTTPBodyLimit(t *testing.T) {
	const writeLimit = 64 << 10
	f := newFixture(t, fixtureOpts{transport: TransportHTTP, policy: allowAll, mutate: func(c *Config, _ *e2btest.Server) {
		c.Tools.WriteLimitBytes = writeLimit
	}})
	base := serveHTTP(t, f)
	limit := f.srv.limits.maxBody
	if limit != 2*writeLimit+bodyOverhead {
		t.Fatalf("body limit %d", limit)
	}

	c := streamableClient(t, base, "", "", eras[0])
	defer c.Close()
	id := createSandbox(t, c)
	content := strings.Repeat("\n", writeLimit)
	mustOK(t, c, "e2b_write_file", map[string]any{"sandbox_id": id, "path": "/home/user/big.txt", "content": content})

	over := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"pad":"` + strings.Repeat("x", int(limit)) + `"}}`
	for _, path := range []string{PathMCP, PathMessage + "?sessionId=x"} {
		if code, _, body := do(t, http.MethodPost, base+path, "", over, nil); code != http.StatusRequestEntityTooLarge {
			t.Errorf("POST %s of %d bytes: %d %.100s, want 413", path, len(over), code, body)
		}
		// Chunked: no Content-Length to refuse up front; the limit stops the read.
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+path, io.NopCloser(strings.NewReader(over)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.ContentLength = -1
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("chunked POST %s of %d bytes: %d, want 413", path, len(over), resp.StatusCode)
		}
	}
}

// A client that sends its headers or its body too slowly loses the connection; once a body is in, the read
// deadline is lifted, so a call that runs longer than it still gets its answer.
func TestHTTPSlowClients(t *testing.T) {
	f := newFixture(t, fixtureOpts{transport: TransportHTTP, policy: allowAll})
	f.srv.limits.readHeader = 300 * time.Millisecond
	f.srv.limits.readBody = 300 * time.Millisecond
	base := serveHTTP(t, f)
	addr := strings.TrimPrefix(base, "http://")

	for name, start := range map[string]string{
		"headers": "POST /mcp HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\n",
		"body": "POST /mcp HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n" +
			"Content-Length: 1000\r\n\r\n{\"jsonrpc\":",
	} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(conn, start); err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		_, err = io.Copy(io.Discard, conn) // until the server closes the connection
		if err != nil {
			t.Errorf("slow %s: the server kept the connection for %s: %v", name, time.Since(began).Round(time.Millisecond), err)
		}
		conn.Close()
	}
}

// Once a body is in, its read deadline is lifted: a deadline left on the connection would end the request's
// context when it passes (net/http's background read fails), and with it any call that runs longer.
func TestHTTPBodyDeadlineLifted(t *testing.T) {
	l := newHTTPLimits(tools.Config{})
	l.readBody = 100 * time.Millisecond
	srv := httptest.NewServer(l.limitBody(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		select {
		case <-r.Context().Done():
			http.Error(w, "the request's context ended", http.StatusInternalServerError)
		case <-time.After(5 * l.readBody):
			_, _ = w.Write(body)
		}
	})))
	defer srv.Close()
	resp, err := http.Post(srv.URL, "application/json", strings.NewReader(`{"a":1}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(b) != `{"a":1}` {
		t.Fatalf("a call longer than the body deadline: %d %s", resp.StatusCode, b)
	}
}

// A caller cannot make durable session records without end by naming a new X-E2B-MCP-Session on every call:
// past the owner's bound of live sessions a call (or a resource read) in a new one is refused, and nothing is
// stored for it.
func TestHTTPSessionNamesBounded(t *testing.T) {
	f := newFixture(t, fixtureOpts{transport: TransportHTTP, policy: allowAll})
	base := serveHTTP(t, f)
	call := func(session string) (string, bool) {
		c := streamableClient(t, base, "", session, eras[0])
		defer c.Close()
		res := callTool(t, c, "e2b_list_sandboxes", map[string]any{})
		return resultText(res), !res.IsError
	}
	for i := range state.DefaultMaxLiveSessions {
		if out, ok := call(fmt.Sprintf("s%d", i)); !ok {
			t.Fatalf("session %d of %d refused: %s", i+1, state.DefaultMaxLiveSessions, out)
		}
	}
	out, ok := call("one-too-many")
	if ok || !strings.Contains(out, "live sessions") || !strings.Contains(out, "one-too-many") {
		t.Fatalf("a session past the bound: %s", out)
	}
	// A resource read is a call of its session too.
	reader := streamableClient(t, base, "", "one-too-many-reads", eras[0])
	defer reader.Close()
	if _, err := readResource(t, reader, "e2b://sandbox/sbx_none/home/user/"); err == nil ||
		!strings.Contains(err.Error(), "live sessions") || !strings.Contains(err.Error(), "one-too-many-reads") {
		t.Fatalf("a resource read in a session past the bound: %v", err)
	}
	if out, ok := call("s0"); !ok {
		t.Fatalf("an existing session at the bound: %s", out)
	}
	sessions, err := f.srv.Store().Sessions()
	if err != nil || len(sessions) != state.DefaultMaxLiveSessions {
		t.Fatalf("%d session records (%v), want %d", len(sessions), err, state.DefaultMaxLiveSessions)
	}
}

// Large bodies are read a few at a time, so that many at once cannot add up: while every place is held by a
// client sending slowly, another large body waits (for half its read time) and takes a place that frees meanwhile,
// or is turned away (503) when none does; a small call goes through.
func TestHTTPLargeBodiesTakeTurns(t *testing.T) {
	f := newFixture(t, fixtureOpts{transport: TransportHTTP, policy: allowAll})
	f.srv.limits.readBody = 2 * time.Minute
	// The wait for a place is the test's to see begin and to end.
	waits := make(chan chan time.Time, 1)
	f.srv.limits.placeTimeout = func(d time.Duration) <-chan time.Time {
		if d != f.srv.limits.readBody/2 {
			t.Errorf("a body waits %s for a place, not half its read time", d)
		}
		end := make(chan time.Time, 1)
		waits <- end
		return end
	}
	base := serveHTTP(t, f)
	addr := strings.TrimPrefix(base, "http://")
	slow := func() net.Conn {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		_, _ = io.WriteString(conn, "POST /mcp HTTP/1.1\r\nHost: "+addr+"\r\nContent-Type: application/json\r\n"+
			"Transfer-Encoding: chunked\r\n\r\n1\r\n{\r\n")
		return conn
	}
	holdEveryPlace := func() {
		t.Helper()
		waitfor.Until(t, 30*time.Second, "the slow bodies to hold every place", func() bool {
			return len(f.srv.limits.large) == largeBodies
		})
	}
	var first net.Conn
	for i := range largeBodies {
		if conn := slow(); i == 0 {
			first = conn
		}
	}
	holdEveryPlace()

	big := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"` + strings.Repeat("x", smallBody) + `"}}`
	post := func() <-chan int {
		answered := make(chan int, 1)
		go func() {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+PathMCP, strings.NewReader(big))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				answered <- 0
				return
			}
			resp.Body.Close()
			answered <- resp.StatusCode
		}()
		return answered
	}

	// A place that frees while the body waits is its.
	answered := post()
	waitfor.Recv(t, waits, 30*time.Second, "the large body to wait for a place")
	first.Close()
	if code := waitfor.Recv(t, answered, 30*time.Second, "the answer to the large body after a place freed"); code == http.StatusServiceUnavailable || code == 0 {
		t.Errorf("a large body that waited while a place freed: %d, want it read", code)
	}

	// No place frees: it is turned away when its wait ends, and not before.
	slow()
	holdEveryPlace()
	answered = post()
	end := waitfor.Recv(t, waits, 30*time.Second, "the large body to wait for a place")
	select {
	case code := <-answered:
		t.Fatalf("a large body waiting for a place was answered %d before its wait ended", code)
	default:
	}
	end <- time.Now()
	if code := waitfor.Recv(t, answered, 30*time.Second, "the answer to the large body whose wait ended"); code != http.StatusServiceUnavailable {
		t.Errorf("a large body while every place is held: %d, want 503", code)
	}
	c := streamableClient(t, base, "", "", eras[0])
	defer c.Close()
	listIDs(t, c)
}
