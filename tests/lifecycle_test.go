package tests

import (
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b"
)

// When a session's lease lapses, its sandboxes get the orphan action from whichever server sweeps next; sandboxes
// of live sessions and sandboxes without e2b-mcp's tags are left alone.
func TestOrphanedSessionSandboxes(t *testing.T) {
	for _, tc := range []struct {
		action string
		check  func(found bool, state string) bool
	}{
		{"pause", func(found bool, state string) bool { return found && state == "paused" }},
		{"kill", func(found bool, _ string) bool { return !found }},
	} {
		t.Run(tc.action, func(t *testing.T) {
			x := newH(t)
			owner := x.owner("orphans")
			key := x.login(owner)
			// A short lease, so the first session lapses soon after its server stops; not so short that a call of
			// a live session on a loaded machine (a race-built binary, creates taking hundreds of ms) outlasts it.
			flags := []string{"--lease", "2s", "--sweep-interval", "50ms", "--orphan-action", tc.action}

			old := x.startStdio(clientOpts{}, x.serveArgs(owner, "old", "--lease", "1h", "--orphan-action", tc.action)...)
			orphan := create(t, old.Client, map[string]any{"title": "left behind"})
			old.Close()

			// A sandbox this server did not make: same E2B team, no e2b-mcp tags.
			ec, err := e2b.NewClient(e2b.Config{APIKey: key, APIURL: the.emu.URL(), SandboxURL: the.emu.URL()})
			if err != nil {
				t.Fatal(err)
			}
			foreign, err := ec.CreateSandbox(t.Context(), e2b.NewSandbox{TemplateID: "base", Timeout: 600, Secure: true})
			if err != nil {
				t.Fatal(err)
			}
			the.noteSandbox(foreign.SandboxID)

			// The old session's lease was an hour when it was last renewed, so it has not lapsed: a new server
			// with a short lease of its own must not touch the old session's sandbox because of its own flag.
			cur := x.startStdio(clientOpts{}, x.serveArgs(owner, "current", flags...)...)
			live := create(t, cur.Client, map[string]any{"title": "in use"})
			ok(t, cur.Client, "e2b_exec", map[string]any{"sandbox_id": live, "command": "true"})
			if sb, found := the.emu.Sandbox(orphan); !found || sb.State != "running" {
				t.Fatalf("a sandbox of a session whose lease has not lapsed got the orphan action (found %v, %q)", found, sb.State)
			}
			cur.Close()

			// Now the old session is started again with the short lease and left idle: it lapses, and the next
			// sweep (of a server in yet another session) applies the orphan action to its sandboxes only.
			again := x.startStdio(clientOpts{}, x.serveArgs(owner, "old", flags...)...)
			ok(t, again.Client, "e2b_list_sandboxes", map[string]any{})
			again.Close()
			x.startStdio(clientOpts{}, x.serveArgs(owner, "sweeper", "--lease", "1h", "--sweep-interval", "50ms", "--orphan-action", tc.action)...)
			waitFor(t, 30*time.Second, "the lapsed session's sandbox gets the orphan action "+tc.action, func() bool {
				sb, found := the.emu.Sandbox(orphan)
				return tc.check(found, sb.State)
			})
			if sb, found := the.emu.Sandbox(foreign.SandboxID); !found || sb.State != "running" {
				t.Errorf("a sandbox without e2b-mcp's tags was touched (found %v, %q)", found, sb.State)
			}
		})
	}
}
