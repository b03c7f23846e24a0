package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/zalando/go-keyring"

	"github.com/e2b-mcp/e2b-mcp/credentials"
	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/state"
	"github.com/e2b-mcp/e2b-mcp/tools"
)

// The owner's key is read from the keyring on every call: no key gives the ConnectionRequired text and no
// request to E2B; a login or a new key takes effect on the next call without a restart.
func TestKeyringClientsReadKeyEveryCall(t *testing.T) {
	keyring.MockInit()
	kr := credentials.Keyring{Service: "e2b-mcp-server-test"}
	f := newFixture(t, fixtureOpts{mutate: func(c *Config, emu *e2btest.Server) {
		c.Secrets = kr
	}})
	c := connect(t, f.srv, mcp.ProtocolVersion20260728, nil)

	mark := len(f.emu.Requests())
	msg := mustFail(t, c, "e2b_create_sandbox", map[string]any{})
	want := "No E2B API key is connected for alice. Open http://127.0.0.1:"
	if !strings.HasPrefix(msg, want) || !strings.Contains(msg, "or run `e2b-mcp auth login` in a terminal") {
		t.Errorf("without a key: %q", msg)
	}
	for _, r := range f.emu.Requests()[mark:] {
		if r.Header.Get("X-API-Key") != "" {
			t.Errorf("a request carried an API key without login: %s %s", r.Method, r.Path)
		}
	}

	key1 := "e2b_" + strings.Repeat("1a", 20)
	if err := credentials.SetAPIKey(kr, "alice", key1); err != nil {
		t.Fatal(err)
	}
	id := createSandbox(t, c)
	if sb, _ := f.emu.Sandbox(id); sb.Team != key1 {
		t.Error("the sandbox was not made with the stored key")
	}

	key2 := "e2b_" + strings.Repeat("2b", 20)
	if err := credentials.SetAPIKey(kr, "alice", key2); err != nil {
		t.Fatal(err)
	}
	id2 := createSandbox(t, c)
	if sb, _ := f.emu.Sandbox(id2); sb.Team != key2 {
		t.Error("a new key did not take effect on the next call")
	}

	if err := credentials.DeleteAPIKey(kr, "alice"); err != nil {
		t.Fatal(err)
	}
	if msg := mustFail(t, c, "e2b_manage_sandbox", map[string]any{"sandbox_id": id2, "action": "pause"}); !strings.HasPrefix(msg, want) {
		t.Errorf("after logout: %q", msg)
	}
	if sb, _ := f.emu.Sandbox(id2); sb.State != "running" {
		t.Errorf("a call without a key paused the sandbox")
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The local backend runs the emulator in-process: tools work without any keyring entry at all (neither an API
// key nor the data key), loudly, with records that vanish with the emulated sandboxes.
func TestLocalBackend(t *testing.T) {
	keyring.MockInit() // an empty keyring
	dir := t.TempDir()
	var logs syncBuffer
	srv, err := New(Config{
		Owner:    "alice",
		StateDir: dir,
		Backend:  Local{},
		Logger:   slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			srv.Close()
		}
	}()
	if !strings.Contains(logs.String(), "LOCAL BACKEND: sandboxes are emulated on this machine") {
		t.Errorf("no loud local-backend line in the log:\n%s", logs.String())
	}
	if srv.LocalURL() == "" {
		t.Fatal("no emulator URL")
	}
	for _, version := range eras {
		c := connect(t, srv, version, nil)
		id := createSandbox(t, c)
		if ids := listIDs(t, c); !slices.Contains(ids, id) {
			t.Errorf("%s: list %v lacks %s", version, ids, id)
		}
	}
	if _, err := keyring.Get(credentials.Service, credentials.DataKeyAccount); err == nil {
		t.Error("the local backend stored a data key in the keyring")
	}
	if _, err := os.Stat(filepath.Join(dir, state.FileName)); err == nil {
		t.Error("the local backend wrote into the real state store")
	}
	keys := srv.backend.local.keys
	if keys.key("alice") == keys.key("bob") || credentials.CheckAPIKeyForm(keys.key("alice")) != nil {
		t.Error("local keys must be per owner and of E2B's form")
	}
	checkLocalEmulatorClosed(t, srv.LocalURL(), srv.Store())

	storeDir := filepath.Dir(srv.Store().Location())
	srv.Close()
	closed = true
	if _, err := os.Stat(storeDir); !os.IsNotExist(err) {
		t.Errorf("the local records outlived the server: %v", err)
	}
}

// checkLocalEmulatorClosed plays a local user (or a web page) who finds the local backend's emulator on its
// loopback port: a key computed from the owner's name (as the backend once made them) or a key of one's own gets
// neither the owner's sandboxes and envd tokens nor a sandbox of its own, and envd wants the sandbox's token.
func checkLocalEmulatorClosed(t *testing.T, url string, store state.Store) {
	t.Helper()
	sum := sha256.Sum256([]byte("e2b-mcp local backend\x00alice"))
	derived := "e2b_" + hex.EncodeToString(sum[:20])
	recs, err := store.SessionSandboxes("alice", DefaultSession)
	if err != nil || len(recs) == 0 {
		t.Fatalf("alice's records: %v %v", recs, err)
	}
	id := recs[0].ID
	for _, try := range []struct{ name, method, path, key string }{
		{"list with the owner-derived key", http.MethodGet, "/v2/sandboxes", derived},
		{"connect with the owner-derived key", http.MethodPost, "/sandboxes/" + id + "/connect", derived},
		{"create with a key of one's own", http.MethodPost, "/sandboxes", "e2b_" + strings.Repeat("ab", 20)},
	} {
		req, _ := http.NewRequest(try.method, url+try.path, strings.NewReader(`{"templateID":"base","timeout":60}`))
		req.Header.Set("X-API-Key", try.key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: HTTP %d %s, want 401", try.name, resp.StatusCode, body)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, url+"/filesystem.Filesystem/Stat", strings.NewReader(`{"path":"/home/user"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("E2b-Sandbox-Id", id)
	req.Header.Set("E2b-Sandbox-Port", "49983")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("envd without the sandbox's token: HTTP %d, want 401", resp.StatusCode)
	}
}

// lineChecker passes the server's stdout through, checking that every line is a JSON-RPC message.
type lineChecker struct {
	w       *io.PipeWriter
	t       *testing.T
	pending []byte
}

func (l *lineChecker) Write(p []byte) (int, error) {
	l.pending = append(l.pending, p...)
	for {
		i := bytes.IndexByte(l.pending, '\n')
		if i < 0 {
			break
		}
		var msg struct {
			JSONRPC string `json:"jsonrpc"`
		}
		if err := json.Unmarshal(l.pending[:i], &msg); err != nil || msg.JSONRPC != "2.0" {
			l.t.Errorf("stdout carries a line that is not JSON-RPC: %q", l.pending[:i])
		}
		l.pending = l.pending[i+1:]
	}
	return l.w.Write(p)
}

// Over stdio the server speaks nothing but protocol on stdout, in both eras, and stops when stdin closes.
func TestRunStdio(t *testing.T) {
	for _, version := range eras {
		t.Run(version, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{})
			inR, inW := io.Pipe()
			outR, outW := io.Pipe()
			done := make(chan error, 1)
			go func() {
				done <- f.srv.Run(t.Context(), inR, &lineChecker{w: outW, t: t})
				outW.Close()
			}()
			c := client.NewClient(transport.NewIO(outR, inW, nil), client.WithProtocolVersion(version))
			initialize(t, c, version)
			id := createSandbox(t, c)
			if ids := listIDs(t, c); len(ids) != 1 || ids[0] != id {
				t.Errorf("list over stdio: %v", ids)
			}
			c.Close()
			if err := awaitRun(t, done); err != nil {
				t.Fatalf("Run after stdin closed: %v", err)
			}
			if sb, ok := f.emu.Sandbox(id); !ok || sb.State != "running" {
				t.Errorf("after the server stopped the sandbox is %v/%q, want running", ok, sb.State)
			}
		})
	}
}

// scriptedClients is a ClientSource whose reads give, in turn, the errors of answers (nil: a client of its own),
// and a client after the last; it counts the reads of each owner.
type scriptedClients struct {
	mu      sync.Mutex
	answers []func() error
	reads   map[string]int
	made    []*e2b.Client
}

func (s *scriptedClients) Client(_ context.Context, owner string) (*e2b.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reads == nil {
		s.reads = map[string]int{}
	}
	s.reads[owner]++
	if len(s.answers) > 0 {
		answer := s.answers[0]
		s.answers = s.answers[1:]
		if err := answer(); err != nil {
			return nil, err
		}
	}
	c, err := e2b.NewClient(e2b.Config{APIKey: "e2b_" + strings.Repeat("0f", 20), APIURL: "http://127.0.0.1:9"})
	s.made = append(s.made, c)
	return c, err
}

func (s *scriptedClients) count(owner string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads[owner]
}

// The client read early for a call (while its started record is written) is what the call's first ask gets; a
// second ask, another owner's, and an ask after an early read that failed (no key yet: the connect flow waits for
// one; a panic in the read) each read afresh, as every ask did before.
func TestEarlyClientIsTheCallsFirstOnly(t *testing.T) {
	t.Run("first ask, second ask, another owner", func(t *testing.T) {
		src := &scriptedClients{}
		w := withEarlyClient{src}
		ctx, _ := (&Server{clients: src}).readEarly(t.Context(), "a_tool", tools.Caller{Owner: "alice"})
		first, err := w.Client(ctx, "alice")
		if err != nil {
			t.Fatal(err)
		}
		if n := src.count("alice"); n != 1 || first != src.made[0] {
			t.Fatalf("the first ask read %d times (want 1: the early read) and got the early client: %v", n,
				first == src.made[0])
		}
		second, err := w.Client(ctx, "alice")
		if err != nil || second == first || src.count("alice") != 2 {
			t.Fatalf("a second ask: %v, same client %v, %d reads; want a fresh read", err, second == first,
				src.count("alice"))
		}
		if _, err := w.Client(ctx, "bob"); err != nil || src.count("bob") != 1 {
			t.Fatalf("another owner's ask: %v, %d reads of bob's; want one", err, src.count("bob"))
		}
	})
	for name, failure := range map[string]func() error{
		"no key yet":     func() error { return fmt.Errorf("%w for alice", tools.ErrNoAPIKey) },
		"a store error":  func() error { return errors.New("the keyring is locked") },
		"a panic inside": func() error { panic("the keyring client failed") },
	} {
		t.Run("an early read that failed: "+name, func(t *testing.T) {
			src := &scriptedClients{answers: []func() error{failure}}
			w := withEarlyClient{src}
			ctx, _ := (&Server{clients: src}).readEarly(t.Context(), "a_tool", tools.Caller{Owner: "alice"})
			c, err := w.Client(ctx, "alice")
			if err != nil || c == nil || src.count("alice") != 2 {
				t.Fatalf("after a failed early read: %v, %d reads; want the client of a fresh read", err,
					src.count("alice"))
			}
		})
	}
}

// countingSecrets counts the reads of each account of a secret store.
type countingSecrets struct {
	credentials.SecretStore
	mu    sync.Mutex
	reads map[string]int
}

func (c *countingSecrets) Secret(account string) (string, error) {
	c.mu.Lock()
	c.reads[account]++
	c.mu.Unlock()
	return c.SecretStore.Secret(account)
}

func (c *countingSecrets) count(account string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads[account]
}

// A call reads its owner's key once, early, and uses that read, and so does a create its owner's egress
// credentials: an early read is not a read more.
func TestACallReadsItsKeyOnce(t *testing.T) {
	secrets := &countingSecrets{SecretStore: newTestSecrets(), reads: map[string]int{}}
	f := newFixture(t, fixtureOpts{policy: allowAll, mutate: func(c *Config, _ *e2btest.Server) { c.Secrets = secrets }})
	c := connect(t, f.srv, mcp.ProtocolVersion20260728, nil)
	before, credentialsBefore := secrets.count("alice"), secrets.countEgress()
	id := createSandbox(t, c)
	mustOK(t, c, "e2b_manage_sandbox", map[string]any{"sandbox_id": id, "action": "delete"})
	if n := secrets.count("alice") - before; n != 2 {
		t.Errorf("a create and a delete read alice's key %d times; want once each", n)
	}
	if n := secrets.countEgress() - credentialsBefore; n != 1 {
		t.Errorf("a create and a delete read alice's egress credentials %d times; want once, for the create", n)
	}
}

// countEgress counts the reads of egress credentials' entries.
func (c *countingSecrets) countEgress() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for account, reads := range c.reads {
		if strings.HasPrefix(account, "egress") {
			n += reads
		}
	}
	return n
}

// The server reads a call's egress credentials early for the tools that make sandboxes, and for no other: each
// tool's definition says whether its calls read them.
func TestEarlyReadsFollowTheTool(t *testing.T) {
	secrets := &countingSecrets{SecretStore: newTestSecrets(), reads: map[string]int{}}
	f := newFixture(t, fixtureOpts{policy: allowAll, mutate: func(c *Config, _ *e2btest.Server) { c.Secrets = secrets }})
	for tool, want := range map[string]int{"e2b_create_sandbox": 1, "e2b_fork_sandbox": 1, "e2b_exec": 0,
		"e2b_list_sandboxes": 0} {
		before := secrets.countEgress()
		_, wait := f.srv.readEarly(t.Context(), tool, tools.Caller{Owner: "alice", Session: "s"})
		wait()
		if n := secrets.countEgress() - before; n != want {
			t.Errorf("a call of %s read the egress credentials early %d times; want %d", tool, n, want)
		}
	}
}
