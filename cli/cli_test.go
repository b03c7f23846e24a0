package cli

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/zalando/go-keyring"

	"github.com/e2b-mcp/e2b-mcp/lifecycle"
	"github.com/e2b-mcp/e2b-mcp/server"
)

// testEnv is the environment a test runs the command line in.
type testEnv struct {
	env  map[string]string
	user string
	now  time.Time
}

func newEnv(t *testing.T) *testEnv {
	home := t.TempDir()
	return &testEnv{
		env:  map[string]string{"HOME": home, "XDG_STATE_HOME": filepath.Join(home, "state")},
		user: "tester",
		now:  time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC),
	}
}

// syncBuffer collects output that a server may write from several goroutines.
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

type result struct {
	code           int
	stdout, stderr string
}

func (e *testEnv) app(stdin io.Reader, stdout, stderr io.Writer) *app {
	return &app{
		stdin:  stdin,
		stdout: stdout,
		stderr: stderr,
		getenv: func(k string) string { return e.env[k] },
		now:    func() time.Time { return e.now },
		osUser: func() (string, error) { return e.user, nil },
	}
}

func (e *testEnv) run(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errOut syncBuffer
	code := e.app(strings.NewReader(stdin), &out, &errOut).main(t.Context(), args)
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

func TestCommandDispatchAndExitCodes(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		args      []string
		code      int
		stdoutHas string
		stderrHas string
	}{
		{nil, exitUsage, "", "Usage: e2b-mcp COMMAND"},
		{[]string{"--help"}, exitOK, "Commands:", ""},
		{[]string{"help"}, exitOK, "serve", ""},
		{[]string{"nope"}, exitUsage, "", `unknown command "nope"`},
		{[]string{"version"}, exitOK, "e2b-mcp " + Version(), ""},
		{[]string{"--version"}, exitOK, "e2b-mcp ", ""},
		{[]string{"version", "extra"}, exitUsage, "", `unexpected argument "extra"`},
		{[]string{"serve", "--help"}, exitOK, "--orphan-action", ""},
		{[]string{"serve", "-h"}, exitOK, "--tokens-file", ""},
		{[]string{"serve", "--bogus"}, exitUsage, "", "flag provided but not defined: -bogus"},
		{[]string{"serve", "stray"}, exitUsage, "", `unexpected argument "stray"`},
		{[]string{"serve", "--transport", "carrier-pigeon"}, exitUsage, "", "--transport"},
		{[]string{"serve", "--backend", "cloud"}, exitUsage, "", "--backend"},
		{[]string{"serve", "--orphan-action", "explode"}, exitUsage, "", "--orphan-action"},
		{[]string{"serve", "--lease", "0s"}, exitUsage, "", "-lease: must be positive"},
		{[]string{"serve", "--exec-foreground-limit", "0s"}, exitUsage, "", "-exec-foreground-limit: must be positive"},
		{[]string{"serve", "--exec-foreground-limit", "2h"}, exitUsage, "", "--exec-foreground-limit 2h0m0s: want a duration above 0 and at most 1h0m0s"},
		{[]string{"serve", "--result-limit", "4095"}, exitUsage, "", "--result-limit must be at least 4096 characters"},
		{[]string{"serve", "--store", "mysql://u:hunter2@db/x"}, exitUsage, "", "--store: want a postgres:// URL"},
		{[]string{"serve", "--store", "postgres://db/x", "--backend", "local"}, exitUsage, "", "--store and --backend local do not go together"},
		{[]string{"approve", "--store", "/var/lib/db"}, exitFailure, "", "--store: want a postgres:// URL"},
		{[]string{"serve", "--lease", "soon"}, exitUsage, "", "invalid value"},
		{[]string{"serve", "--log-level", "chatty"}, exitUsage, "", "log-level"},
		{[]string{"auth"}, exitUsage, "", "auth needs a subcommand"},
		{[]string{"auth", "--help"}, exitOK, "login", ""},
		{[]string{"auth", "login", "--help"}, exitOK, "--no-verify", ""},
		{[]string{"auth", "frobnicate"}, exitUsage, "", "unknown auth subcommand"},
		{[]string{"tokens"}, exitUsage, "", "tokens needs a subcommand"},
		{[]string{"tokens", "add"}, exitUsage, "", "missing argument"},
		{[]string{"policy", "check"}, exitUsage, "", "missing argument"},
		{[]string{"policy", "explain", "builtin", "e2b_exec", "{not json"}, exitUsage, "", "ARGS_JSON"},
		{[]string{"approve", "a", "b"}, exitUsage, "", "want ID, show ID or deny ID"},
		{[]string{"approve", "show", "a", "b"}, exitUsage, "", `unexpected argument "b"`},
		{[]string{"audit", "--since", "yesterday-ish"}, exitUsage, "", "--since"},
		{[]string{"audit", "--decision", "maybe"}, exitUsage, "", "--decision"},
	} {
		r := e.run(t, "", tc.args...)
		if r.code != tc.code || !strings.Contains(r.stdout, tc.stdoutHas) || !strings.Contains(r.stderr, tc.stderrHas) {
			t.Errorf("e2b-mcp %s: exit %d (want %d)\nstdout: %s\nstderr: %s", strings.Join(tc.args, " "), r.code, tc.code, r.stdout, r.stderr)
		}
		if strings.Contains(r.stdout+r.stderr, "hunter2") {
			t.Errorf("e2b-mcp %s shows the password of its --store URL:\n%s%s", strings.Join(tc.args, " "), r.stdout, r.stderr)
		}
	}
}

