package server

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/audit"
	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
	"github.com/e2b-mcp/e2b-mcp/lifecycle"
	"github.com/e2b-mcp/e2b-mcp/state"
)

const denyCreatePolicy = `default_action: allow
rules:
  - id: no-new-sandboxes
    when: { target: e2b_create_sandbox }
    then: { decision: deny, reason: this session may not create sandboxes }
  - id: no-force-push
    when: { target: e2b_exec, command: "*git push*--force*" }
    then: { decision: deny, reason: force pushes are not allowed }
`

// A denied call answers with the rule and reason, reaches neither the tool nor E2B, and is audited.
func TestPolicyDenyReachesNoE2B(t *testing.T) {
	for _, version := range eras {
		t.Run(version, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{policy: denyCreatePolicy})
			c := connect(t, f.srv, version, nil)
			mark := len(f.emu.Requests())

			msg := mustFail(t, c, "e2b_create_sandbox", map[string]any{"title": "nope", "template": "base"})
			want := "Denied by policy rule 'no-new-sandboxes': this session may not create sandboxes"
			if msg != want {
				t.Errorf("denied create: %q, want %q", msg, want)
			}
			msg = mustFail(t, c, "e2b_exec", map[string]any{"sandbox_id": "abc", "command": "git push origin --force"})
			if !strings.HasPrefix(msg, "Denied by policy rule 'no-force-push'") {
				t.Errorf("denied exec: %q", msg)
			}
			if reqs := f.emu.Requests()[mark:]; len(reqs) != 0 {
				t.Errorf("denied calls reached E2B: %d requests, first %s %s", len(reqs), reqs[0].Method, reqs[0].Path)
			}
			if n := len(f.emu.Sandboxes()); n != 0 {
				t.Errorf("the emulator has %d sandboxes after a denied create", n)
			}

			entries := f.auditEntries(t)
			if len(entries) != 2 {
				t.Fatalf("audit has %d entries, want 2: %+v", len(entries), entries)
			}
			e := entries[0]
			if e.Tool != "e2b_create_sandbox" || e.Decision != "deny" || e.Rule != "no-new-sandboxes" ||
				e.Outcome != audit.OutcomeDenied || e.Owner != "alice" || e.Session != "s1" || e.Args["title"] != "nope" {
				t.Errorf("audit entry of the denied create: %+v", e)
			}
			if e := entries[1]; e.SandboxID != "abc" || e.Rule != "no-force-push" || e.Outcome != audit.OutcomeDenied {
				t.Errorf("audit entry of the denied exec: %+v", e)
			}
		})
	}
}

// Every call is audited with its decision, rule, outcome, sandbox and duration; the lease is renewed by use.
func TestAuditEntryPerCall(t *testing.T) {
	for _, version := range eras {
		t.Run(version, func(t *testing.T) {
			now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
			clock := func() time.Time { return now }
			f := newFixture(t, fixtureOpts{mutate: func(c *Config, _ *e2btest.Server) {
				c.Now = clock
				c.Lease = time.Hour
			}})
			c := connect(t, f.srv, version, nil)

			id := createSandbox(t, c)
			mustOK(t, c, "e2b_list_sandboxes", map[string]any{})
			mustFail(t, c, "e2b_manage_sandbox", map[string]any{"sandbox_id": "nosuchsandbox", "action": "pause"})
			mustOK(t, c, "e2b_manage_sandbox", map[string]any{"sandbox_id": id, "action": "pause"})

			entries := f.auditEntries(t)
			type row struct{ tool, outcome, sandbox, decision, rule string }
			var got []row
			for _, e := range entries {
				got = append(got, row{e.Tool, e.Outcome, e.SandboxID, e.Decision, e.Rule})
				if !e.Time.Equal(now) || e.DurationMS != 0 || e.Owner != "alice" || e.Session != "s1" {
					t.Errorf("entry %+v: want time %v, duration 0, alice/s1", e, now)
				}
			}
			want := []row{
				{"e2b_create_sandbox", "ok", "", "allow", "allow-sandbox-tools"},
				{"e2b_list_sandboxes", "ok", "", "allow", "allow-sandbox-tools"},
				{"e2b_manage_sandbox", "error", "nosuchsandbox", "allow", "allow-sandbox-tools"},
				{"e2b_manage_sandbox", "ok", id, "allow", "allow-sandbox-tools"},
			}
			if !slices.Equal(got, want) {
				t.Errorf("audit rows\n got %v\nwant %v", got, want)
			}
			if entries[2].Error == "" || !strings.Contains(entries[2].Error, "nosuchsandbox") {
				t.Errorf("failed call's audit error: %q", entries[2].Error)
			}

			sessions, err := f.srv.Store().Sessions()
			if err != nil {
				t.Fatal(err)
			}
			if len(sessions) != 1 || sessions[0].Owner != "alice" || sessions[0].Name != "s1" ||
				!sessions[0].LeaseExpires.Equal(now.Add(time.Hour)) {
				t.Errorf("sessions after calls: %+v; want alice/s1 leased until %v", sessions, now.Add(time.Hour))
			}
		})
	}
}

