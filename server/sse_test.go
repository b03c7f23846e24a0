package server

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

var (
	sseRounds  = flag.Int("sse-rounds", 3, "rounds of cancelled, timed-out and short calls in TestSSECallsAfterEarlyEndedCalls")
	sseBodyLag = flag.Duration("sse-body-lag", 20*time.Millisecond, "the edge proxy's lag in reading request bodies (e2btest.EdgeProxyOptions.BodyLag)")
)

// sseTarget is a server over SSE whose sandboxes' envd is reached through an edge proxy, and an mcp-go SSE
// client attached to it.
type sseTarget struct {
	emu   *e2btest.Server
	proxy *e2btest.EdgeProxy
	base  string
	c     *client.Client
}

// newSSETarget serves a server over SSE on a loopback port. envd is the envd behind the edge proxy: the
// emulator's (nil) or a real one, to which sandboxes the emulator creates are routed.
func newSSETarget(t *testing.T, envd *e2btest.RealEnvd) *sseTarget {
	t.Helper()
	emu, err := e2btest.New(e2btest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emu.Close)
	po := e2btest.EdgeProxyOptions{Target: emu.URL(), BodyLag: *sseBodyLag}
	if envd != nil {
		po.Target = envd.URL
		po.AccessToken = func(id, tok string) (string, bool) {
			sb, ok := emu.Sandbox(id)
			return envd.AccessToken, ok && tok == sb.AccessToken
		}
	}
	proxy, err := e2btest.NewEdgeProxy(po)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	srv, err := New(Config{
		Owner:     "alice",
		Session:   "s1",
		Transport: TransportSSE,
		StateDir:  t.TempDir(),
		// The control plane at the emulator, every sandbox's envd through the edge proxy.
		Backend: E2B{Location: e2b.Config{APIURL: emu.URL(), SandboxURL: proxy.URL()}},
		Secrets: newTestSecrets(),
		Logger:  testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.ServeHTTP(ctx, ln) }()
	t.Cleanup(func() {
		stop()
		waitfor.Recv(t, served, 30*time.Second, "the SSE server to stop")
		srv.Close()
	})
	x := &sseTarget{emu: emu, proxy: proxy, base: "http://" + ln.Addr().String()}
	x.c = x.connect(t)
	return x
}

// connect attaches a new mcp-go SSE client.
func (x *sseTarget) connect(t *testing.T) *client.Client {
	t.Helper()
	c, err := client.NewSSEMCPClient(x.base + PathSSE)
	if err != nil {
		t.Fatal(err)
	}
	initialize(t, c, mcp.ProtocolVersion20251125)
	return c
}

// call makes a tool call within d and returns its text, or an error for a failed call or an error result.
func call(ctx context.Context, c *client.Client, d time.Duration, tool string, args map[string]any) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var req mcp.CallToolRequest
	req.Params.Name, req.Params.Arguments = tool, args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		return "", err
	}
	text := resultText(res)
	if res.IsError {
		return text, fmt.Errorf("%s: error result: %s", tool, text)
	}
	return text, nil
}

// cancelledCall starts an e2b_exec of command as a raw request with its own ID, and cancels it with
// notifications/cancelled (mcp-go's SSE client sends none when a call's context ends) once it has run for a
// moment. It waits for the server's answer, if any, for a bounded time.
func cancelledCall(ctx context.Context, c *client.Client, id, sandboxID, command string) error {
	tr := c.GetTransport()
	answered := make(chan error, 1)
	go func() {
		actx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		_, err := tr.SendRequest(actx, transport.JSONRPCRequest{
			JSONRPC: mcp.JSONRPC_VERSION,
			ID:      mcp.NewRequestId(id),
			Method:  string(mcp.MethodToolsCall),
			Params:  map[string]any{"name": "e2b_exec", "arguments": map[string]any{"sandbox_id": sandboxID, "command": command}},
		})
		answered <- err
	}()
	time.Sleep(300 * time.Millisecond)
	var n mcp.JSONRPCNotification
	n.JSONRPC = mcp.JSONRPC_VERSION
	n.Method = string(mcp.MethodNotificationCancelled)
	n.Params.AdditionalFields = map[string]any{"requestId": id, "reason": "the test cancels it"}
	if err := tr.SendNotification(ctx, n); err != nil {
		return fmt.Errorf("sending notifications/cancelled: %w", err)
	}
	select {
	case err := <-answered:
		return err
	case <-time.After(30 * time.Second):
		return fmt.Errorf("no answer to the cancelled call within 30s")
	}
}

