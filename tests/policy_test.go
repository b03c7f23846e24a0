package tests

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// A policy file edited while the server runs takes effect without a restart; an edit that does not parse leaves
// the previous policy in force.
func TestPolicyReload(t *testing.T) {
	t.Parallel()
	x := newH(t)
	owner := x.owner("reload")
	x.login(owner)
	path := x.path("live.yaml")
	write := func(doc string) {
		t.Helper()
		// Written to a new file and renamed over the old, as editors do, so the server never reads half a file.
		if err := os.WriteFile(path+".new", []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".new", path); err != nil {
			t.Fatal(err)
		}
	}
	write("default_action: allow\nrules: []\n")
	s := x.startStdio(clientOpts{}, x.serveArgs(owner, "reload", "--policy", path)...)
	id := create(t, s.Client, map[string]any{"title": "reload"})
	echo := map[string]any{"sandbox_id": id, "command": "echo hi"}
	ok(t, s.Client, "e2b_exec", echo)

	write("default_action: allow\nrules:\n  - id: frozen\n    when: { target: e2b_exec }\n    then: { decision: deny, reason: exec is frozen }\n")
	// SIGHUP reloads at once; the file watch would too, later.
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitfor.Until(t, 30*time.Second, "the edited policy denies exec", func() bool {
		res := call(t, s.Client, "e2b_exec", echo)
		return res.IsError && strings.Contains(text(res), "frozen")
	})

	write("default_action: allow\nrules:\n  - id: broken\n    when: { target: e2b_nosuchtool }\n    then: { decision: allow }\n")
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if !s.stderr.shows("not reloaded", 30*time.Second) {
		t.Fatalf("the server does not log that the broken policy was not loaded:\n%s", s.stderr)
	}
	if msg := fails(t, s.Client, "e2b_exec", echo); !strings.Contains(msg, "frozen") {
		t.Errorf("after a broken edit: %q, want the previous policy (rule frozen) still in force", msg)
	}
}

// Path rules judge the file the sandbox will open, through the built binary: a relative path is the sandbox's
// /home/user/..., so "../../tmp/t.txt" falls to a rule on /tmp/**, while the same relative form under the home
// directory reaches the file a later absolute read finds; an upload without sandbox_path is judged at each file it
// writes (the attack: {"session_path": ".ssh"} landed in /home/user/.ssh/authorized_keys past a **/.ssh/** deny).
func TestPolicyJudgesSandboxPaths(t *testing.T) {
	t.Parallel()
	x := newH(t)
	owner := x.owner("paths")
	x.login(owner)
	root := x.path("root")
	if err := os.MkdirAll(root+"/.ssh", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(root+"/.ssh/authorized_keys", []byte("ssh-ed25519 AAAA attacker\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	policy := x.path("paths.yaml")
	if err := os.WriteFile(policy, []byte(`default_action: allow
rules:
  - id: no-tmp
    when: { path: "/tmp/**" }
    then: { decision: deny, reason: not in tmp }
  - id: no-ssh
    when: { path: "**/.ssh/**" }
    then: { decision: deny, reason: no ssh keys }
`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := x.startStdio(clientOpts{}, x.serveArgs(owner, "paths", "--policy", policy, "--storage-root", root)...)
	id := create(t, s.Client, map[string]any{"title": "paths"})
	for _, c := range []struct {
		tool string
		args map[string]any
		rule string
	}{
		{"e2b_write_file", map[string]any{"sandbox_id": id, "path": "../../tmp/t.txt", "content": "x"}, "no-tmp"},
		{"e2b_read_file", map[string]any{"sandbox_id": id, "path": "../../tmp/t.txt"}, "no-tmp"},
		{"e2b_write_file", map[string]any{"sandbox_id": id, "path": "~/.ssh/authorized_keys", "content": "x"}, "no-ssh"},
		{"e2b_create_sandbox", map[string]any{"upload_files": []any{map[string]any{"session_path": ".ssh"}}}, "no-ssh"},
	} {
		if msg := fails(t, s.Client, c.tool, c.args); !strings.HasPrefix(msg, "Denied by policy rule '"+c.rule+"'") {
			t.Errorf("%s %v: %q", c.tool, c.args, msg)
		}
	}
	ok(t, s.Client, "e2b_write_file", map[string]any{"sandbox_id": id, "path": "notes/../notes.txt", "content": "kept\n"})
	if got := ok(t, s.Client, "e2b_read_file", map[string]any{"sandbox_id": id, "path": "/home/user/notes.txt"}); !strings.Contains(str(got, "content"), "kept") {
		t.Errorf("the relative write did not land where the policy judged it: %v", got)
	}
}
