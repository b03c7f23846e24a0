package tools

import (
	"strings"
	"testing"
)

// A caller cannot store a megabyte title or checkpoint name, nor get a megabyte (or a forged line) back by
// sending it as an ID: names are bounded and must be printable, and an unknown ID is repeated as a short,
// escaped prefix.
func TestNamesAndIDsBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.connect(t, eras[0], Caller{Owner: "alice", Session: "s1"})
	huge := strings.Repeat("x", 1<<20)
	wantContains(t, s.fail(t, "e2b_create_sandbox", map[string]any{"title": huge}), "Invalid title", "1048576 bytes", "at most 256")
	wantContains(t, s.fail(t, "e2b_create_sandbox", map[string]any{"title": "ok\x1b[2K"}), "Invalid title", `ok\x1b[2K`)
	if n := len(e.emu.Sandboxes()); n != 0 {
		t.Fatalf("a refused title made %d sandboxes", n)
	}
	id := s.createSandbox(t, map[string]any{"title": strings.Repeat("t", maxNameBytes)})
	wantContains(t, s.fail(t, "e2b_checkpoint_sandbox", map[string]any{"sandbox_id": id, "name": huge}), "Invalid name", "at most 256")
	wantContains(t, s.fail(t, "e2b_fork_sandbox", map[string]any{"sandbox_id": id, "title": "a\nb"}), "Invalid title", `a\nb`)

	bad := "bad\nline" + huge
	for _, tc := range []struct {
		tool, param string
		args        map[string]any
	}{
		{"e2b_exec", "sandbox_id", map[string]any{"sandbox_id": bad, "command": "true"}},
		{"e2b_manage_sandbox", "action", map[string]any{"sandbox_id": id, "action": bad}},
		{"e2b_delete_checkpoint", "checkpoint_id", map[string]any{"checkpoint_id": bad}},
		{"e2b_fork_sandbox", "checkpoint_id", map[string]any{"checkpoint_id": bad}},
	} {
		got := s.fail(t, tc.tool, tc.args)
		if len(got) > 1024 || strings.Contains(got, "\n") || !strings.Contains(got, `bad\nline`) || !strings.Contains(got, "(1048584 bytes)") {
			t.Errorf("%s with a huge %s answered %d bytes: %.300q", tc.tool, tc.param, len(got), got)
		}
	}
}