func parseServe(t *testing.T, e *testEnv, args ...string) (server.Config, error) {
	t.Helper()
	a := e.app(strings.NewReader(""), io.Discard, io.Discard)
	f, o := a.serveFlags()
	if _, err := a.parse(f, args); err != nil {
		return server.Config{}, err
	}
	return a.serveConfig(f, o)
}

func TestServeFlags(t *testing.T) {
	e := newEnv(t)
	e.env["E2B_DOMAIN"] = "e2b.example"
	e.env["E2B_API_URL"] = "http://api.example"
	cfg, err := parseServe(t, e)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Transport != "stdio" || cfg.Listen != "127.0.0.1:8931" || cfg.Session != "default" || cfg.Owner != "tester" ||
		cfg.Lease != 4*time.Hour || cfg.OrphanAction != lifecycle.OrphanPause ||
		cfg.SweepInterval != 5*time.Minute || cfg.Tools.ResultLimit != 0 || cfg.ClientProfile != "" || cfg.TokensFile != "" || cfg.PolicyFile != "" {
		t.Errorf("defaults: %+v", cfg)
	}
	if b, ok := cfg.Backend.(server.E2B); !ok || b.Location.Domain != "e2b.example" || b.Location.APIURL != "http://api.example" || b.Location.SandboxURL != "" {
		t.Errorf("E2B located by the environment: %+v", cfg.Backend)
	}
	if want := filepath.Join(e.env["XDG_STATE_HOME"], "e2b-mcp"); cfg.StateDir != want {
		t.Errorf("state dir %s, want %s", cfg.StateDir, want)
	}

	r1, r2 := t.TempDir(), t.TempDir()
	cfg, err = parseServe(t, e, "--transport", "sse", "--listen", "[::1]:9000", "--session", "proj", "--owner", "bob",
		"--domain", "d.example", "--api-url", "http://a", "--sandbox-url", "http://s", "--state-dir", "rel/state",
		"--storage-root", r1, "--storage-root", r2, "--result-limit", "5000", "--policy", "p.yaml", "--lease", "30m",
		"--orphan-action", "kill", "--sweep-interval", "1m", "--checkpoint-every", "5", "--checkpoint-on-pause",
		"--backend", "local", "--tokens-file", "t.json", "--log-level", "debug", "--exec-foreground-limit", "20s",
		"--allow-origin", "http://localhost:6274", "--allow-origin", "https://app.example")
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs("rel/state")
	if cfg.Transport != "sse" || cfg.Listen != "[::1]:9000" || cfg.Session != "proj" || cfg.Owner != "bob" ||
		cfg.StateDir != abs || !slices.Equal(cfg.Tools.StorageRoots, []string{r1, r2}) || cfg.Tools.ResultLimit != 5000 ||
		cfg.PolicyFile != "p.yaml" || cfg.Lease != 30*time.Minute || cfg.OrphanAction != lifecycle.OrphanKill ||
		cfg.SweepInterval != time.Minute || cfg.Tools.Checkpoints.EverySteps != 5 || !cfg.Tools.Checkpoints.OnPause ||
		cfg.Backend != (server.Local{}) || cfg.TokensFile != "t.json" || cfg.Tools.ExecForegroundLimit != 20*time.Second ||
		!slices.Equal(cfg.AllowOrigins, []string{"http://localhost:6274", "https://app.example"}) {
		t.Errorf("flags: %+v", cfg)
	}

	cfg, err = parseServe(t, e, "--domain", "d.example", "--api-url", "http://a", "--sandbox-url", "http://s")
	if b, ok := cfg.Backend.(server.E2B); err != nil || !ok || b.Location.Domain != "d.example" || b.Location.APIURL != "http://a" || b.Location.SandboxURL != "http://s" {
		t.Errorf("E2B located by the flags: %+v %v", cfg.Backend, err)
	}

	if _, err := parseServe(t, e, "--storage-root", filepath.Join(r1, "missing")); err == nil {
		t.Error("a missing storage root was accepted")
	}
	for _, bad := range []string{"*", "https://*.example", "null", "app.example", "https://app.example/path"} {
		if _, err := parseServe(t, e, "--allow-origin", bad); err == nil {
			t.Errorf("--allow-origin %q was accepted", bad)
		}
	}
	if _, err := parseServe(t, e, "--owner", "state-data-key"); err == nil {
		t.Error("the reserved keyring account was accepted as an owner")
	}
}

