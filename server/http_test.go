package server

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/credentials"
	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
	"github.com/e2b-mcp/e2b-mcp/lifecycle"
)

// tokensFor writes a tokens file with one token per owner and returns it and the tokens.
func tokensFor(t *testing.T, owners ...string) (string, map[string]string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens.json")
	toks := map[string]string{}
	var entries []credentials.TokenEntry
	for _, o := range owners {
		tok, e, err := credentials.NewTokenEntry(o, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		toks[o] = tok
		entries = append(entries, e)
	}
	if err := credentials.WriteTokenFile(path, entries); err != nil {
		t.Fatal(err)
	}
	return path, toks
}

// serveHTTP serves the fixture's server on a loopback port until the test ends, and checks that it shuts down
// cleanly then.
func serveHTTP(t testing.TB, f *fixture) string {
	t.Helper()
	base, _ := serveHTTPUntil(t, f.srv)
	return base
}

// serveHTTPUntil serves srv over HTTP on a port of its own until stop is called or the test ends, and checks that
// it shut down gracefully.
func serveHTTPUntil(t testing.TB, srv *Server) (base string, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.ServeHTTP(ctx, ln) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := waitfor.Recv(t, done, 30*time.Second, "the HTTP server to shut down"); err != nil {
				t.Errorf("graceful shutdown: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return "http://" + ln.Addr().String(), stop
}

func headers(token, session string) map[string]string {
	h := map[string]string{}
	if token != "" {
		h["Authorization"] = "Bearer " + token
	}
	if session != "" {
		h[SessionHeader] = session
	}
	return h
}

func streamableClient(t testing.TB, base, token, session, version string, opts ...client.ClientOption) *client.Client {
	t.Helper()
	tr, err := transport.NewStreamableHTTP(base+PathMCP, transport.WithHTTPHeaders(headers(token, session)))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, append(opts, client.WithProtocolVersion(version))...)
	initialize(t, c, version)
	return c
}

func sseClient(t *testing.T, base, token, session string, opts ...client.ClientOption) *client.Client {
	t.Helper()
	tr, err := transport.NewSSE(base+PathSSE, transport.WithHeaders(headers(token, session)))
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewClient(tr, append(opts, client.WithProtocolVersion(mcp.ProtocolVersion20251125))...)
	initialize(t, c, mcp.ProtocolVersion20251125)
	return c
}

func do(t *testing.T, method, url, token, body string, hdr map[string]string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	if h := hdr["Host"]; h != "" {
		req.Host = h
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

const allowAll = "default_action: allow\n"

const toolsList = `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`

// Without a valid bearer token only the health check answers.
func TestHTTPAuthentication(t *testing.T) {
	tokens, toks := tokensFor(t, "alice", "bob")
	f := newFixture(t, fixtureOpts{tokensFile: tokens, transport: TransportHTTP})
	base := serveHTTP(t, f)

	if code, _, body := do(t, http.MethodGet, base+PathHealth, "", "", nil); code != http.StatusOK || body != "ok\nstate store: answers\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	for _, auth := range []string{"", "Bearer", "Bearer nonsense-token", "Bearer " + toks["alice"] + "x", "Basic " + toks["alice"], toks["alice"]} {
		for _, tc := range []struct{ method, path string }{
			{http.MethodPost, PathMCP}, {http.MethodGet, PathMCP}, {http.MethodDelete, PathMCP},
			{http.MethodGet, PathSSE}, {http.MethodPost, PathMessage + "?sessionId=x"},
		} {
			code, hdr, _ := do(t, tc.method, base+tc.path, auth, toolsList, nil)
			if code != http.StatusUnauthorized || !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s %s with Authorization %q: %d (WWW-Authenticate %q), want 401",
					tc.method, tc.path, strings.Fields(auth + " x")[0], code, hdr.Get("WWW-Authenticate"))
			}
		}
	}
	initBody := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	if code, _, body := do(t, http.MethodPost, base+PathMCP, "Bearer "+toks["alice"], initBody, nil); code != http.StatusOK {
		t.Errorf("POST /mcp with alice's token: %d %s", code, body)
	}
	long := map[string]string{SessionHeader: strings.Repeat("s", maxSessionName+1)}
	if code, _, body := do(t, http.MethodPost, base+PathMCP, "Bearer "+toks["alice"], initBody, long); code != http.StatusBadRequest {
		t.Errorf("an over-long %s: %d %s", SessionHeader, code, body)
	}
}

// Two owners on one server, each with its own token and E2B team: neither sees or touches the other's
// sandboxes, over streamable HTTP in both eras and over SSE; the session header groups sandboxes within an owner.
func TestHTTPOwnersIsolated(t *testing.T) {
	tokens, toks := tokensFor(t, "alice", "bob")
	f := newFixture(t, fixtureOpts{tokensFile: tokens, transport: TransportHTTP, policy: allowAll})
	base := serveHTTP(t, f)

	for _, version := range eras {
		t.Run(version, func(t *testing.T) {
			alice := streamableClient(t, base, toks["alice"], "", version)
			bob := streamableClient(t, base, toks["bob"], "", version)
			id := createSandbox(t, alice)

			sb, ok := f.emu.Sandbox(id)
			if !ok || sb.Team != testKey("alice") || sb.Metadata[lifecycle.TagOwner] != "alice" || sb.Metadata[lifecycle.TagSession] != "s1" {
				t.Fatalf("alice's sandbox: team/tags %v %v", sb.Team == testKey("alice"), sb.Metadata)
			}
			if ids := listIDs(t, alice); !slices.Contains(ids, id) {
				t.Errorf("alice lists %v, without her %s", ids, id)
			}
			if ids := listIDs(t, bob); slices.Contains(ids, id) {
				t.Errorf("bob lists alice's sandbox: %v", ids)
			}
			for _, action := range []string{"pause", "delete"} {
				msg := mustFail(t, bob, "e2b_manage_sandbox", map[string]any{"sandbox_id": id, "action": action})
				if !strings.Contains(msg, "Sandbox '"+id+"' not found") {
					t.Errorf("bob's %s of alice's sandbox: %q", action, msg)
				}
			}
			if sb, ok := f.emu.Sandbox(id); !ok || sb.State != "running" {
				t.Fatalf("alice's sandbox after bob's calls: found %v, state %q", ok, sb.State)
			}

			other := streamableClient(t, base, toks["alice"], "other-session", version)
			if ids := listIDs(t, other); slices.Contains(ids, id) {
				t.Errorf("alice's other session lists the sandbox of session s1: %v", ids)
			}
		})
	}

	t.Run("sse", func(t *testing.T) {
		alice := sseClient(t, base, toks["alice"], "sse-session")
		bob := sseClient(t, base, toks["bob"], "sse-session")
		id := createSandbox(t, alice)
		if ids := listIDs(t, alice); !slices.Equal(ids, []string{id}) {
			t.Errorf("alice over SSE lists %v, want [%s]", ids, id)
		}
		if ids := listIDs(t, bob); len(ids) != 0 {
			t.Errorf("bob over SSE lists %v", ids)
		}
		if sb, _ := f.emu.Sandbox(id); sb.Metadata[lifecycle.TagOwner] != "alice" || sb.Metadata[lifecycle.TagSession] != "sse-session" {
			t.Errorf("tags of the SSE sandbox: %v", sb.Metadata)
		}
	})
}

// The transports' protocol sessions (server/mcphttp) belong to the owner of the bearer token that opened them:
// another member's token does not reach into one.
func TestHTTPSessionsKnowTheTokensOwner(t *testing.T) {
	tokens, toks := tokensFor(t, "alice", "bob")
	f := newFixture(t, fixtureOpts{tokensFile: tokens, transport: TransportHTTP})
	base := serveHTTP(t, f)
	code, hdr, body := do(t, http.MethodPost, base+PathMCP, "Bearer "+toks["alice"], initializeBody, nil)
	sid := hdr.Get("Mcp-Session-Id")
	if code != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %q %s", code, sid, body)
	}
	legacy := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}
	for _, owner := range []string{"bob", "alice"} {
		want := map[string]int{"bob": http.StatusNotFound, "alice": http.StatusOK}[owner]
		if code, _, body := do(t, http.MethodPost, base+PathMCP, "Bearer "+toks[owner], toolsList, legacy); code != want {
			t.Errorf("%s posting into alice's session: %d %s, want %d", owner, code, body, want)
		}
	}
}

