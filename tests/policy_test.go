package tests

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A policy file edited while the server runs takes effect without a restart; an edit that does not parse leaves
// the previous policy in force.
func TestPolicyReload(t *testing.T) {
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
	waitFor(t, 30*time.Second, "the edited policy denies exec", func() bool {
		res := call(t, s.Client, "e2b_exec", echo)
		return res.IsError && strings.Contains(text(res), "frozen")
	})

	write("default_action: allow\nrules:\n  - id: broken\n    when: { target: e2b_nosuchtool }\n    then: { decision: allow }\n")
	if err := s.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the server logs that the broken policy was not loaded", func() bool {
		return strings.Contains(s.stderr.String(), "not reloaded")
	})
	if msg := fails(t, s.Client, "e2b_exec", echo); !strings.Contains(msg, "frozen") {
		t.Errorf("after a broken edit: %q, want the previous policy (rule frozen) still in force", msg)
	}
}
