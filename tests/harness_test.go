// Package tests drives the built e2b-mcp binary end to end: real MCP clients (mcp-go and the official
// TypeScript SDK) over stdio, streamable HTTP and SSE, the real OS keyring (Secret Service), and the E2B
// emulator from e2b/e2btest standing in for E2B's cloud.
package tests

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/internal/optional"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// suite is what TestMain prepares once for every test: the binary and the emulator.
type suite struct {
	bin string // the e2b-mcp binary built from this checkout
	emu *e2btest.Server
	// setupErr says why the binary or the emulator is missing.
	setupErr error

	mu       sync.Mutex
	keys     []string          // every E2B API key handed to the binary
	tokens   map[string]string // envd access token → sandbox ID, of every sandbox seen
	others   map[string]string // any other secret (a credential's value) → its label
	captures []*capture        // every stdout/stderr the run produced
}

// the is set by TestMain before any test runs and never reassigned; tests only read its fields (the mutable
// registries are guarded by suite.mu).
var the *suite

func TestMain(m *testing.M) { os.Exit(runSuite(m)) }

func runSuite(m *testing.M) int {
	root, err := os.MkdirTemp("", "e2b-mcp-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "tests:", err)
		return 1
	}
	defer os.RemoveAll(root)

	// A binary that does not build, or an emulator that does not start, fails every test that needs them (with
	// the reason) while the tests that need neither still run.
	the = &suite{bin: filepath.Join(root, "e2b-mcp"), tokens: map[string]string{}, others: map[string]string{}}
	if err := buildBinary(the.bin); err != nil {
		the.setupErr = fmt.Errorf("building e2b-mcp: %w", err)
	} else if emu, err := e2btest.New(e2btest.Options{Dir: filepath.Join(root, "emulator"), Hosts: egressHosts()}); err != nil {
		the.setupErr = fmt.Errorf("starting the E2B emulator: %w", err)
	} else {
		the.emu = emu
		defer emu.Close()
	}

	code := m.Run()
	if the.emu == nil {
		return code
	}

	// Sandboxes that tests left behind (and their tokens) are scanned for once more over everything the run
	// wrote, so a leak that only shows when all output is put together is still caught.
	the.noteAllSandboxes()
	the.mu.Lock()
	fmt.Fprintf(os.Stderr, "tests: secret scan over %d captured outputs and every file under the run's directory, for %d E2B keys and %d envd access tokens\n",
		len(the.captures), len(the.keys), len(the.tokens))
	the.mu.Unlock()
	if leaks := the.scan(nil, root); len(leaks) > 0 {
		fmt.Fprintln(os.Stderr, "tests: secrets found in the run's output:")
		for _, l := range leaks {
			fmt.Fprintln(os.Stderr, "  ", l)
		}
		code = 1
	}
	return code
}

// buildBinary builds the module's main package; under -race the binary gets the race detector too, so the
// end-to-end flows also check the server for data races.
func buildBinary(out string) error {
	args := []string{"build", "-o", out}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, ".")...)
	cmd.Dir = ".."
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%w\n%s", err, msg)
	}
	return nil
}

// requireEnv skips a test whose environment is missing, except in CI, where a skip would hide the test.
func requireEnv(t testing.TB, ok bool, why string) {
	t.Helper()
	if !ok {
		optional.Missing(t, why)
	}
}

// requireKeyring is for tests that store keys in the OS keyring: the Secret Service needs a D-Bus session,
// which tests/with-keyring.sh provides with a throwaway, unlocked gnome-keyring.
func requireKeyring(t testing.TB) {
	t.Helper()
	requireEnv(t, os.Getenv("DBUS_SESSION_BUS_ADDRESS") != "",
		"no D-Bus session (DBUS_SESSION_BUS_ADDRESS is empty): the keyring tests need a Secret Service; run them with tests/with-keyring.sh")
}

// newAPIKey returns a fresh key in E2B's format; the emulator accepts any such key as its own team.
func newAPIKey() string {
	return "e2b_" + randomHex(20)
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)
}