// Argument names the schema does not declare are refused before the policy: Go's JSON decoding would bind
// {"Command": ...} to the command field case-insensitively, slipping past a rule on "command".
func TestUndeclaredArgumentNamesRefused(t *testing.T) {
	f := newFixture(t, fixtureOpts{policy: denyCreatePolicy})
	c := connect(t, f.srv, eras[0], nil)
	mark := len(f.emu.Requests())
	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"e2b_exec", map[string]any{"sandbox_id": "abc", "Command": "git push --force"}, "Unknown parameter: Command"},
		{"e2b_list_sandboxes", map[string]any{"owner": "bob"}, "Unknown parameter: owner"},
		{"e2b_create_sandbox", map[string]any{"upload_files": []any{map[string]any{"session_path": "a", "Sandbox_Path": "/etc/x"}}},
			"Unknown parameter: upload_files[0].Sandbox_Path"},
	} {
		msg := mustFail(t, c, tc.tool, tc.args)
		if !strings.HasPrefix(msg, tc.want) {
			t.Errorf("%s %v: %q, want %q", tc.tool, tc.args, msg, tc.want)
		}
	}
	if reqs := f.emu.Requests()[mark:]; len(reqs) != 0 {
		t.Errorf("refused calls reached E2B: %d requests", len(reqs))
	}
	for _, e := range f.auditEntries(t) {
		if e.Decision != decisionInvalid || e.Outcome != audit.OutcomeError {
			t.Errorf("audit entry %+v: want decision %s, outcome error", e, decisionInvalid)
		}
	}
	// Declared names still pass, including the keys of an object-valued parameter.
	mustOK(t, c, "e2b_list_sandboxes", map[string]any{})
	msg := mustFail(t, c, "e2b_create_sandbox", map[string]any{"env_vars": map[string]any{"AnyName": "x"}})
	if !strings.HasPrefix(msg, "Denied by policy rule 'no-new-sandboxes'") {
		t.Errorf("create with env_vars: %q, want the policy's denial", msg)
	}
}