// Calls that ended early (one cancelled by the client, one killed by its timeout while the pipeline it started
// lives on) leave nothing behind that breaks the next calls: over SSE, through a Go reverse proxy in front of
// envd as E2B's edge is one, against the emulator and E2B's real envd. The proxy is slow to finish reading
// request bodies, as a busy host can be, which cut every answer to a body sent with a Content-Length.
func TestSSECallsAfterEarlyEndedCalls(t *testing.T) {
	for _, target := range []string{"emulator", "envd"} {
		t.Run(target, func(t *testing.T) {
			var envd *e2btest.RealEnvd
			if target == "envd" {
				envd = startRealEnvd(t)
			}
			ctx, cancel := context.WithTimeout(t.Context(), time.Duration(30+10**sseRounds)*time.Second)
			defer cancel()
			x := newSSETarget(t, envd)
			id := createSandbox(t, x.c)
			failures := 0
			fail := func(round int, what string, err error) {
				failures++
				t.Errorf("round %d, %s: %v", round, what, err)
			}
			for round := range *sseRounds {
				// The cancelled call's answer may or may not come (the server may drop it); either is fine.
				_ = cancelledCall(ctx, x.c, fmt.Sprintf("cancelled-%d", round), id, "sleep 30; echo never")

				text, err := call(ctx, x.c, 30*time.Second, "e2b_exec", map[string]any{
					"sandbox_id": id, "command": "sleep 31 | cat; echo never", "timeout_ms": 1000})
				if err != nil {
					fail(round, "the timed-out call", err)
				} else if !strings.Contains(text, "killed by the timeout") {
					fail(round, "the timed-out call", fmt.Errorf("answered %s", text))
				}

				for i, c := range []struct{ command, want string }{
					{"echo short-" + fmt.Sprint(round), "short-" + fmt.Sprint(round) + "\n"},
					{"read x; echo got:$x", "got:\n"},
					{"pgrep -c -x nonexistent-process-name; true", "0\n"},
					{"printf '%s' done", "done"},
				} {
					text, err := call(ctx, x.c, 30*time.Second, "e2b_exec", map[string]any{"sandbox_id": id, "command": c.command})
					var out struct {
						Stdout   string `json:"stdout"`
						ExitCode int    `json:"exit_code"`
					}
					switch {
					case err != nil:
						fail(round, fmt.Sprintf("short call %d", i), err)
					case json.Unmarshal([]byte(text), &out) != nil || out.Stdout != c.want || out.ExitCode != 0:
						fail(round, fmt.Sprintf("short call %d (%s)", i, c.command), fmt.Errorf("answered %s", text))
					}
				}
			}
			t.Logf("%d rounds over SSE against the %s: %d failed calls", *sseRounds, target, failures)
		})
	}
}

// running reports whether a process whose command line contains marker runs in the sandbox, as envd lists them.
func (x *sseTarget) running(t *testing.T, id, marker string) bool {
	t.Helper()
	return commandRuns(t, x.emu, x.proxy.URL(), id, marker)
}

// commandRuns reports whether a command whose command line holds marker runs in sandbox id of emu, as its envd
// (reached at sandboxURL) lists them.
func commandRuns(t *testing.T, emu *e2btest.Server, sandboxURL, id, marker string) bool {
	t.Helper()
	sb, ok := emu.Sandbox(id)
	if !ok {
		t.Fatalf("the emulator has no sandbox %s", id)
	}
	c, err := e2b.NewClient(e2b.Config{APIURL: emu.URL(), SandboxURL: sandboxURL})
	if err != nil {
		t.Fatal(err)
	}
	procs, err := c.Envd(e2b.SandboxConn{ID: id, EnvdVersion: sb.EnvdVersion, AccessToken: sb.AccessToken}).ListProcesses(t.Context())
	if err != nil {
		t.Fatalf("listing the sandbox's processes: %v", err)
	}
	for _, p := range procs {
		if strings.Contains(strings.Join(append([]string{p.Config.Cmd}, p.Config.Args...), " "), marker) {
			return true
		}
	}
	return false
}

// An SSE client that disconnects ends its call, and the call's command is killed in the sandbox, as over stdio
// and streamable HTTP: mcp-go runs SSE calls detached from the client's connection.
func TestSSEDisconnectCancelsTheCall(t *testing.T) {
	for _, target := range []string{"emulator", "envd"} {
		t.Run(target, func(t *testing.T) {
			var envd *e2btest.RealEnvd
			if target == "envd" {
				envd = startRealEnvd(t)
			}
			x := newSSETarget(t, envd)
			id := createSandbox(t, x.c)

			leaving := x.connect(t)
			answered := make(chan error, 1)
			go func() {
				_, err := call(t.Context(), leaving, time.Minute, "e2b_exec", map[string]any{"sandbox_id": id, "command": "exec sleep 4243"})
				answered <- err
			}()
			waitfor.Until(t, 30*time.Second, "the command runs in the sandbox", func() bool { return x.running(t, id, "sleep 4243") })
			disconnected := time.Now()
			if err := leaving.Close(); err != nil {
				t.Fatalf("closing the SSE client: %v", err)
			}
			// The kill is a command of its own through the edge proxy, which a loaded machine can slow down.
			waitfor.Until(t, 30*time.Second, "the command is gone from the sandbox", func() bool { return !x.running(t, id, "sleep 4243") })
			t.Logf("the command was killed %v after the client disconnected", time.Since(disconnected).Round(time.Millisecond))
			waitfor.Recv(t, answered, 30*time.Second, "the disconnected client's call to return")

			// The other client's session is untouched.
			if text, err := call(t.Context(), x.c, 30*time.Second, "e2b_exec", map[string]any{"sandbox_id": id, "command": "echo still here"}); err != nil || !strings.Contains(text, "still here") {
				t.Fatalf("a call on the other connection: %q %v", text, err)
			}
		})
	}
}