// capture is a goroutine-safe buffer for a subprocess's stdout or stderr; every capture is scanned for secrets.
type capture struct {
	name string
	mu   sync.Mutex
	buf  bytes.Buffer
}

func (c *capture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Write(p)
}

func (c *capture) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

// shows waits until the process's output holds want, for at most d, and reports whether it did. A child's
// output reaches its capture through a pipe that a goroutine of the test copies from, so a line the process wrote
// before it answered a request may still be on its way when the answer is in: a check of a running process's
// output waits for it.
func (c *capture) shows(want string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for !strings.Contains(c.String(), want) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

func (s *suite) newCapture(name string) *capture {
	c := &capture{name: name}
	s.mu.Lock()
	s.captures = append(s.captures, c)
	s.mu.Unlock()
	return c
}

func (s *suite) noteKey(k string) {
	s.mu.Lock()
	s.keys = append(s.keys, k)
	s.mu.Unlock()
}

// noteSecret adds a secret (a credential's value, or a form of it) to what the scans look for.
func (s *suite) noteSecret(secret, label string) {
	s.mu.Lock()
	s.others[secret] = label
	s.mu.Unlock()
}

// noteSandbox remembers a sandbox's envd access token, so that it can be searched for in every output later,
// even after the sandbox is gone from the emulator.
func (s *suite) noteSandbox(id string) {
	if sb, ok := s.emu.Sandbox(id); ok && sb.AccessToken != "" {
		s.mu.Lock()
		s.tokens[sb.AccessToken] = id
		s.mu.Unlock()
	}
}

func (s *suite) noteAllSandboxes() {
	for _, sb := range s.emu.Sandboxes() {
		s.noteSandbox(sb.ID)
	}
}

// secrets lists what must never appear in output: every API key, envd token and credential value, each with a label.
func (s *suite) secrets() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]string, len(s.keys)+len(s.tokens))
	for _, k := range s.keys {
		out[k] = "E2B API key " + k[:8] + "…"
	}
	for tok, id := range s.tokens {
		out[tok] = "envd access token of sandbox " + id
	}
	for secret, label := range s.others {
		out[secret] = label
	}
	return out
}

// scan looks for every known secret in the given captures (all of the run's when nil) and in every file under
// dirs.
func (s *suite) scan(captures []*capture, dirs ...string) []string {
	if captures == nil {
		s.mu.Lock()
		captures = slices.Clone(s.captures)
		s.mu.Unlock()
	}
	return findLeaks(s.secrets(), captures, dirs...)
}

// findLeaks describes each place where one of secrets (secret → label) occurs, raw or in an encoding that keeps
// it readable (see encodings), without repeating the secret. Files are read to their end, binary ones too: a state
// database must not hold a token in the clear, nor base64-encoded as JSON writes byte fields.
func findLeaks(secrets map[string]string, captures []*capture, dirs ...string) []string {
	var leaks []string
	m := newLeakMatcher(secrets)
	check := func(where string, found []leakForm) {
		for _, f := range found {
			leaks = append(leaks, fmt.Sprintf("%s (%s) in %s", f.label, f.name, where))
		}
	}
	for _, c := range captures {
		check(c.name, m.find([]byte(c.String())))
	}
	for _, dir := range dirs {
		_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			if the != nil && path == the.bin {
				return nil
			}
			if found, err := m.findInFile(path); err == nil {
				check(path, found)
			}
			return nil
		})
	}
	slices.Sort(leaks)
	return leaks
}

// encodedSecret is one form a secret can take in output.
type encodedSecret struct {
	name string
	text []byte
}

// leakMatcher finds every form of many secrets in one pass over the data, where a bytes.Contains per form reads all
// of a run's output thousands of times (a hundred and more secrets, fourteen forms each: minutes at the end of a
// run). Each form is filed under its first prefixLen bytes, and a bit per hash of those bytes tells the pass
// where a form may begin; a form that short or shorter is looked for with bytes.Contains.
type leakMatcher struct {
	starts   [1 << startBits / 64]uint64
	byPrefix map[uint32][]leakForm
	short    []leakForm
	longest  int // the length of the longest form
}