// A saved client configuration that still passes --output-budget, which --result-limit replaced, starts: the flag
// is ignored with a warning that names --result-limit, and --help does not offer it.
func TestRetiredOutputBudget(t *testing.T) {
	e := newEnv(t)
	var stderr syncBuffer
	a := e.app(strings.NewReader(""), io.Discard, &stderr)
	f, o := a.serveFlags()
	if _, err := a.parse(f, []string{"--output-budget", "20000", "--result-limit", "5000"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := a.serveConfig(f, o)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Tools.ResultLimit != 5000 {
		t.Errorf("result limit %d, want the --result-limit given (5000)", cfg.Tools.ResultLimit)
	}
	if w := stderr.String(); !strings.Contains(w, "--output-budget") || !strings.Contains(w, "--result-limit") {
		t.Errorf("no warning naming --output-budget and --result-limit: %q", w)
	}
	if r := e.run(t, "", "serve", "--help"); r.code != exitOK || strings.Contains(r.stdout, "output-budget") {
		t.Errorf("serve --help (exit %d) shows the retired flag:\n%s", r.code, r.stdout)
	}
}

func TestDefaultStateDir(t *testing.T) {
	e := newEnv(t)
	a := e.app(nil, io.Discard, io.Discard)
	e.env["XDG_STATE_HOME"] = "/x/state"
	if d, _ := a.defaultStateDir(); d != filepath.Join("/x/state", "e2b-mcp") {
		t.Errorf("with XDG_STATE_HOME: %s", d)
	}
	e.env["XDG_STATE_HOME"] = "relative" // not absolute: ignored, as the XDG spec says
	if d, _ := a.defaultStateDir(); strings.Contains(d, "relative") {
		t.Errorf("a relative XDG_STATE_HOME was used: %s", d)
	}
	delete(e.env, "XDG_STATE_HOME")
	delete(e.env, "HOME")
	delete(e.env, "LocalAppData")
	if _, err := a.defaultStateDir(); err == nil {
		t.Error("no HOME and no XDG_STATE_HOME gave a state dir")
	}
}

func TestInterspersedArguments(t *testing.T) {
	e := newEnv(t)
	a := e.app(nil, io.Discard, io.Discard)
	f := newFlags("x", "", "")
	file := f.String("file", "", "")
	on := f.Bool("on", false, "")
	rest, err := a.parse(f, []string{"first", "--file", "F", "second", "--on", "--", "--third"})
	if err != nil {
		t.Fatal(err)
	}
	if *file != "F" || !*on || !slices.Equal(rest, []string{"first", "second", "--third"}) {
		t.Errorf("file %q on %v rest %q", *file, *on, rest)
	}
}

func TestVersionFrom(t *testing.T) {
	if v := Version(); v == "" {
		t.Error("empty version")
	}
	version, commit = "v9.9.9", "0123456789abcdef0123456789abcdef01234567"
	defer func() { version, commit = "", "" }()
	e := newEnv(t)
	if r := e.run(t, "", "version"); !strings.HasPrefix(r.stdout, "e2b-mcp v9.9.9 (commit 0123456789abcdef0123456789abcdef01234567, go") {
		t.Errorf("link-time version and commit not used: %q", r.stdout)
	}
}

// `serve --backend local` end to end over stdio: the emulator in-process, no keyring key, nothing but protocol
// on stdout, logs on stderr, and exit 0 when the client closes stdin.
func TestServeLocalBackendOverStdio(t *testing.T) {
	keyring.MockInit()
	e := newEnv(t)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var errOut syncBuffer
	a := e.app(inR, outW, &errOut)
	a.notifySignals = func(ctx context.Context) (context.Context, context.CancelFunc) { return context.WithCancel(ctx) }
	code := make(chan int, 1)
	go func() {
		code <- a.main(t.Context(), []string{"serve", "--backend", "local", "--session", "demo", "--state-dir", t.TempDir()})
		outW.Close()
	}()

	version := mcp.ProtocolVersion20251125
	c := client.NewClient(transport.NewIO(outR, inW, nil), client.WithProtocolVersion(version))
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	var init mcp.InitializeRequest
	init.Params.ProtocolVersion = version
	init.Params.ClientInfo = mcp.Implementation{Name: "cli-test", Version: "1"}
	if _, err := c.Initialize(t.Context(), init); err != nil {
		t.Fatalf("initialize: %v\nstderr:\n%s", err, errOut.String())
	}
	var req mcp.CallToolRequest
	req.Params.Name = "e2b_create_sandbox"
	req.Params.Arguments = map[string]any{"title": "local"}
	res, err := c.CallTool(t.Context(), req)
	if err != nil || res.IsError {
		t.Fatalf("create on the local backend: %v %+v\nstderr:\n%s", err, res, errOut.String())
	}
	c.Close()
	select {
	case c := <-code:
		if c != exitOK {
			t.Fatalf("serve exited %d\n%s", c, errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop when stdin closed")
	}
	if !strings.Contains(errOut.String(), "LOCAL BACKEND") {
		t.Errorf("stderr lacks the local-backend warning:\n%s", errOut.String())
	}
}
