package tests

import (
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// When a session's lease lapses, its sandboxes get the orphan action from whichever server sweeps next; sandboxes
// of live sessions (whatever lease the sweeping server has itself) and sandboxes without e2b-mcp's tags are left
// alone.
func TestOrphanedSessionSandboxes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		action string
		check  func(found bool, state string) bool
	}{
		{"pause", func(found bool, state string) bool { return found && state == "paused" }},
		{"kill", func(found bool, _ string) bool { return !found }},
	} {
		t.Run(tc.action, func(t *testing.T) {
			t.Parallel() // each has its own owner and state directory; their waits overlap
			x := newH(t)
			owner := x.owner("orphans")
			key := x.login(owner)
			// The sandboxes are made under an hour's lease, so that no call has to finish within a short one
			// (a race-built binary on a loaded machine takes its time); the short lease is given afterwards.
			long := []string{"--lease", "1h", "--orphan-action", tc.action}
			const short = "500ms"

			// A live session (its server stopped, its lease an hour): its sandbox must be left alone.
			kept := x.startStdio(clientOpts{}, x.serveArgs(owner, "current", long...)...)
			live := create(t, kept.Client, map[string]any{"title": "in use"})
			ok(t, kept.Client, "e2b_exec", map[string]any{"sandbox_id": live, "command": "true"})
			kept.Close()

			old := x.startStdio(clientOpts{}, x.serveArgs(owner, "old", long...)...)
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

			// The old session is used again under the short lease and left idle: it lapses.
			again := x.startStdio(clientOpts{}, x.serveArgs(owner, "old", "--lease", short, "--orphan-action", tc.action)...)
			ok(t, again.Client, "e2b_list_sandboxes", map[string]any{})
			again.Close()

			// A server in yet another session, with the short lease as its own flag, sweeps. By the time the old
			// session has lapsed, the current session was last renewed longer ago than that short lease: a sweeper
			// that judged other sessions by its own lease would take it too, and no later than the old one (a
			// sweep goes through the sessions in name order, "current" before "old").
			x.startStdio(clientOpts{}, x.serveArgs(owner, "sweeper", "--lease", short, "--sweep-interval", "50ms", "--orphan-action", tc.action)...)
			waitfor.Until(t, 30*time.Second, "the lapsed session's sandbox gets the orphan action "+tc.action, func() bool {
				sb, found := the.emu.Sandbox(orphan)
				return tc.check(found, sb.State)
			})
			if sb, found := the.emu.Sandbox(live); !found || sb.State != "running" {
				t.Errorf("a sandbox of a session whose lease has not lapsed got the orphan action (found %v, %q)", found, sb.State)
			}
			if sb, found := the.emu.Sandbox(foreign.SandboxID); !found || sb.State != "running" {
				t.Errorf("a sandbox without e2b-mcp's tags was touched (found %v, %q)", found, sb.State)
			}
		})
	}
}