const (
	prefixLen = 4
	startBits = 20
)

// startHash spreads a form's first four bytes over startBits bits.
func startHash(prefix uint32) uint32 { return prefix * 0x9E3779B1 >> (32 - startBits) }

// leakForm is one form of a secret: its label, the form's name and text, and its place among the secret's forms
// (the first form found is the one reported).
type leakForm struct {
	label, name string
	text        []byte
	secret, nth int
}

func newLeakMatcher(secrets map[string]string) *leakMatcher {
	m := &leakMatcher{byPrefix: map[uint32][]leakForm{}}
	n := 0
	for secret, label := range secrets {
		for i, f := range encodings(secret) {
			lf := leakForm{label: label, name: f.name, text: f.text, secret: n, nth: i}
			m.longest = max(m.longest, len(f.text))
			if len(f.text) <= prefixLen {
				m.short = append(m.short, lf)
				continue
			}
			k := binary.LittleEndian.Uint32(f.text)
			m.byPrefix[k] = append(m.byPrefix[k], lf)
			h := startHash(k)
			m.starts[h/64] |= 1 << (h % 64)
		}
		n++
	}
	return m
}

// find returns, for each secret that occurs in data, its first form (in encodings' order) that does.
func (m *leakMatcher) find(data []byte) []leakForm {
	first := map[int]leakForm{}
	m.findInto(first, data)
	return slices.Collect(maps.Values(first))
}

// findInFile is find over the file at path, read a piece at a time so that a file of any size (a sandbox's
// gigabytes among a run's files) takes a few megabytes: each piece carries the end of the one before it, where a
// form cut in two is whole.
func (m *leakMatcher) findInFile(path string) ([]leakForm, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	first := map[int]leakForm{}
	carry := max(m.longest-1, 0)
	buf := make([]byte, carry+4<<20)
	kept := 0 // bytes at the start of buf from the piece before
	for {
		n, err := io.ReadFull(f, buf[kept:])
		m.findInto(first, buf[:kept+n])
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return slices.Collect(maps.Values(first)), nil
		}
		if err != nil {
			return nil, err
		}
		kept = min(carry, kept+n)
		copy(buf, buf[len(buf)-kept:])
	}
}

// findInto notes in first, for each secret that occurs in data, its first form that does, unless first holds an
// earlier one.
func (m *leakMatcher) findInto(first map[int]leakForm, data []byte) {
	note := func(f leakForm) {
		if got, seen := first[f.secret]; !seen || f.nth < got.nth {
			first[f.secret] = f
		}
	}
	for _, f := range m.short {
		if bytes.Contains(data, f.text) {
			note(f)
		}
	}
	for _, i := range m.candidates(data) {
		for _, f := range m.byPrefix[binary.LittleEndian.Uint32(data[i:])] {
			if bytes.HasPrefix(data[i:], f.text) {
				note(f)
			}
		}
	}
}

// candidates are the offsets in data where a form may start (the hash of its first bytes is some form's). It reads
// nothing that another goroutine writes, so the race detector is told to leave its loop alone: instrumented, a
// byte-by-byte pass over a run's output is many times slower.
//
//go:norace
func (m *leakMatcher) candidates(data []byte) []int {
	var at []int
	for i := 0; i+prefixLen <= len(data); i++ {
		h := startHash(binary.LittleEndian.Uint32(data[i:]))
		if m.starts[h/64]&(1<<(h%64)) != 0 {
			at = append(at, i)
		}
	}
	return at
}

