package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/internal/optional"
	"github.com/e2b-mcp/e2b-mcp/state"
)

// Test keys: each is its own team at the emulator.
const (
	aliceKey = "e2b_a11ce0000000000000000000000000000000000a"
	bobKey   = "e2b_b0b0000000000000000000000000000000000b0b"
)

// eras are the protocol versions every tool is exercised in: the stateless core and the last handshake era.
var eras = []string{mcp.ProtocolVersion20260728, mcp.ProtocolVersion20251125}

// keyedClients is a ClientSource with a fixed key per owner; owners without one get ErrNoAPIKey.
type keyedClients struct {
	url  string
	keys map[string]string
}

func (k keyedClients) Client(_ context.Context, owner string) (*e2b.Client, error) {
	key, ok := k.keys[owner]
	if !ok {
		return nil, fmt.Errorf("keyring has no entry for %s: %w", owner, ErrNoAPIKey)
	}
	return e2b.NewClient(e2b.Config{APIKey: key, APIURL: k.url, SandboxURL: k.url, MaxRetries: -1})
}

// env is one emulator and one store shared by any number of MCP connections.
type env struct {
	emu   *e2btest.Server
	store state.Store
	deps  Deps
}

func newEnv(t testing.TB, configure ...func(*Config)) *env {
	t.Helper()
	return newEnvWith(t, e2btest.Options{}, configure...)
}

// newEnvWith is newEnv with an emulator of the given options (its API keys are alice's and bob's).
func newEnvWith(t testing.TB, opts e2btest.Options, configure ...func(*Config)) *env {
	t.Helper()
	opts.APIKeys = []string{aliceKey, bobKey}
	emu, err := e2btest.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emu.Close)
	st, err := state.Open(t.TempDir(), state.Options{Keys: state.StaticKeySource(bytes.Repeat([]byte{7}, 32))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg := Config{}
	for _, f := range configure {
		f(&cfg)
	}
	return &env{emu: emu, store: st, deps: Deps{
		Clients: keyedClients{url: emu.URL(), keys: map[string]string{"alice": aliceKey, "bob": bobKey}},
		Store:   st,
		Config:  cfg,
	}}
}

// e2bClient is a direct client of the emulator, for checking what the tools did.
func (e *env) e2bClient(t testing.TB, key string) *e2b.Client {
	t.Helper()
	c, err := e2b.NewClient(e2b.Config{APIKey: key, APIURL: e.emu.URL(), SandboxURL: e.emu.URL(), MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// envdOf reaches a recorded sandbox's envd directly.
func (e *env) envdOf(t testing.TB, owner, id string) *e2b.Envd {
	t.Helper()
	rec, err := e.store.Sandbox(owner, id)
	if err != nil {
		t.Fatal(err)
	}
	key := aliceKey
	if owner == "bob" {
		key = bobKey
	}
	return envd(e.e2bClient(t, key), rec)
}

// session is one MCP client connected in-process to a server holding All(deps), calling as one Caller.
type session struct {
	c      *client.Client
	caller Caller

	mu            sync.Mutex
	notifications []mcp.JSONRPCNotification
	notified      chan struct{}
}

// connect starts an MCP server with the tools and connects a client at protocol version era. A tool-handler
// middleware puts the caller in the context, as the real server does.
func (e *env) connect(t testing.TB, era string, caller Caller) *session {
	t.Helper()
	return connectDeps(t, e.deps, era, caller)
}

func connectDeps(t testing.TB, deps Deps, era string, caller Caller) *session {
	t.Helper()
	all := All(deps)
	byName := make(map[string]Tool, len(all))
	for _, t := range all {
		byName[t.Tool.Name] = t
	}
	srv := server.NewMCPServer("e2b-mcp-test", "0.0.0",
		server.WithRecovery(),
		server.WithToolCapabilities(false),
		server.WithOutputSchemaValidation(),
		// The part of the server's pipeline that concerns a tool: the caller, and the arguments held to the schema.
		server.WithToolHandlerMiddleware(func(next server.ToolHandlerFunc) server.ToolHandlerFunc {
			return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				if err := byName[req.Params.Name].Check(req.Params.Arguments); err != nil {
					return mcp.NewToolResultError(err.Error()), nil
				}
				return next(WithCaller(ctx, caller), req)
			}
		}),
	)
	srv.AddTools(ServerTools(all)...)
	c, err := client.NewInProcessClient(srv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	s := &session{c: c, caller: caller, notified: make(chan struct{}, 1)}
	ctx := context.Background()
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		s.mu.Lock()
		s.notifications = append(s.notifications, n)
		s.mu.Unlock()
		select {
		case s.notified <- struct{}{}:
		default:
		}
	})
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = era
	req.Params.ClientInfo = mcp.Implementation{Name: "tools-test", Version: "0"}
	if _, err := c.Initialize(ctx, req); err != nil {
		t.Fatalf("initialize at %s: %v", era, err)
	}
	if got := c.ProtocolVersion(); got != era {
		t.Fatalf("negotiated protocol version %q, want %q", got, era)
	}
	return s
}

// callCtx calls a tool and returns the raw result; a protocol-level error fails the test.
func (s *session) callCtx(ctx context.Context, t testing.TB, name string, args map[string]any, meta *mcp.Meta) *mcp.CallToolResult {
	t.Helper()
	req := mcp.CallToolRequest{}
	req.Params.Name = name
	req.Params.Arguments = args
	req.Params.Meta = meta
	res, err := s.c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("%s: protocol error: %v", name, err)
	}
	return res
}

func (s *session) call(t testing.TB, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	return s.callCtx(context.Background(), t, name, args, nil)
}

// ok calls a tool that must succeed and returns its structured result, after checking that the text content is
// the same JSON.
func (s *session) ok(t testing.TB, name string, args map[string]any) map[string]any {
	t.Helper()
	return mustOK(t, name, s.call(t, name, args))
}

func mustOK(t testing.TB, name string, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	if res.IsError {
		t.Fatalf("%s failed: %s", name, resultText(res))
	}
	if res.StructuredContent == nil {
		t.Fatalf("%s: no structuredContent", name)
	}
	var structured, text map[string]any
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &structured); err != nil {
		t.Fatalf("%s: structuredContent is not an object: %s", name, raw)
	}
	if err := json.Unmarshal([]byte(resultText(res)), &text); err != nil {
		t.Fatalf("%s: text content is not the JSON result: %q", name, resultText(res))
	}
	if !reflect.DeepEqual(structured, text) {
		t.Fatalf("%s: text content %s differs from structuredContent %s", name, resultText(res), raw)
	}
	return structured
}

