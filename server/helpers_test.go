package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/audit"
	"github.com/e2b-mcp/e2b-mcp/credentials"
	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// eras are the protocol versions every feature is tested in: the stateless core and the last handshake era.
var eras = []string{mcp.ProtocolVersion20260728, mcp.ProtocolVersion20251125}

// fixture is a Server pointed at an emulator, with a state directory of its own.
type fixture struct {
	emu *e2btest.Server
	srv *Server
	dir string
}

type fixtureOpts struct {
	policy     string // policy YAML; "" means the built-in policy
	tokensFile string
	transport  string
	emulator   e2btest.Options
	mutate     func(*Config, *e2btest.Server)
}

func newFixture(t testing.TB, o fixtureOpts) *fixture {
	t.Helper()
	emu, err := e2btest.New(o.emulator)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emu.Close)
	f := &fixture{emu: emu, dir: t.TempDir()}
	cfg := Config{
		Owner:      "alice",
		Session:    "s1",
		StateDir:   f.dir,
		Transport:  o.transport,
		TokensFile: o.tokensFile,
		Backend:    emulatorAt(emu.URL()),
		Secrets:    newTestSecrets(),
		Logger:     testLogger(t),
	}
	if o.policy != "" {
		cfg.PolicyFile = filepath.Join(f.dir, "policy.yaml")
		if err := os.WriteFile(cfg.PolicyFile, []byte(o.policy), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if o.mutate != nil {
		o.mutate(&cfg, emu)
	}
	f.srv, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.srv.Close() })
	return f
}

// testLogger sends the server's logs to the test log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// connect attaches an in-process mcp-go client speaking version, with an elicitation handler or none.
func connect(t testing.TB, srv *Server, version string, elicit client.ElicitationHandler) *client.Client {
	t.Helper()
	opts := []client.ClientOption{client.WithProtocolVersion(version)}
	if elicit != nil {
		opts = append(opts, client.WithElicitationHandler(elicit))
	}
	c, err := client.NewInProcessClientWithOptions(srv.mcp, opts...)
	if err != nil {
		t.Fatal(err)
	}
	initialize(t, c, version)
	return c
}

func initialize(t testing.TB, c *client.Client, version string) {
	t.Helper()
	// The SSE transport's stream lives as long as Start's context: the test's, not the handshake's.
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	t.Cleanup(func() { c.Close() })
	var req mcp.InitializeRequest
	req.Params.ProtocolVersion = version
	req.Params.ClientInfo = mcp.Implementation{Name: "server-test", Version: "1"}
	res, err := c.Initialize(ctx, req)
	if err != nil {
		t.Fatalf("initialize: %v", err)
	}
	if res.ProtocolVersion != version {
		t.Fatalf("negotiated protocol %s, want %s", res.ProtocolVersion, version)
	}
}

func callTool(t testing.TB, c *client.Client, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var req mcp.CallToolRequest
	req.Params.Name = tool
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return res
}

// mustOK calls a tool that must succeed and returns its structured result.
func mustOK(t testing.TB, c *client.Client, tool string, args map[string]any) map[string]any {
	t.Helper()
	res := callTool(t, c, tool, args)
	if res.IsError {
		t.Fatalf("%s %v: tool error: %s", tool, args, resultText(res))
	}
	var raw []byte
	switch {
	case len(res.RawStructuredContent) > 0:
		raw = res.RawStructuredContent
	case res.StructuredContent != nil:
		raw, _ = json.Marshal(res.StructuredContent)
	default:
		raw = []byte(resultText(res))
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: result is not a JSON object: %s", tool, raw)
	}
	return m
}

// mustFail calls a tool that must answer with isError and returns the text.
func mustFail(t *testing.T, c *client.Client, tool string, args map[string]any) string {
	t.Helper()
	res := callTool(t, c, tool, args)
	if !res.IsError {
		t.Fatalf("%s %v: want a tool error, got %s", tool, args, resultText(res))
	}
	return resultText(res)
}

func createSandbox(t testing.TB, c *client.Client) string {
	t.Helper()
	id, _ := mustOK(t, c, "e2b_create_sandbox", map[string]any{"title": "test"})["sandbox_id"].(string)
	if id == "" {
		t.Fatal("e2b_create_sandbox answered no sandbox_id")
	}
	return id
}