// encodings are the forms of secret that give it away: raw, base64 (standard and URL alphabets, at each of the
// three alignments it can have inside a longer encoded value, so only the characters that depend on the secret
// alone), hex (either case) and URL-escaped (as a query or path escapes it, and every byte escaped).
func encodings(secret string) []encodedSecret {
	b := []byte(secret)
	forms := []encodedSecret{
		{"raw", b},
		{"hex", []byte(hex.EncodeToString(b))},
		{"hex", []byte(strings.ToUpper(hex.EncodeToString(b)))},
		{"URL-escaped", []byte(url.QueryEscape(secret))},
		{"URL-escaped", []byte(url.PathEscape(secret))},
	}
	var every strings.Builder
	for _, c := range b {
		fmt.Fprintf(&every, "%%%02X", c)
	}
	forms = append(forms, encodedSecret{"URL-escaped", []byte(every.String())},
		encodedSecret{"URL-escaped", []byte(strings.ToLower(every.String()))})
	for _, enc := range []struct {
		name string
		e    *base64.Encoding
	}{{"base64", base64.RawStdEncoding}, {"base64url", base64.RawURLEncoding}} {
		for offset := range 3 {
			// After offset leading bytes, the secret's bits start at bit 8·offset of the encoding, whose
			// characters are 6 bits each: keep the characters made of the secret's bits alone.
			text := enc.e.EncodeToString(append(make([]byte, offset), b...))
			from, to := (8*offset+5)/6, 8*(offset+len(b))/6
			if to > from {
				forms = append(forms, encodedSecret{enc.name, []byte(text[from:to])})
			}
		}
	}
	return forms
}

// h is one test's view of the suite: its own scratch directory (state, storage root, policy), its own owner
// names and the captures of the processes it ran, all scanned for secrets when the test ends.
type h struct {
	t        testing.TB
	dir      string
	mu       sync.Mutex
	captures []*capture
	// headless runs every process of the test as on a server without a desktop: no D-Bus session, no display.
	headless bool
}

func newH(t testing.TB) *h {
	t.Helper()
	if the.setupErr != nil {
		t.Fatal(the.setupErr)
	}
	x := &h{t: t, dir: t.TempDir()}
	t.Cleanup(func() {
		the.noteAllSandboxes()
		x.mu.Lock()
		caps := slices.Clone(x.captures)
		x.mu.Unlock()
		for _, leak := range the.scan(caps, x.dir) {
			t.Errorf("secret leaked: %s", leak)
		}
		// Under -race the binary is built with the race detector, which reports on stderr and carries on.
		for _, c := range caps {
			if out := c.String(); strings.Contains(out, "WARNING: DATA RACE") {
				t.Errorf("the race detector found a data race in e2b-mcp (%s):\n%s", c.name, out)
			}
		}
	})
	return x
}

func (x *h) capture(name string) *capture {
	c := the.newCapture(x.t.Name() + ": " + name)
	x.mu.Lock()
	x.captures = append(x.captures, c)
	x.mu.Unlock()
	return c
}

var nonAlnum = regexp.MustCompile(`[^A-Za-z0-9]+`)

// owner returns an owner name unique to this test, so keyring entries of parallel or earlier tests never meet.
func (x *h) owner(role string) string {
	name := strings.ToLower(nonAlnum.ReplaceAllString(x.t.Name(), "-"))
	return fmt.Sprintf("%s-%s-%s", role, strings.Trim(name, "-"), randomHex(3))
}

// path returns a path inside the test's scratch directory.
func (x *h) path(elem ...string) string { return filepath.Join(append([]string{x.dir}, elem...)...) }

// env is the environment of every e2b-mcp process: the test's own, minus anything that could point the binary at
// E2B's real cloud, with HOME and XDG directories inside the test's scratch directory.
func (x *h) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "E2B_") || name == "HOME" || name == "XDG_CONFIG_HOME" || name == "XDG_STATE_HOME" || name == "XDG_CACHE_HOME" {
			continue
		}
		if x.headless && (name == "DBUS_SESSION_BUS_ADDRESS" || name == "XDG_RUNTIME_DIR" || name == "DISPLAY" || name == "WAYLAND_DISPLAY") {
			continue
		}
		env = append(env, kv)
	}
	home := x.path("home")
	_ = os.MkdirAll(home, 0o700)
	return append(env, "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
		"XDG_STATE_HOME="+filepath.Join(home, ".local", "state"), "XDG_CACHE_HOME="+filepath.Join(home, ".cache"))
}

// result is a finished CLI command.
type result struct {
	stdout, stderr string
	err            error
}

func (r result) String() string {
	return fmt.Sprintf("err=%v\nstdout:\n%s\nstderr:\n%s", r.err, r.stdout, r.stderr)
}