// An argument the tool's schema refuses (a wrong type, a number out of range, a required one missing or empty, a
// value outside its enum) is refused before the policy and never reaches the tool: nothing is asked of E2B, the
// sandbox's step count does not move, and each refusal is in the audit log as invalid_arguments, naming the
// argument and what is wrong with it.
func TestArgumentsTheSchemaRefusesNeverRun(t *testing.T) {
	f := newFixture(t, fixtureOpts{policy: denyListPolicy})
	c := connect(t, f.srv, eras[0], nil)
	id := createSandbox(t, c)
	before := len(f.auditEntries(t))
	mark := len(f.emu.Requests())
	cases := []struct {
		tool string
		args map[string]any
		want string
	}{
		{"e2b_exec", map[string]any{"sandbox_id": id, "command": "true", "timeout_ms": 0},
			"Invalid timeout_ms 0: it must be between 1 and 3600000 (default 60000)."},
		{"e2b_exec", map[string]any{"sandbox_id": id, "command": "true", "timeout_ms": "5"},
			"Invalid parameter timeout_ms: expected an integer, got string"},
		{"e2b_exec", map[string]any{"sandbox_id": id, "command": "true", "wait_ms": 2.5},
			"Invalid parameter wait_ms: expected an integer, got number 2.5"},
		{"e2b_exec", map[string]any{"sandbox_id": id, "command": ""}, "Missing required parameter: command (it is empty)"},
		{"e2b_exec", map[string]any{"sandbox_id": id, "command": "true", "cwd": ""},
			"Invalid cwd: it is empty; leave it out for its default, /home/user."},
		{"e2b_exec", map[string]any{"sandbox_id": id}, "Missing required parameter: command"},
		// Ahead of the policy, which denies every e2b_list_sandboxes.
		{"e2b_list_sandboxes", map[string]any{"offset": -1}, "Invalid offset -1: it must be at least 0."},
		{"e2b_manage_sandbox", map[string]any{"sandbox_id": id, "action": "explode"},
			"Invalid action 'explode': it must be pause, resume or delete."},
		{"e2b_get_url", map[string]any{"sandbox_id": id, "port": 70000},
			"Invalid port 70000: it must be between 1 and 65535."},
		{"e2b_read_output", map[string]any{"sandbox_id": id, "pid": -1}, "Invalid pid -1: it must be between 1 and 4194304."},
		{"e2b_read_file", map[string]any{"sandbox_id": id, "path": "/etc/hosts", "limit": 0},
			"Invalid limit 0: it must be at least 1 (default 2000)."},
		{"e2b_write_file", map[string]any{"sandbox_id": id, "path": "a.txt", "content": nil},
			"Invalid parameter content: expected a string, got null"},
		{"e2b_create_sandbox", map[string]any{"timeout_seconds": -5},
			"Invalid timeout_seconds -5: it must be at least 1 (default 3600)."},
		{"e2b_create_sandbox", map[string]any{"env_vars": map[string]any{"HOME": 1}},
			"Invalid parameter env_vars.HOME: expected a string, got number 1"},
	}
	for _, tc := range cases {
		if msg := mustFail(t, c, tc.tool, tc.args); msg != tc.want {
			t.Errorf("%s %v:\n got %q\nwant %q", tc.tool, tc.args, msg, tc.want)
		}
	}
	if reqs := f.emu.Requests()[mark:]; len(reqs) != 0 {
		t.Errorf("refused calls reached E2B: %d requests, the first %v", len(reqs), reqs[0])
	}
	if rec, err := f.srv.Store().Sandbox("alice", id); err != nil || rec.Steps != 0 {
		t.Errorf("the sandbox after the refused calls: %+v, %v; want no step counted", rec, err)
	}
	entries := f.auditEntries(t)[before:]
	if len(entries) != len(cases) {
		t.Fatalf("%d audit entries for %d refused calls", len(entries), len(cases))
	}
	for i, e := range entries {
		if e.Tool != cases[i].tool || e.Decision != decisionInvalid || e.Outcome != audit.OutcomeError ||
			e.Error != cases[i].want {
			t.Errorf("audit entry %d %+v: want %s refused as %s with its message", i, e, cases[i].tool, decisionInvalid)
		}
	}
}

// The stdio session's lease starts afresh when the server starts, before the first orphan sweep.
func TestRunRenewsStdioLease(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	f := newFixture(t, fixtureOpts{mutate: func(c *Config, _ *e2btest.Server) {
		c.Now = func() time.Time { return now }
		c.Lease = 2 * time.Hour
	}})
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // Run returns at once; the lease is renewed beside serving, before the first sweep and before Run returns
	if err := f.srv.Run(ctx, strings.NewReader(""), io.Discard); err != nil {
		t.Fatal(err)
	}
	sessions, err := f.srv.Store().Sessions()
	if err != nil {
		t.Fatal(err)
	}
	if len(sessions) != 1 || !sessions[0].LeaseExpires.Equal(now.Add(2*time.Hour)) {
		t.Fatalf("sessions %+v", sessions)
	}
}

