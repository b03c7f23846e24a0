package tests

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/internal/optional"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

var cancelRounds = flag.Int("cancel-rounds", 2, "cancelled calls per client and transport in the cancellation tests")

// cancelWait bounds the wait for a cancelled command and everything it started to be gone from the sandbox. It ends
// a hang, it does not measure speed: the command would run for cancelledSleep on its own, so only the cancel can
// make it go within the bound, however loaded the machine.
const cancelWait = 60 * time.Second

// cancelledSleep is how long the cancelled command (and its child) would run if nothing stopped them.
const cancelledSleep = "600"

// cancelBackend is where the sandboxes of a cancellation test live: the suite's emulator, or an emulator whose
// sandboxes are each backed by E2B's real envd.
type cancelBackend struct {
	name string
	emu  *e2btest.Server
}

// cancelBackends are the emulator and, where it can run, the real envd behind a control-plane stand-in.
func cancelBackends(t testing.TB) []cancelBackend {
	t.Helper()
	backends := []cancelBackend{{"emulator", the.emu}}
	if _, err := e2btest.RealEnvdAvailable(); err != nil {
		t.Logf("not run against the real envd: %v", err)
		return backends
	}
	emu, err := e2btest.New(e2btest.Options{Envd: e2btest.RealEnvds()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emu.Close)
	return append(backends, cancelBackend{"envd", emu})
}

// forEachBackend runs f as a parallel subtest per backend; the real envd's subtest is skipped (recorded) where it
// cannot run.
func forEachBackend(t *testing.T, f func(t *testing.T, b cancelBackend)) {
	backends := cancelBackends(t)
	for _, name := range []string{"emulator", "envd"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel() // f makes its own owner and server on either backend
			for _, b := range backends {
				if b.name == name {
					f(t, b)
					return
				}
			}
			_, err := e2btest.RealEnvdAvailable()
			optional.Skip(t, "not run against the real envd: "+err.Error())
		})
	}
}

// serveOn is serveArgs with the control plane and the sandboxes of b.
func (x *h) serveOn(b cancelBackend, owner, session string, extra ...string) []string {
	return x.serveArgsAt(b.emu, owner, session, append([]string{"--policy", x.allowAll()}, extra...)...)
}

// The official TypeScript SDK client aborts calls of `sleep 600` (it sends notifications/cancelled) over stdio,
// streamable HTTP and SSE, in a session whose earlier calls produced big output, were killed by timeout_ms and
// streamed progress: each time the command and its children are gone from the sandbox, long before they would end.
func TestCancelStopsTheCommandTypeScript(t *testing.T) {
	t.Parallel()
	node := requireNode(t)
	forEachBackend(t, func(t *testing.T, b cancelBackend) {
		for _, tr := range []string{"stdio", "http", "sse"} {
			t.Run(tr, func(t *testing.T) {
				t.Parallel() // its own owner, server and sandbox (and envd)
				x := newH(t)
				owner := x.owner("cancel")
				x.login(owner)
				args := []string{strconv.Itoa(*cancelRounds), strconv.FormatInt(cancelWait.Milliseconds(), 10), cancelledSleep, tr}
				if tr == "stdio" {
					args = append(args, append([]string{the.bin}, x.serveOn(b, owner, "js-cancel")...)...)
				} else {
					tokens := x.path("tokens.json")
					tok := x.addToken(owner, tokens)
					srv := x.startHTTP(append(x.serveOn(b, owner, "js-cancel"), "--transport", tr, "--tokens-file", tokens)...)
					args = append(args, srv.base, tok, "js-cancel")
				}
				x.runCancelScript(node, b, args...)
			})
		}
	})
}

// runCancelScript runs tests/js/cancel.mjs and checks that every round passed.
func (x *h) runCancelScript(node string, b cancelBackend, args ...string) {
	x.t.Helper()
	ctx, cancel := context.WithTimeout(x.t.Context(), time.Duration(2+*cancelRounds)*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join("js", "cancel.mjs")}, args...)...)
	cmd.Env = x.env()
	stdout, stderr := x.capture("node cancel stdout"), x.capture("node cancel stderr")
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Run(); err != nil {
		x.t.Fatalf("cancel.mjs %s on the %s: %v\nstdout:\n%s\nstderr:\n%s", args[3], b.name, err, stdout, stderr)
	}
	last, err := lastJSONLine(stdout.String())
	if err != nil || last["ok"] != true {
		x.t.Fatalf("cancel.mjs %s did not finish:\n%s\nstderr:\n%s", args[3], stdout, stderr)
	}
	the.noteSandbox(str(last, "sandbox_id"))
	x.t.Logf("TypeScript client, %s, %s: %d cancels, the slowest gone %v ms after the abort", args[3], b.name,
		*cancelRounds, last["worst_ms"])
}