// Without tokens the server only listens on loopback, where the configured owner is the caller.
func TestListenWithoutTokens(t *testing.T) {
	for _, tc := range []struct {
		addr   string
		tokens bool
		ok     bool
	}{
		{"127.0.0.1:8931", false, true},
		{"[::1]:8931", false, true},
		{"localhost:8931", false, true},
		{"127.0.0.2:0", false, true},
		{"0.0.0.0:8931", false, false},
		{":8931", false, false},
		{"[::]:8931", false, false},
		{"192.168.1.10:8931", false, false},
		{"example.com:8931", false, false},
		{"0.0.0.0:8931", true, true},
		{"no-port", true, false},
	} {
		err := checkListen(tc.addr, tc.tokens)
		if (err == nil) != tc.ok {
			t.Errorf("checkListen(%q, tokens=%v) = %v, want ok=%v", tc.addr, tc.tokens, err, tc.ok)
		}
	}

	f := newFixture(t, fixtureOpts{transport: TransportHTTP, mutate: func(c *Config, _ *e2btest.Server) { c.Listen = "0.0.0.0:0" }})
	// A server that listens instead of refusing serves until the deadline, then returns without the refusal.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err := f.srv.Run(ctx, nil, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "refusing to listen on 0.0.0.0:0 without --tokens-file") {
		t.Fatalf("Run on 0.0.0.0 without tokens: %v (want the refusal at once)", err)
	}

	g := newFixture(t, fixtureOpts{transport: TransportHTTP})
	base := serveHTTP(t, g)
	c := streamableClient(t, base, "", "", mcp.ProtocolVersion20260728)
	id := createSandbox(t, c)
	if sb, _ := g.emu.Sandbox(id); sb.Metadata[lifecycle.TagOwner] != "alice" {
		t.Errorf("without tokens the caller is not the configured owner: %v", sb.Metadata)
	}
}