// run runs the binary with stdin (nil: /dev/null, as in CI) and waits at most a minute.
func (x *h) run(stdin io.Reader, args ...string) result {
	x.t.Helper()
	ctx, cancel := context.WithTimeout(x.t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, the.bin, args...)
	cmd.Env = x.env()
	cmd.Dir = x.dir
	cmd.Stdin = stdin
	label := strings.Join(args[:min(2, len(args))], " ")
	out, errOut := x.capture(label+" stdout"), x.capture(label+" stderr")
	cmd.Stdout, cmd.Stderr = out, errOut
	err := cmd.Run()
	return result{stdout: out.String(), stderr: errOut.String(), err: err}
}

// mustRun runs the binary and fails the test unless it exits 0.
func (x *h) mustRun(stdin io.Reader, args ...string) result {
	x.t.Helper()
	r := x.run(stdin, args...)
	if r.err != nil {
		x.t.Fatalf("e2b-mcp %s: %s", strings.Join(args, " "), r)
	}
	return r
}

// login stores a fresh API key for owner with `auth login`, the key piped on stdin as a script would.
func (x *h) login(owner string) string {
	x.t.Helper()
	requireKeyring(x.t)
	key := newAPIKey()
	the.noteKey(key)
	// login checks the key with E2B before storing it: here E2B is the emulator.
	x.mustRun(strings.NewReader(key+"\n"), "auth", "login", "--owner", owner, "--api-url", the.emu.URL())
	x.t.Cleanup(func() { x.run(nil, "auth", "logout", "--owner", owner) })
	return key
}

// serveArgs are the flags that point `serve` at the emulator and at this test's scratch directory.
func (x *h) serveArgs(owner, session string, extra ...string) []string {
	return x.serveArgsAt(the.emu, owner, session, extra...)
}

// serveArgsAt is serveArgs with the control plane and the sandboxes of emu.
func (x *h) serveArgsAt(emu *e2btest.Server, owner, session string, extra ...string) []string {
	args := []string{"serve",
		"--owner", owner,
		"--session", session,
		"--api-url", emu.URL(),
		"--sandbox-url", emu.URL(),
		"--state-dir", x.path("state"),
		"--storage-root", x.path("storage"),
	}
	_ = os.MkdirAll(x.path("storage"), 0o700)
	return append(args, extra...)
}

// stdioServer is `e2b-mcp serve` over stdio with an mcp-go client attached.
type stdioServer struct {
	*client.Client
	cmd    *exec.Cmd
	stderr *capture
}

type clientOpts struct {
	version     string // protocol version to pin; empty: the newest
	elicitation client.ElicitationHandler
	env         []string // added to the server's environment
	bin         string   // the binary to start; empty: the one built from this checkout
}

// startStdio starts `e2b-mcp <args>` as a stdio MCP server and initializes an mcp-go client on it.
func (x *h) startStdio(opts clientOpts, args ...string) *stdioServer {
	x.t.Helper()
	s := &stdioServer{stderr: x.capture("serve stderr")}
	cmdFunc := func(_ context.Context, command string, env, args []string) (*exec.Cmd, error) {
		cmd := exec.Command(command, args...)
		cmd.Env = append(x.env(), env...)
		cmd.Dir = x.dir
		cmd.Stderr = s.stderr
		s.cmd = cmd
		return cmd, nil
	}
	var copts []client.ClientOption
	if opts.version != "" {
		copts = append(copts, client.WithProtocolVersion(opts.version))
	}
	if opts.elicitation != nil {
		copts = append(copts, client.WithElicitationHandler(opts.elicitation))
	}
	bin := the.bin
	if opts.bin != "" {
		bin = opts.bin
	}
	tr := transport.NewStdioWithOptions(bin, opts.env, args, transport.WithCommandFunc(cmdFunc))
	if err := tr.Start(context.Background()); err != nil {
		x.t.Fatalf("starting e2b-mcp: %v", err)
	}
	s.Client = client.NewClient(tr, copts...)
	x.t.Cleanup(func() { s.Close() })
	ctx, cancel := context.WithTimeout(x.t.Context(), 30*time.Second)
	defer cancel()
	if err := s.Start(ctx); err != nil {
		x.t.Fatalf("starting the MCP client: %v\nstderr:\n%s", err, s.stderr)
	}
	if _, err := s.Initialize(ctx, initRequest(opts.version)); err != nil {
		x.t.Fatalf("initialize: %v\nstderr:\n%s", err, s.stderr)
	}
	return s
}

