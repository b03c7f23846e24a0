package cli

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/state"
)

// usage sums the store's running time, creates and peak per owner and template, from --since on, for one owner
// when asked; it opens no sealed secret.
func TestUsageCommand(t *testing.T) {
	e := newEnv(t)
	dir := filepath.Join(e.env["XDG_STATE_HOME"], "e2b-mcp")
	clock := e.now.Add(-48 * time.Hour)
	st, err := state.Open(dir, state.Options{Keys: state.StaticKeySource(bytes.Repeat([]byte{3}, 32)),
		Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	put := func(owner, id, template, st8 string) {
		t.Helper()
		if err := st.PutSandbox(state.SandboxRecord{ID: id, Owner: owner, Template: template, State: st8,
			AccessToken: "secret-token", Created: clock}); err != nil {
			t.Fatal(err)
		}
	}
	put("alice", "a1", "base", state.StateRunning) // two days ago, paused after 90 minutes
	clock = clock.Add(90 * time.Minute)
	put("alice", "a1", "base", state.StatePaused)
	clock = e.now.Add(-time.Hour)
	put("alice", "a2", "python", state.StateRunning) // running for the last hour
	put("alice", "a3", "base", state.StateRunning)
	put("bob", "b1", "base", state.StateRunning)
	clock = clock.Add(30 * time.Minute)
	put("alice", "a3", "base", state.StateGone)
	put("bob", "b1", "base", state.StateGone)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	r := e.run(t, "", "usage")
	for _, want := range []string{
		"since 2026-05-01 (UTC)", // the first of the month
		"alice  (all)     1.50           2        2",
		"alice  base      0.50           1        -",
		"alice  python    1.00           1        -",
		"bob    (all)     0.50           1        1",
	} {
		if r.code != exitOK || !strings.Contains(r.stdout, want) {
			t.Errorf("usage: exit %d, want %q in\n%s%s", r.code, want, r.stdout, r.stderr)
		}
	}
	r = e.run(t, "", "usage", "--owner", "alice", "--since", "2026-04-29")
	if !strings.Contains(r.stdout, "alice  (all)     3.00           3        2") || strings.Contains(r.stdout, "bob") {
		t.Errorf("usage of alice since 2026-04-29:\n%s%s", r.stdout, r.stderr)
	}
	if r := e.run(t, "", "usage", "--since", "yesterday"); r.code != exitUsage || !strings.Contains(r.stderr, "want a date") {
		t.Errorf("a --since that is not a date: exit %d\n%s", r.code, r.stderr)
	}
}