// cancelWay is how an mcp-go client gives up on a call.
type cancelWay struct {
	name    string
	version string // protocol version the client speaks
	http    bool   // streamable HTTP, else stdio
	// notify sends notifications/cancelled for the call; without it the call's context is cancelled, which over
	// stdio sends the notification and over HTTP closes the request's stream.
	notify bool
}

// mcp-go clients give up on calls of `sleep 600` every way they can: over stdio (notifications/cancelled), over
// streamable HTTP in both protocol eras by closing the request's stream and by notifications/cancelled; each time
// the command and its children are gone from the sandbox, long before they would end, in a session whose earlier calls
// produced big output, were killed by timeout_ms and streamed progress.
func TestCancelStopsTheCommand(t *testing.T) {
	t.Parallel()
	ways := []cancelWay{
		{name: "stdio-2025-11-25", version: mcp.ProtocolVersion20251125},
		{name: "stdio-2026-07-28", version: mcp.ProtocolVersion20260728},
		{name: "http-2025-11-25-closed-stream", version: mcp.ProtocolVersion20251125, http: true},
		{name: "http-2026-07-28-closed-stream", version: mcp.ProtocolVersion20260728, http: true},
		{name: "http-2025-11-25-notification", version: mcp.ProtocolVersion20251125, http: true, notify: true},
		{name: "http-2026-07-28-notification", version: mcp.ProtocolVersion20260728, http: true, notify: true},
	}
	forEachBackend(t, func(t *testing.T, b cancelBackend) {
		for _, way := range ways {
			t.Run(way.name, func(t *testing.T) {
				t.Parallel() // its own owner, server and sandbox (and envd)
				x := newH(t)
				owner := x.owner("cancel")
				x.login(owner)
				var c *client.Client
				if way.http {
					tokens := x.path("tokens.json")
					tok := x.addToken(owner, tokens)
					srv := x.startHTTP(append(x.serveOn(b, owner, "go-cancel"), "--transport", "http", "--tokens-file", tokens)...)
					c = x.connectHTTPVersion(srv.base, tok, "go-cancel", way.version)
				} else {
					c = x.startStdio(clientOpts{version: way.version}, x.serveOn(b, owner, "go-cancel")...).Client
				}
				id := create(t, c, map[string]any{"title": "cancel " + way.name})
				p := newProcesses(t, b, id)
				var worst time.Duration
				for round := range *cancelRounds {
					earlierCall(t, c, id, round)
					marker := fmt.Sprintf("go-cancel-%d-%s", round, randomHex(6))
					gone := cancelCall(t, c, way, p, id, marker)
					worst = max(worst, gone)
				}
				t.Logf("mcp-go client, %s, %s: %d cancels, the slowest gone %v after the cancel", way.name, b.name, *cancelRounds, worst)
				if got := str(ok(t, c, "e2b_exec", map[string]any{"sandbox_id": id, "command": "echo still here"}), "stdout"); got != "still here\n" {
					t.Fatalf("exec after the cancels: %q", got)
				}
			})
		}
	})
}

// connectHTTPVersion is connectHTTP speaking the given protocol version.
func (x *h) connectHTTPVersion(base, token, session, version string) *client.Client {
	x.t.Helper()
	headers := map[string]string{"Authorization": "Bearer " + token, "X-E2B-MCP-Session": session}
	tr, err := transport.NewStreamableHTTP(base+"/mcp", transport.WithHTTPHeaders(headers))
	if err != nil {
		x.t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithProtocolVersion(version))
	x.t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(x.t.Context(), 30*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		x.t.Fatal(err)
	}
	if _, err := c.Initialize(ctx, initRequest(version)); err != nil {
		x.t.Fatalf("initialize over HTTP (%s): %v", version, err)
	}
	return c
}

// earlierCall makes, by turns, one of the calls that used to leave the next cancel slow or lost: a big output, a
// command killed by timeout_ms, a command streamed as progress.
func earlierCall(t *testing.T, c *client.Client, id string, round int) {
	t.Helper()
	switch round % 3 {
	case 0:
		if out := ok(t, c, "e2b_exec", map[string]any{"sandbox_id": id, "command": "seq 1 200000"}); out["truncated"] != true {
			t.Fatalf("seq 1 200000 was not cut: %v", out["total_lines"])
		}
	case 1:
		out := ok(t, c, "e2b_exec", map[string]any{"sandbox_id": id, "command": "sleep 31 | cat; echo never", "timeout_ms": 500})
		if !strings.Contains(str(out, "error"), "timeout") {
			t.Fatalf("the timed-out command: %v", out)
		}
	case 2:
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		res, err := callCtx(ctx, c, "e2b_exec", map[string]any{"sandbox_id": id, "command": "for i in $(seq 1 10); do echo tick $i; sleep 0.05; done"},
			&mcp.Meta{ProgressToken: "earlier-" + randomHex(4)})
		if err != nil || res.IsError || !strings.Contains(str(fields(t, res), "stdout"), "tick 10") {
			t.Fatalf("the streamed command: %v %v", err, res)
		}
	}
}