// Shutting the server down ends open streams, keeps every sandbox, and stops serving.
func TestHTTPShutdownKeepsSandboxes(t *testing.T) {
	f := newFixture(t, fixtureOpts{transport: TransportHTTP})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- f.srv.ServeHTTP(ctx, ln) }()

	c := streamableClient(t, base, "", "", mcp.ProtocolVersion20251125)
	id := createSandbox(t, c)
	// An open SSE stream must not hold the shutdown up.
	sseClient(t, base, "", "")

	cancel()
	if err := waitfor.Recv(t, done, shutdownGrace+30*time.Second, "the shutdown to finish"); err != nil {
		t.Fatalf("ServeHTTP after shutdown: %v", err)
	}
	if sb, ok := f.emu.Sandbox(id); !ok || sb.State != "running" {
		t.Fatalf("after shutdown the sandbox is %v/%q, want running", ok, sb.State)
	}
	if resp, err := http.Get(base + PathHealth); err == nil {
		resp.Body.Close()
		t.Fatal("the server still answers after shutdown")
	}
}

// Over HTTP a client with elicitation is asked in the call (streamable HTTP, both eras); over SSE, whose
// transport cannot carry the question, it gets an approval ID instead of a protocol error.
func TestHTTPApprovals(t *testing.T) {
	f := newFixture(t, fixtureOpts{policy: approvalPolicy, transport: TransportHTTP})
	base := serveHTTP(t, f)
	for _, version := range eras {
		t.Run(version, func(t *testing.T) {
			yes := &elicitor{action: mcp.ElicitationResponseActionAccept}
			c := streamableClient(t, base, "", "", version, client.WithElicitationHandler(yes))
			id := createSandbox(t, c)
			if out := mustOK(t, c, "e2b_manage_sandbox", map[string]any{"sandbox_id": id, "action": "delete"}); out["success"] != true {
				t.Fatalf("accepted delete: %v", out)
			}
			if len(yes.asked()) != 1 || sandboxExists(f, id) {
				t.Errorf("asked %d times; sandbox exists %v", len(yes.asked()), sandboxExists(f, id))
			}
		})
	}
	t.Run("sse", func(t *testing.T) {
		yes := &elicitor{action: mcp.ElicitationResponseActionAccept}
		c := sseClient(t, base, "", "", client.WithElicitationHandler(yes))
		id := createSandbox(t, c)
		msg := mustFail(t, c, "e2b_manage_sandbox", map[string]any{"sandbox_id": id, "action": "delete"})
		if askedOutside(t, msg, "the client cannot put questions to them"); !sandboxExists(f, id) {
			t.Errorf("delete over SSE: %q (sandbox exists %v)", msg, sandboxExists(f, id))
		}
	})
}