func initRequest(version string) mcp.InitializeRequest {
	var req mcp.InitializeRequest
	req.Params.ProtocolVersion = version
	req.Params.ClientInfo = mcp.Implementation{Name: "e2b-mcp-e2e", Version: "1"}
	return req
}

// kill9 kills the server with SIGKILL, as a crash or an OOM kill would, and waits for it.
func (s *stdioServer) kill9(t testing.TB) {
	t.Helper()
	if err := s.cmd.Process.Kill(); err != nil {
		t.Fatalf("kill -9: %v", err)
	}
	_, _ = s.cmd.Process.Wait()
}

// httpServer is `e2b-mcp serve --transport http|sse` running in the background.
type httpServer struct {
	base   string // http://127.0.0.1:port
	stderr *capture
	done   chan struct{}
	cmd    *exec.Cmd
}

// kill9 kills the server with SIGKILL, as a crash or an OOM kill would, and waits for it.
func (s *httpServer) kill9(t testing.TB) {
	t.Helper()
	if err := s.cmd.Process.Kill(); err != nil {
		t.Fatalf("kill -9: %v", err)
	}
	waitfor.Recv(t, s.done, 30*time.Second, "the killed server to exit")
}

// startHTTP starts `serve` on a free loopback port and waits until /healthz answers.
func (x *h) startHTTP(args ...string) *httpServer {
	x.t.Helper()
	return x.startHTTPOn(freePort(x.t), args...)
}