func listIDs(t *testing.T, c *client.Client) []string {
	t.Helper()
	out := mustOK(t, c, "e2b_list_sandboxes", map[string]any{})
	list, _ := out["sandboxes"].([]any)
	var ids []string
	for _, e := range list {
		if m, ok := e.(map[string]any); ok {
			id, _ := m["sandbox_id"].(string)
			ids = append(ids, id)
		}
	}
	return ids
}

// auditEntries reads the fixture's audit log.
func (f *fixture) auditEntries(t *testing.T) []audit.Entry {
	t.Helper()
	entries, err := audit.Read(f.dir, audit.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	return entries
}

// elicitor answers approval questions and remembers them.
type elicitor struct {
	action  mcp.ElicitationResponseAction
	content any

	mu       sync.Mutex
	messages []string
}

func (e *elicitor) Elicit(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	e.mu.Lock()
	e.messages = append(e.messages, req.Params.Message)
	e.mu.Unlock()
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: e.action, Content: e.content}}, nil
}

func (e *elicitor) asked() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.messages...)
}

// emulatorAt is the e2b backend pointed at an emulator (or a proxy in front of one) at url.
func emulatorAt(url string) E2B { return E2B{Location: e2b.Config{APIURL: url, SandboxURL: url}} }

// testSecrets is a secret store in memory where every owner has logged in with testKey(owner) unless a test
// stores another key or deletes it; the server reads keys, credentials and its data key from it as it would from
// the OS keyring.
type testSecrets struct {
	mu      sync.Mutex
	secrets map[string]string
	deleted map[string]bool
}

func newTestSecrets() *testSecrets {
	return &testSecrets{secrets: map[string]string{}, deleted: map[string]bool{}}
}

func (s *testSecrets) Secret(account string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.secrets[account]; ok {
		return v, nil
	}
	if !s.deleted[account] && credentials.CheckOwner(account) == nil { // an owner's API key
		return testKey(account), nil
	}
	return "", fmt.Errorf("%w: %q", credentials.ErrNotFound, account)
}

func (s *testSecrets) SetSecret(account, secret string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.secrets[account] = secret
	delete(s.deleted, account)
	return nil
}

func (s *testSecrets) DeleteSecret(account string) error {
	_, err := s.Secret(account)
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.secrets, account)
	s.deleted[account] = true
	return err
}

func (s *testSecrets) String() string { return "the test's secrets" }

// testKey is owner's API key at a test's emulator: a fixed function of the owner, so that each owner is a team
// of its own there, as with real keys.
func testKey(owner string) string {
	sum := sha256.Sum256([]byte("e2b-mcp test\x00" + owner))
	return "e2b_" + hex.EncodeToString(sum[:20])
}

// awaitRun waits for Run to return (after its stdin closed), failing the test instead of hanging when it does not.
func awaitRun(t *testing.T, done <-chan error) error {
	t.Helper()
	return waitfor.Recv(t, done, 30*time.Second, "Run to return after its stdin closed")
}

// stdioClient serves srv over stdio (ServeStdio on pipes) to an mcp-go client of protocol 2025-11-25, until the
// test ends.
func stdioClient(t testing.TB, srv *Server) *client.Client {
	t.Helper()
	c, _ := stdioClientEnding(t, srv)
	return c
}

// stdioClientEnding is stdioClient, and the error that ended the client's reading of the server's output, once it
// has.
func stdioClientEnding(t testing.TB, srv *Server) (*client.Client, <-chan error) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.ServeStdio(ctx, inR, outW) }()
	// The server's output ends as a server process's does when it exits: its end of the pipe closes, and the client
	// reads io.EOF. Closing the client's own end instead would end its read with io.ErrClosedPipe, which mcp-go's
	// client logs as an error.
	t.Cleanup(func() {
		stop()
		inW.Close()
		outW.Close()
		waitfor.Recv(t, served, 30*time.Second, "the stdio server to stop")
	})
	out := &readEnd{r: outR, ended: make(chan error, 1)}
	c := client.NewClient(transport.NewIO(out, inW, io.NopCloser(strings.NewReader(""))))
	initialize(t, c, mcp.ProtocolVersion20251125)
	return c, out.ended
}

// readEnd is r, and the error that ended its reading.
type readEnd struct {
	r     io.Reader
	ended chan error
}

func (e *readEnd) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil {
		select {
		case e.ended <- err:
		default: // read again after its end
		}
	}
	return n, err
}
