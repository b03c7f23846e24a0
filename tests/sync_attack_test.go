package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The command a team server's sync tool answers with is text the model hands the user: a model steered by what
// it read can change its DIR after the policy judged the call's local_path. The command line syncs the directory
// the link was made for alone, and sends nothing of another.
func TestSyncLinkCommandKeepsToTheJudgedDirectory(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b cancelBackend) {
		x := newH(t)
		srv, c, id, tok, _ := x.startSyncTeam(b)
		project, other := x.path("project"), x.path("keys")
		writeTree(t, project, map[string]string{"main.go": "package main\n"})
		writeTree(t, other, map[string]string{"notes.txt": "not for the sandbox\n"})
		if err := os.Symlink(other, x.path("via-link")); err != nil {
			t.Fatal(err)
		}

		for _, dir := range []string{other, x.path("via-link"), filepath.Join(project, "..", "keys")} {
			in := ok(t, c, "e2b_sync_in", map[string]any{"sandbox_id": id, "local_path": project})
			if r := x.syncCLI(srv, tok, "in", "--link", syncLink(t, in), dir); r.err == nil ||
				!strings.Contains(r.stderr, "this link is for the directory") {
				t.Fatalf("sync in of %s with a link for %s: %s", dir, project, r)
			}
		}
		got := ok(t, c, "e2b_exec", map[string]any{"sandbox_id": id, "command": "ls -A /home/user/project 2>&1; true"})
		if out := str(got, "stdout"); strings.Contains(out, "notes.txt") || !strings.Contains(out, "No such file") {
			t.Fatalf("the sandbox after refused syncs: %q", out)
		}
		// The directory the call named, given as the command line likes it (relative, through a symlink), works.
		if err := os.Symlink(project, x.path("project-link")); err != nil {
			t.Fatal(err)
		}
		in := ok(t, c, "e2b_sync_in", map[string]any{"sandbox_id": id, "local_path": project})
		if r := x.syncCLI(srv, tok, "in", "--link", syncLink(t, in), "project-link"); r.err != nil {
			t.Fatalf("sync in of the link's directory: %s", r)
		}
	})
}

// The sandbox names the files a sync out lists to the user's terminal: a name with control characters (ESC to
// erase the line, a carriage return) could hide a change from the person reviewing it, or command the terminal.
// The command line shows such a name escaped.
func TestSyncLinkOutShowsSandboxNamesEscaped(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b cancelBackend) {
		x := newH(t)
		srv, c, id, tok, _ := x.startSyncTeam(b)
		project := x.syncedProject(srv, c, id, tok)
		ok(t, c, "e2b_exec", map[string]any{"sandbox_id": id,
			"command": `cd project && printf x > "$(printf 'hidden\033[2K\rshown.txt')"`})
		out := ok(t, c, "e2b_sync_out", map[string]any{"sandbox_id": id, "remote_path": "project", "local_path": project})
		r := x.syncCLI(srv, tok, "out", "--link", syncLink(t, out), project)
		if r.err != nil || strings.ContainsAny(r.stdout+r.stderr, "\x1b\r") ||
			!strings.Contains(r.stdout, `hidden\x1b[2K\rshown.txt`) {
			t.Fatalf("sync out of a file named with controls: %q", r.stdout+r.stderr)
		}
	})
}

// Code in the sandbox decides how big what a sync out brings back is: a 10 GB sparse file, or 100,000 empty
// files, end the command with an error naming the limit, within its bounds of time and memory, and write nothing.
func TestSyncLinkOutRefusesWhatIsTooBig(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b cancelBackend) {
		x := newH(t)
		srv, c, id, tok, _ := x.startSyncTeam(b)
		project := x.syncedProject(srv, c, id, tok)
		for _, tc := range []struct{ name, command, want string }{
			{"a 10 GB sparse file", "truncate -s 10G project/big.bin", "big.bin"},
			{"100,000 empty files", "rm -f project/big.bin && mkdir project/many && cd project/many && " +
				"seq 1 100000 | xargs touch", "more than"},
		} {
			ok(t, c, "e2b_exec", map[string]any{"sandbox_id": id, "command": tc.command, "timeout_ms": 120000})
			out := ok(t, c, "e2b_sync_out", map[string]any{"sandbox_id": id, "remote_path": "project",
				"local_path": project, "apply": true})
			r := x.syncCLI(srv, tok, "out", "--link", syncLink(t, out), "--apply", project)
			if r.err == nil || !strings.Contains(r.stderr, tc.want) {
				t.Errorf("%s: %s", tc.name, r)
			}
			t.Logf("%s: %s", tc.name, r.stderr)
			entries, err := os.ReadDir(project)
			if err != nil || len(entries) != 1 {
				t.Errorf("%s: the local tree after a refused sync out: %v (%v)", tc.name, entries, err)
			}
		}
	})
}