// startHTTPOn starts `serve` listening on port (host:port) and waits until /healthz answers.
func (x *h) startHTTPOn(port string, args ...string) *httpServer {
	x.t.Helper()
	s := &httpServer{base: "http://" + port, stderr: x.capture("serve http stderr"), done: make(chan struct{})}
	cmd := exec.Command(the.bin, append(args, "--listen", port)...)
	cmd.Env = x.env()
	cmd.Dir = x.dir
	cmd.Stdout, cmd.Stderr = x.capture("serve http stdout"), s.stderr
	if err := cmd.Start(); err != nil {
		x.t.Fatalf("starting e2b-mcp: %v", err)
	}
	s.cmd = cmd
	go func() { _ = cmd.Wait(); close(s.done) }()
	x.t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			waitfor.Recv(x.t, s.done, 30*time.Second, "the server to exit after its kill")
		}
	})
	defer func() {
		if x.t.Failed() {
			x.t.Logf("e2b-mcp serve's stderr:\n%s", s.stderr)
		}
	}()
	waitfor.Until(x.t, 30*time.Second, "e2b-mcp serve to answer /healthz", func() bool {
		select {
		case <-s.done:
			x.t.Fatal("e2b-mcp serve exited before answering /healthz")
		default:
		}
		resp, err := http.Get(s.base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return s
}

// freePort finds a free loopback port. The port is released before the server binds it; a clash with another
// process in that moment makes the server fail to start, which startHTTP reports.
func freePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// connectHTTP connects an mcp-go client over streamable HTTP with a bearer token.
func (x *h) connectHTTP(base, token, session string) *client.Client {
	x.t.Helper()
	headers := map[string]string{"Authorization": "Bearer " + token}
	if session != "" {
		headers["X-E2B-MCP-Session"] = session
	}
	c, err := client.NewStreamableHttpClient(base+"/mcp", transport.WithHTTPHeaders(headers))
	if err != nil {
		x.t.Fatal(err)
	}
	x.t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(x.t.Context(), 30*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		x.t.Fatal(err)
	}
	if _, err := c.Initialize(ctx, initRequest("")); err != nil {
		x.t.Fatalf("initialize over HTTP: %v", err)
	}
	return c
}

// call calls a tool and returns its result; a protocol error fails the test (tool errors are results).
func call(t testing.TB, c *client.Client, tool string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	res, err := callCtx(ctx, c, tool, args, nil)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return res
}

func callCtx(ctx context.Context, c *client.Client, tool string, args map[string]any, meta *mcp.Meta) (*mcp.CallToolResult, error) {
	var req mcp.CallToolRequest
	req.Params.Name = tool
	req.Params.Arguments = args
	req.Params.Meta = meta
	return c.CallTool(ctx, req)
}

// ok calls a tool that must succeed and returns its structured answer.
func ok(t testing.TB, c *client.Client, tool string, args map[string]any) map[string]any {
	t.Helper()
	res := call(t, c, tool, args)
	if res.IsError {
		t.Fatalf("%s %v: tool error: %s", tool, args, text(res))
	}
	return fields(t, res)
}

// fails calls a tool that must answer with isError and returns the error text.
func fails(t testing.TB, c *client.Client, tool string, args map[string]any) string {
	t.Helper()
	res := call(t, c, tool, args)
	if !res.IsError {
		t.Fatalf("%s %v: want a tool error, got %s", tool, args, text(res))
	}
	return text(res)
}

// text joins a result's text contents.
func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := mcp.AsTextContent(c); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// fields is a result's structured content, or its text parsed as a JSON object when it carries none.
func fields(t testing.TB, res *mcp.CallToolResult) map[string]any {
	t.Helper()
	var raw []byte
	switch {
	case len(res.RawStructuredContent) > 0:
		raw = res.RawStructuredContent
	case res.StructuredContent != nil:
		var err error
		if raw, err = json.Marshal(res.StructuredContent); err != nil {
			t.Fatal(err)
		}
	default:
		raw = []byte(text(res))
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("result is not a JSON object: %v\n%s", err, raw)
	}
	return m
}

func str(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

func num(m map[string]any, k string) float64 {
	f, _ := m[k].(float64)
	return f
}

// sandboxIDs lists the IDs of e2b_list_sandboxes' answer.
func sandboxIDs(t testing.TB, c *client.Client) []string {
	t.Helper()
	out := ok(t, c, "e2b_list_sandboxes", map[string]any{})
	list, _ := out["sandboxes"].([]any)
	var ids []string
	for _, e := range list {
		if m, isMap := e.(map[string]any); isMap {
			ids = append(ids, str(m, "sandbox_id"))
		}
	}
	if int(num(out, "count")) != len(ids) {
		t.Errorf("e2b_list_sandboxes: count %v but %d sandboxes listed", out["count"], len(ids))
	}
	slices.Sort(ids)
	return ids
}

// create makes a sandbox through the server and registers its envd token for the secret scan.
func create(t testing.TB, c *client.Client, args map[string]any) string {
	t.Helper()
	out := ok(t, c, "e2b_create_sandbox", args)
	id := str(out, "sandbox_id")
	if id == "" {
		t.Fatalf("e2b_create_sandbox answered no sandbox_id: %v", out)
	}
	the.noteSandbox(id)
	return id
}

// keysSince lists the distinct X-API-Key values of the emulator's requests since the mark (a count of recorded
// requests). Tests that use it do not run in parallel, so every request since the mark is theirs: the others call
// t.Parallel, and Go runs them only once every test that does not has ended.
func keysSince(mark int) []string {
	reqs := the.emu.Requests()
	seen := map[string]bool{}
	for _, r := range reqs[min(mark, len(reqs)):] {
		if k := r.Header.Get("X-API-Key"); k != "" {
			seen[k] = true
		}
	}
	var out []string
	for k := range seen {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

var errNotJSON = errors.New("not a JSON line")

// lastJSONLine parses the last line of out that is a JSON object.
func lastJSONLine(out string) (map[string]any, error) {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		var m map[string]any
		if json.Unmarshal([]byte(lines[i]), &m) == nil {
			return m, nil
		}
	}
	return nil, errNotJSON
}