// cancelCall starts `sleep 600` (with a child of its own) marked by marker, waits until it runs, gives up on the
// call as way says, and returns how long after that the command's processes were all gone from the sandbox.
func cancelCall(t *testing.T, c *client.Client, way cancelWay, p *processes, id, marker string) time.Duration {
	t.Helper()
	command := fmt.Sprintf("(sleep %[1]s; echo %[2]s) & sleep %[1]s; echo %[2]s", cancelledSleep, marker)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	answered := make(chan error, 1)
	reqID := "cancel-" + marker
	go func() {
		if !way.notify {
			_, err := callCtx(ctx, c, "e2b_exec", map[string]any{"sandbox_id": id, "command": command}, &mcp.Meta{ProgressToken: marker})
			answered <- err
			return
		}
		// A request of our own, so that its ID is known to the notification and its stream stays open.
		meta := map[string]any{"progressToken": marker}
		maps.Copy(meta, modernMeta(way.version))
		_, err := c.GetTransport().SendRequest(t.Context(), transport.JSONRPCRequest{
			JSONRPC: mcp.JSONRPC_VERSION,
			ID:      mcp.NewRequestId(reqID),
			Method:  string(mcp.MethodToolsCall),
			Header:  http.Header{mcp.HeaderMethod: {string(mcp.MethodToolsCall)}, mcp.HeaderName: {"e2b_exec"}},
			Params: map[string]any{"name": "e2b_exec", "arguments": map[string]any{"sandbox_id": id, "command": command},
				"_meta": meta},
		})
		answered <- err
	}()
	waitfor.Until(t, 30*time.Second, "the command runs in the sandbox", func() bool { return p.count(marker) >= 2 })
	cancelled := time.Now()
	if way.notify {
		var n mcp.JSONRPCNotification
		n.JSONRPC = mcp.JSONRPC_VERSION
		n.Method = string(mcp.MethodNotificationCancelled)
		n.Params.AdditionalFields = map[string]any{"requestId": reqID, "reason": "the user pressed Stop"}
		n.Params.Meta = modernMeta(way.version)
		if err := c.GetTransport().SendNotification(t.Context(), n); err != nil {
			t.Fatalf("sending notifications/cancelled: %v", err)
		}
	} else {
		cancel()
	}
	waitfor.Until(t, cancelWait, "the cancelled command to be gone from the sandbox", func() bool { return p.count(marker) == 0 })
	gone := time.Since(cancelled)
	select {
	case err := <-answered:
		if !way.notify && !errors.Is(err, context.Canceled) {
			t.Errorf("the cancelled call returned %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("the cancelled call never returned")
	}
	return gone
}

// modernMeta is the _meta that protocol 2026-07-28 wants on every message (the client adds it to the requests it
// makes itself, not to those sent through its transport); none for an earlier version.
func modernMeta(version string) map[string]any {
	if version != mcp.ProtocolVersion20260728 {
		return nil
	}
	return map[string]any{mcp.MetaKeyProtocolVersion: version,
		mcp.MetaKeyClientInfo: map[string]any{"name": "e2b-mcp-e2e", "version": "1"}, mcp.MetaKeyClientCapabilities: map[string]any{}}
}

// processes watches a sandbox's processes through envd directly, with the sandbox's own token, as E2B's SDK would.
type processes struct {
	t    *testing.T
	envd *e2b.Envd
}

func newProcesses(t *testing.T, b cancelBackend, id string) *processes {
	t.Helper()
	sb, found := b.emu.Sandbox(id)
	if !found {
		t.Fatalf("the emulator has no sandbox %s", id)
	}
	ec, err := e2b.NewClient(e2b.Config{APIURL: b.emu.URL(), SandboxURL: b.emu.URL()})
	if err != nil {
		t.Fatal(err)
	}
	return &processes{t: t, envd: ec.Envd(e2b.SandboxConn{ID: id, EnvdVersion: sb.EnvdVersion, AccessToken: sb.AccessToken})}
}

// count is how many processes of the sandbox have marker in their command line, as pgrep run in the sandbox
// sees them (envd lists only the processes it started, not their children). The pattern's first letter in
// brackets keeps pgrep's own shell out of the count.
func (p *processes) count(marker string) int {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.t.Context(), 30*time.Second)
	defer cancel()
	var out strings.Builder
	_, err := p.envd.RunCommand(ctx, fmt.Sprintf("pgrep -fc '[%c]%s'; true", marker[0], marker[1:]), e2b.CommandOptions{
		OnOutput: func(kind e2b.EventKind, data []byte) {
			if kind == e2b.EventStdout {
				out.Write(data)
			}
		},
	})
	if err != nil {
		p.t.Fatalf("counting the sandbox's processes: %v", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(out.String()))
	if err != nil {
		p.t.Fatalf("pgrep -fc answered %q", out.String())
	}
	return n
}