// Over HTTP, as over stdio, a tool call's arguments are decoded once, in front of mcp-go's transport: the
// transport and mcp-go's handler are given the message with a small stand-in for them, and the tool gets them
// back, decoded and as the client's JSON: over streamable HTTP in both protocol eras, and over SSE.
func TestHTTPFrontDecodesTheArgumentsOnce(t *testing.T) {
	for _, transport := range append(slices.Clone(eras), "sse") {
		t.Run(transport, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{transport: TransportHTTP})
			calls, handed := argumentsTool(f.srv)
			var c *client.Client
			if transport == "sse" {
				c = sseClient(t, serveHTTP(t, f), "", "s1")
			} else {
				c = streamableClient(t, serveHTTP(t, f), "", "s1", transport)
			}
			content := strings.Repeat("line \"quoted\"\t<&>\n", 1<<14)
			var req mcp.CallToolRequest
			req.Params.Name = "test_args"
			req.Params.Arguments = map[string]any{"content": content, "n": json.Number("9007199254740993")}
			if res, err := c.CallTool(t.Context(), req); err != nil || res.IsError {
				t.Fatalf("the call failed: %v %v", res, err)
			}
			got := waitfor.Recv(t, calls, time.Minute, "the tool's call")
			args, _ := got.Params.Arguments.(map[string]any)
			if args["content"] != content || args["n"] != float64(9007199254740993) {
				t.Errorf("the tool got the arguments %.200v", got.Params.Arguments)
			}
			if !strings.Contains(string(got.Params.RawArguments), `"n":9007199254740993`) ||
				len(got.Params.RawArguments) < len(content) {
				t.Errorf("the tool got the arguments' JSON %.200q, not the client's", got.Params.RawArguments)
			}
			if msg := waitfor.Recv(t, handed, time.Minute, "mcp-go's handler to get the call"); len(msg) > 2048 {
				t.Errorf("mcp-go's handler was given %d bytes, the arguments too: %.200q", len(msg), msg)
			}
		})
	}
}

// Whatever shape a tool call POSTed to /mcp has, the tool gets what mcp-go's own decoding of it gives, and a call
// mcp-go refuses is refused as mcp-go refuses it whole (see checkToolCallShapes).
func TestHTTPToolCallsAsMCPGoDecodesThem(t *testing.T) {
	f := newFixture(t, fixtureOpts{transport: TransportHTTP})
	calls, _ := argumentsTool(f.srv)
	base := serveHTTP(t, f)
	code, hdr, body := do(t, http.MethodPost, base+PathMCP, "", initializeBody, nil)
	sid := hdr.Get("Mcp-Session-Id")
	if code != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %q %s", code, sid, body)
	}
	legacy := map[string]string{"Mcp-Session-Id": sid, "Mcp-Protocol-Version": mcp.ProtocolVersion20251125}
	do(t, http.MethodPost, base+PathMCP, "", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, legacy)
	checkToolCallShapes(t, f, calls, func(id int, line string) map[string]any {
		code, _, body := do(t, http.MethodPost, base+PathMCP, "", line, legacy)
		var answer map[string]any
		if err := json.Unmarshal([]byte(body), &answer); err != nil {
			t.Fatalf("POST of request %d: %d %q", id, code, body)
		}
		return answer
	})
}
