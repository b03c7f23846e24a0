package tests

import (
	"slices"
	"testing"
)

// `serve --backend local` needs neither an E2B account nor a keyring: sandboxes run on this machine, the built-in
// policy applies (a delete asks the human), and its records go away with the server.
func TestLocalBackend(t *testing.T) {
	x := newH(t)
	args := []string{"serve", "--backend", "local", "--owner", x.owner("local"), "--state-dir", x.path("state")}
	yes := &yesNo{accept: true}
	s := x.startStdio(clientOpts{elicitation: yes}, args...)
	id := ok(t, s.Client, "e2b_create_sandbox", map[string]any{"title": "local"})["sandbox_id"].(string)
	ok(t, s.Client, "e2b_write_file", map[string]any{"sandbox_id": id, "path": "/home/user/x.txt", "content": "local\n"})
	if out := ok(t, s.Client, "e2b_exec", map[string]any{"sandbox_id": id, "command": "cat x.txt; id -un"}); str(out, "stdout") != "local\nuser\n" {
		t.Errorf("exec in a local sandbox: %v", out)
	}
	if ids := sandboxIDs(t, s.Client); !slices.Equal(ids, []string{id}) {
		t.Errorf("list: %v", ids)
	}
	if out := ok(t, s.Client, "e2b_manage_sandbox", map[string]any{"sandbox_id": id, "action": "delete"}); out["success"] != true {
		t.Fatalf("delete: %v", out)
	}
	if yes.asked.Load() != 1 {
		t.Errorf("the built-in policy asked %d times before the delete, want once", yes.asked.Load())
	}
	ok(t, s.Client, "e2b_create_sandbox", map[string]any{"title": "left running"})
	s.Close()

	again := x.startStdio(clientOpts{}, args...)
	if ids := sandboxIDs(t, again.Client); len(ids) != 0 {
		t.Errorf("a new local backend lists the previous one's sandboxes: %v", ids)
	}
}
