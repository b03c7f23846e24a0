package tests

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// `serve --backend local` needs neither an E2B account nor a keyring: sandboxes run on this machine, the built-in
// policy applies (a delete asks the human), and its records go away with the server.
func TestLocalBackend(t *testing.T) {
	t.Parallel()
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

// A local backend killed with SIGKILL cannot remove its temporary directory (sandboxes and records); the next
// one removes it, and leaves alone the directory of one that is still running.
func TestLocalBackendRemovesWhatAKilledOneLeft(t *testing.T) {
	t.Parallel()
	x := newH(t)
	tmp := x.path("tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	opts := clientOpts{env: []string{"TMPDIR=" + tmp}}
	args := []string{"serve", "--backend", "local", "--owner", x.owner("local"), "--state-dir", x.path("state")}
	localDirs := func() []string {
		dirs, _ := filepath.Glob(filepath.Join(tmp, "e2b-mcp-local-*"))
		return dirs
	}

	killed := x.startStdio(opts, args...)
	ok(t, killed.Client, "e2b_create_sandbox", map[string]any{"title": "left behind"})
	left := localDirs()
	if len(left) != 1 {
		t.Fatalf("local backend directories: %v, want one", left)
	}
	killed.kill9(t)
	running := x.startStdio(opts, args...)
	ok(t, running.Client, "e2b_create_sandbox", map[string]any{"title": "in use"})
	inUse := slices.DeleteFunc(localDirs(), func(d string) bool { return d == left[0] })
	if len(inUse) != 1 {
		t.Fatalf("local backend directories besides the killed one's: %v", inUse)
	}
	// Both look older than the grace period that spares a directory whose maker has not locked it yet.
	old := time.Now().Add(-time.Hour)
	for _, d := range append(inUse, left[0]) {
		if err := os.Chtimes(d, old, old); err != nil {
			t.Fatal(err)
		}
	}

	// The server answers initialize while it builds its backend, whose start removes what the killed one left: a
	// call waits for the build.
	third := x.startStdio(opts, args...)
	ok(t, third.Client, "e2b_list_sandboxes", map[string]any{})
	if _, err := os.Stat(left[0]); !os.IsNotExist(err) {
		t.Errorf("the killed server's directory %s is still there (%v)", left[0], err)
	}
	if _, err := os.Stat(inUse[0]); err != nil {
		t.Errorf("the running server's directory was removed: %v", err)
	}
	ok(t, running.Client, "e2b_list_sandboxes", map[string]any{})
}