// fail calls a tool that must answer with isError and returns the error text.
func (s *session) fail(t *testing.T, name string, args map[string]any) string {
	t.Helper()
	res := s.call(t, name, args)
	if !res.IsError {
		t.Fatalf("%s succeeded, want an error: %s", name, resultText(res))
	}
	return resultText(res)
}

func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// progress returns the progress notifications received so far.
func (s *session) progress() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, n := range s.notifications {
		if n.Method == string(mcp.MethodNotificationProgress) {
			out = append(out, n.Params.AdditionalFields)
		}
	}
	return out
}

// forEachEra runs f in a fresh environment for each protocol era, with alice calling in session "main".
func forEachEra(t *testing.T, f func(t *testing.T, e *env, s *session), configure ...func(*Config)) {
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			e := newEnv(t, configure...)
			f(t, e, e.connect(t, era, Caller{Owner: "alice", Session: "main"}))
		})
	}
}

// forEachBackend runs f against sandboxes of the emulator and against sandboxes backed by E2B's real envd (the
// conformance suite of the tools' process behaviour), in the current protocol era, with alice calling in
// session "main", with the tools configured by configure. The real half is skipped, with a line saying why, where
// the daemon cannot run.
func forEachBackend(t *testing.T, f func(t *testing.T, e *env, s *session), configure ...func(*Config)) {
	for _, real := range []bool{false, true} {
		name := "emulator"
		if real {
			name = "envd"
		}
		t.Run(name, func(t *testing.T) {
			if real {
				if _, err := e2btest.RealEnvdAvailable(); err != nil {
					why := "not run against the real envd: " + err.Error()
					if e2btest.RealEnvdExpected() {
						optional.Missing(t, why)
					}
					optional.Skip(t, why)
				}
			}
			opts := e2btest.Options{}
			if real {
				opts.Envd = e2btest.RealEnvds()
			}
			e := newEnvWith(t, opts, configure...)
			f(t, e, e.connect(t, eras[0], Caller{Owner: "alice", Session: "main"}))
		})
	}
}

// createSandbox makes a sandbox through the tool and returns its ID.
func (s *session) createSandbox(t *testing.T, args map[string]any) string {
	t.Helper()
	if args == nil {
		args = map[string]any{}
	}
	res := s.ok(t, "e2b_create_sandbox", args)
	id, _ := res["sandbox_id"].(string)
	if id == "" {
		t.Fatalf("create answered no sandbox_id: %v", res)
	}
	return id
}

// exec runs a command that must succeed as a tool call and returns its result.
func (s *session) exec(t *testing.T, id, command string) map[string]any {
	t.Helper()
	return s.ok(t, "e2b_exec", map[string]any{"sandbox_id": id, "command": command})
}

func wantContains(t *testing.T, got string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(got, p) {
			t.Fatalf("%q does not contain %q", got, p)
		}
	}
}

func num(v any) int {
	f, _ := v.(float64)
	return int(f)
}