// SIGHUP reloads the policy file at once; a version that does not parse leaves the old one in force.
func TestPolicyReloadOnSignal(t *testing.T) {
	f := newFixture(t, fixtureOpts{policy: allowAll})
	c := connect(t, f.srv, eras[0], nil)
	ch := make(chan os.Signal)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { f.srv.reloadOn(ctx, ch); close(done) }()
	defer func() { cancel(); waitfor.Recv(t, done, 30*time.Second, "the signal reloader to stop") }()

	mustOK(t, c, "e2b_list_sandboxes", map[string]any{})
	path := f.srv.Policies().Path()
	if err := os.WriteFile(path, []byte(denyListPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	// The second send is taken once the first reload is done.
	hangUp(t, ch)
	hangUp(t, ch)
	if msg := mustFail(t, c, "e2b_list_sandboxes", map[string]any{}); !strings.HasPrefix(msg, "Denied by policy rule 'no-listing'") {
		t.Errorf("after the reload: %q", msg)
	}

	if err := os.WriteFile(path, []byte("default_action: maybe\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hangUp(t, ch)
	hangUp(t, ch)
	if msg := mustFail(t, c, "e2b_list_sandboxes", map[string]any{}); !strings.HasPrefix(msg, "Denied by policy rule 'no-listing'") {
		t.Errorf("a broken policy file replaced the one in force: %q", msg)
	}
}

// hangUp sends SIGHUP to the reloader listening on ch, failing t when it does not take it.
func hangUp(t *testing.T, ch chan<- os.Signal) {
	t.Helper()
	select {
	case ch <- syscall.SIGHUP:
	case <-time.After(30 * time.Second):
		t.Fatal("the reloader did not take a SIGHUP within 30s (a reload is stuck)")
	}
}

const denyListPolicy = `default_action: allow
rules:
  - id: no-listing
    when: { target: e2b_list_sandboxes }
    then: { decision: deny, reason: not today }
`

// Run sweeps orphans once at start: the sandboxes of a session whose lease ran out get the orphan action,
// while the sandboxes of the session being served are left alone.
func TestRunSweepsAtStart(t *testing.T) {
	emu, err := e2btest.New(e2btest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer emu.Close()
	dir := t.TempDir()
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	secrets := newTestSecrets() // the data key both servers seal the records with
	cfg := func(session string) Config {
		return Config{Owner: "alice", Session: session, StateDir: dir, Lease: time.Hour, Now: clock,
			Backend: emulatorAt(emu.URL()), Secrets: secrets, Logger: testLogger(t)}
	}

	old, err := New(cfg("old"))
	if err != nil {
		t.Fatal(err)
	}
	orphan := createSandbox(t, connect(t, old, eras[1], nil))
	old.Close()

	mu.Lock()
	now = now.Add(2 * time.Hour) // the "old" session's lease has run out
	mu.Unlock()

	cur, err := New(cfg("current"))
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	mine := createSandbox(t, connect(t, cur, eras[1], nil))

	inR, inW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- cur.Run(t.Context(), inR, io.Discard) }()
	waitfor.Until(t, 20*time.Second, "the sweep at start to pause the orphan of the lapsed session", func() bool {
		sb, _ := emu.Sandbox(orphan)
		return sb.State == "paused"
	})
	inW.Close()
	if err := awaitRun(t, done); err != nil {
		t.Fatal(err)
	}
	if sb, _ := emu.Sandbox(mine); sb.State != "running" {
		t.Errorf("the served session's sandbox is %q, want running", sb.State)
	}
}

// leaseTest is a server with the given lease on a clock the test sets, a client of it, and its one session.
type leaseTest struct {
	t     *testing.T
	f     *fixture
	c     *client.Client
	start time.Time

	mu  sync.Mutex
	now time.Time
}

func newLeaseTest(t *testing.T, lease time.Duration) *leaseTest {
	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	l := &leaseTest{t: t, start: start, now: start}
	l.f = newFixture(t, fixtureOpts{mutate: func(c *Config, _ *e2btest.Server) {
		c.Lease = lease
		c.Now = func() time.Time { l.mu.Lock(); defer l.mu.Unlock(); return l.now }
	}})
	l.c = connect(t, l.f.srv, eras[0], nil)
	return l
}

// setClock sets the server's clock to d after the start.
func (l *leaseTest) setClock(d time.Duration) {
	l.mu.Lock()
	l.now = l.start.Add(d)
	l.mu.Unlock()
}

// expiry is when the session's lease runs out, as stored.
func (l *leaseTest) expiry() time.Time {
	l.t.Helper()
	sessions, err := l.f.srv.Store().Sessions()
	if err != nil || len(sessions) != 1 {
		l.t.Fatalf("sessions %v %v", sessions, err)
	}
	return sessions[0].LeaseExpires
}

// Renewing the lease is a durable write, so it happens at most once per tenth of the lease (a minute at most);
// the lease is never further than that from its full length.
func TestLeaseRenewalThrottled(t *testing.T) {
	l := newLeaseTest(t, time.Hour)
	c, start, expiry := l.c, l.start, l.expiry
	at := func(d time.Duration) {
		l.setClock(d)
		mustOK(t, c, "e2b_list_sandboxes", map[string]any{})
	}
	at(0)
	if got := expiry(); !got.Equal(start.Add(time.Hour)) {
		t.Fatalf("first call: lease until %v", got)
	}
	at(30 * time.Second)
	if got := expiry(); !got.Equal(start.Add(time.Hour)) {
		t.Errorf("a call 30s later rewrote the lease: %v", got)
	}
	at(61 * time.Second)
	if got := expiry(); !got.Equal(start.Add(61*time.Second + time.Hour)) {
		t.Errorf("a call after a minute did not renew the lease: %v", got)
	}
}

const defaultsPolicy = `default_action: allow
rules:
  - id: no-base-template
    when: { target: e2b_create_sandbox, template: base }
    then: { decision: deny, reason: use a project template }
  - id: short-commands-only
    when: { target: e2b_exec, timeout_seconds: { min: 61 } }
    then: { decision: deny, reason: commands may run a minute at most }
`

// The policy judges a call as the tool will act on it: a parameter left out counts with its schema default, so a
// rule on the default template or timeout cannot be sidestepped by omitting the argument.
func TestPolicySeesSchemaDefaults(t *testing.T) {
	f := newFixture(t, fixtureOpts{policy: defaultsPolicy})
	c := connect(t, f.srv, eras[0], nil)
	mark := len(f.emu.Requests())
	if msg := mustFail(t, c, "e2b_create_sandbox", map[string]any{"title": "implicit base"}); !strings.HasPrefix(msg, "Denied by policy rule 'no-base-template'") {
		t.Errorf("create relying on the default template: %q", msg)
	}
	if reqs := f.emu.Requests()[mark:]; len(reqs) != 0 {
		t.Errorf("the denied create reached E2B: %d requests", len(reqs))
	}
	// The audit keeps the arguments as the client sent them.
	if entries := f.auditEntries(t); len(entries) != 1 || entries[0].Args["template"] != nil {
		t.Errorf("audit entries: %+v", entries)
	}
	// An explicit other template passes the rule (and reaches E2B, which knows no such template); exec within the
	// default timeout passes the rule (and meets an unknown sandbox), exec beyond it does not.
	if msg := mustFail(t, c, "e2b_create_sandbox", map[string]any{"template": "project"}); strings.HasPrefix(msg, "Denied") {
		t.Errorf("create with an explicit template: %q", msg)
	}
	if msg := mustFail(t, c, "e2b_exec", map[string]any{"sandbox_id": "abc", "command": "true"}); !strings.HasPrefix(msg, "Sandbox 'abc' not found") {
		t.Errorf("exec with the default timeout: %q", msg)
	}
	if msg := mustFail(t, c, "e2b_exec", map[string]any{"sandbox_id": "abc", "command": "true", "timeout_ms": 120000}); !strings.HasPrefix(msg, "Denied by policy rule 'short-commands-only'") {
		t.Errorf("exec with a long timeout: %q", msg)
	}
}

// At start the server reconciles every live session with E2B: a tagged sandbox the store never recorded (a crash
// between create and record) is adopted, with its envd token, before any call is made.
func TestRunReconcilesAtStart(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	sb, err := f.emu.CreateSandbox(testKey("alice"), e2btest.SandboxOptions{Secure: true,
		Metadata: lifecycle.Metadata("alice", "s1", "unrecorded")})
	if err != nil {
		t.Fatal(err)
	}
	stray, err := f.emu.CreateSandbox(testKey("alice"), e2btest.SandboxOptions{Metadata: map[string]string{"other": "tool"}})
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- f.srv.Run(t.Context(), inR, io.Discard) }()
	var rec state.SandboxRecord
	waitfor.Until(t, 30*time.Second, "the unrecorded sandbox to be adopted at start", func() bool {
		rec, err = f.srv.Store().Sandbox("alice", sb.ID)
		return err == nil
	})
	inW.Close()
	if err := awaitRun(t, done); err != nil {
		t.Fatal(err)
	}
	if rec.Session != "s1" || rec.Title != "unrecorded" || rec.AccessToken != sb.AccessToken {
		t.Errorf("adopted record: session %q, title %q, token kept: %v", rec.Session, rec.Title, rec.AccessToken == sb.AccessToken)
	}
	if _, err := f.srv.Store().Sandbox("alice", stray.ID); err == nil {
		t.Error("a sandbox without this server's tags was adopted")
	}
}

// Path rules judge the path the sandbox will use: a relative path is under /home/user, so "../../tmp/t.txt" is
// /tmp/t.txt; an upload without sandbox_path lands in /home/user under its own name, and a directory upload writes
// every file below it. Each denied call reaches no E2B.
func TestPolicyJudgesSandboxPaths(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, ".ssh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, ".ssh", "authorized_keys"), []byte("ssh-ed25519 AAAA attacker"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, fixtureOpts{policy: `default_action: allow
rules:
  - id: no-tmp
    when: { path: "/tmp/**" }
    then: { decision: deny, reason: not in tmp }
  - id: no-authorized-keys
    when: { path: "**/authorized_keys" }
    then: { decision: deny, reason: no ssh access }
`, mutate: func(c *Config, _ *e2btest.Server) { c.Tools.StorageRoots = []string{root} }})
	c := connect(t, f.srv, eras[0], nil)
	id := createSandbox(t, c)
	mark := len(f.emu.Requests())
	for _, call := range []struct {
		tool string
		args map[string]any
		rule string
	}{
		{"e2b_read_file", map[string]any{"sandbox_id": id, "path": "../../tmp/t.txt"}, "no-tmp"},
		{"e2b_write_file", map[string]any{"sandbox_id": id, "path": "../../tmp/t.txt", "content": "x"}, "no-tmp"},
		{"e2b_create_sandbox", map[string]any{"upload_files": []any{map[string]any{"session_path": ".ssh"}}}, "no-authorized-keys"},
		{"e2b_create_sandbox", map[string]any{"upload_files": []any{map[string]any{"session_path": ".ssh", "sandbox_path": "../../tmp/k"}}}, "no-tmp"},
	} {
		if msg := mustFail(t, c, call.tool, call.args); !strings.HasPrefix(msg, "Denied by policy rule '"+call.rule+"'") {
			t.Errorf("%s %v: %q", call.tool, call.args, msg)
		}
	}
	if reqs := f.emu.Requests()[mark:]; len(reqs) != 0 {
		t.Errorf("denied calls reached E2B: %d requests", len(reqs))
	}
}

// A session is in use while a call of it runs: the lease is renewed during a call that outlasts it, and once more
// when the call ends, so the lease counts from the end of the last call and no sweep takes a session's sandboxes
// under a running call.
func TestLeaseHeldWhileACallRuns(t *testing.T) {
	const lease = time.Second // renewed every half second (real time) while a call runs
	l := newLeaseTest(t, lease)
	f, c, start, setClock, expiry := l.f, l.c, l.start, l.setClock, l.expiry
	id := createSandbox(t, c)
	sb, _ := f.emu.Sandbox(id)

	// The command says it runs by a file in the sandbox's /tmp, and runs until the test makes another one.
	type answer struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		var req mcp.CallToolRequest
		req.Params.Name = "e2b_exec"
		req.Params.Arguments = map[string]any{"sandbox_id": id, "command": "touch /tmp/running; while [ ! -e /tmp/go ]; do sleep 0.02; done"}
		res, err := c.CallTool(t.Context(), req)
		done <- answer{res, err}
	}()
	waitfor.Until(t, 30*time.Second, "the command to start", func() bool {
		_, err := os.Stat(filepath.Join(sb.Dir, "tmp", "running"))
		return err == nil
	})
	if got := expiry(); !got.Equal(start.Add(lease)) {
		t.Fatalf("the lease at the call's start expires at %v, want %v", got, start.Add(lease))
	}
	setClock(10 * time.Second) // the lease taken at the call's start has run out meanwhile
	waitfor.Until(t, 30*time.Second, "the lease to be renewed while the call runs", func() bool {
		return expiry().Equal(start.Add(10*time.Second + lease))
	})
	setClock(20 * time.Second)
	if err := os.WriteFile(filepath.Join(sb.Dir, "tmp", "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-done:
		if a.err != nil || a.res.IsError {
			t.Fatalf("exec: %v %v", a.err, a.res)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the command did not end after its file was made")
	}
	if got := expiry(); !got.Equal(start.Add(20*time.Second + lease)) {
		t.Errorf("the lease after the call ended expires at %v, want %v (a lease from the call's end)", got, start.Add(20*time.Second+lease))
	}
}
