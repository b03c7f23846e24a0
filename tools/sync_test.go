package tools

import (
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/modcachetest"
	"github.com/e2b-mcp/e2b-mcp/policy"
	"github.com/e2b-mcp/e2b-mcp/state"
)

// sandboxSums is the digest of the sha256sum listing of the sandbox's copy at remote, as localSumsDigest is of a
// local directory.
func (s *session) sandboxSums(t *testing.T, id, remote string) string {
	t.Helper()
	res := s.ok(t, "e2b_exec", map[string]any{"sandbox_id": id, "command": "cd " + remote +
		` && find . -type f ! -name .env ! -name '*.out' -printf '%P\0' | xargs -0 sha256sum | LC_ALL=C sort -k2 | sha256sum`})
	return strings.Fields(res["stdout"].(string))[0]
}

func localSumsDigest(t *testing.T, dir string) string {
	t.Helper()
	cmd := exec.Command("bash", "-c", `find . -type f ! -name .env ! -name '*.out' -printf '%P\0' | xargs -0 sha256sum | LC_ALL=C sort -k2 | sha256sum`)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(out))[0]
}

func syncConfig(root, patches string) func(*Config) {
	return func(c *Config) {
		c.Workspaces = []string{root}
		c.PatchDir = patches
		c.ExecForegroundLimit = 10 * time.Minute
	}
}

// TestSyncRoundTrip is the loop a coding assistant runs: a repository synced in, its tests run in the sandbox, a
// fix made there, the patch checked by git apply and applied, and a second sync in that sends one file.
func TestSyncRoundTrip(t *testing.T) {
	t.Parallel()
	root, patches := t.TempDir(), t.TempDir()
	forEachBackend(t, func(t *testing.T, e *env, s *session) {
		repo := filepath.Join(root, filepath.Base(t.Name()))
		os.Mkdir(repo, 0o755)
		modcachetest.Copy(t, repo, modcachetest.Repository)
		os.WriteFile(filepath.Join(repo, ".gitignore"), []byte("*.out\n"), 0o644)
		os.WriteFile(filepath.Join(repo, ".env"), []byte("TOKEN=do-not-send\n"), 0o600)
		os.WriteFile(filepath.Join(repo, "build.out"), []byte("ignored"), 0o644)
		id := s.createSandbox(t, nil)
		remote := "/home/user/repo-" + strings.ToLower(rand.Text()[:8])
		in := s.ok(t, syncInName, map[string]any{"sandbox_id": id, "local_path": repo, "remote_path": remote})
		if in["first_sync"] != true || num(in["sent"]) != num(in["entries"]) || num(in["entries"]) < 1500 {
			t.Fatalf("first sync: %v", in)
		}
		t.Logf("first sync: %d entries, %d bytes in %.2fs", num(in["entries"]), num(in["bytes_sent"]), in["seconds"])
		wantContains(t, in["note"].(string), "secret")
		if s.sandboxSums(t, id, remote) != localSumsDigest(t, repo) {
			t.Fatal("the sandbox's copy differs from the local tree after the first sync")
		}

		// The module's tests run in the sandbox.
		goroot, err := exec.Command("go", "env", "GOROOT").Output()
		if err != nil {
			t.Fatal(err)
		}
		gotest := "cd " + remote + "/text && GOCACHE=/tmp/e2b-mcp-sync-test-gocache GOPROXY=off GOFLAGS=-mod=mod GOTOOLCHAIN=local " +
			strings.TrimSpace(string(goroot)) + "/bin/go test ./internal/tag"
		res := s.ok(t, "e2b_exec", map[string]any{"sandbox_id": id, "command": gotest, "timeout_ms": 600_000})
		if res["exit_code"] != float64(0) {
			t.Fatalf("the tests failed in the sandbox: %v", res)
		}

		// A fix there: a change, a new file, a deletion, a mode; then the patch.
		s.exec(t, id, "cd "+remote+" && printf '\\n// Fixed in the sandbox.\\n' >> text/internal/tag/tag.go && "+
			"printf 'new\\n' > text/NEW.md && rm sys/unix/README.md && chmod +x text/README.md && printf 'x' > more.out")
		out := s.ok(t, syncOutName, map[string]any{"sandbox_id": id, "remote_path": remote, "local_path": repo})
		if num(out["changed"]) != 4 || out["applied"] == true {
			t.Fatalf("sync out: %v", out)
		}
		check := exec.Command("git", "apply", "--check", "-v", out["patch_file"].(string))
		check.Dir = repo
		if b, err := check.CombinedOutput(); err != nil {
			t.Fatalf("git apply --check: %v\n%s", err, b)
		}
		applied := s.ok(t, syncOutName, map[string]any{"sandbox_id": id, "remote_path": remote, "local_path": repo, "apply": true})
		if applied["applied"] != true {
			t.Fatalf("apply: %v", applied)
		}
		if s.sandboxSums(t, id, remote) != localSumsDigest(t, repo) {
			t.Fatal("the local tree differs from the sandbox's after apply")
		}
		if again := s.ok(t, syncOutName, map[string]any{"sandbox_id": id, "remote_path": remote, "local_path": repo}); num(again["changed"]) != 0 {
			t.Fatalf("after apply the sandbox still has changes: %v", again)
		}

		// One local change: a second sync in sends that file alone.
		os.WriteFile(filepath.Join(repo, "text", "doc.go"), []byte("// Package text, changed locally.\npackage text\n"), 0o644)
		second := s.ok(t, syncInName, map[string]any{"sandbox_id": id, "local_path": repo, "remote_path": remote})
		if second["first_sync"] == true || num(second["sent"]) != 1 || num(second["deleted"]) != 0 {
			t.Fatalf("second sync: %v", second)
		}
		if s.sandboxSums(t, id, remote) != localSumsDigest(t, repo) {
			t.Fatal("the sandbox's copy differs after the second sync")
		}
	}, syncConfig(root, patches))
}

// The sync tools read and write only inside the workspace roots, with symlinks and .. resolved first.
func TestSyncOutsideTheRoots(t *testing.T) {
	t.Parallel()
	root, outside := t.TempDir(), t.TempDir()
	os.Symlink(outside, filepath.Join(root, "escape"))
	os.Mkdir(filepath.Join(root, "inside"), 0o755)
	forEachEra(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, nil)
		for _, p := range []string{outside, "/etc", filepath.Join(root, "escape"), "escape", filepath.Join(root, "inside", "..", "..")} {
			text := s.fail(t, syncInName, map[string]any{"sandbox_id": id, "local_path": p})
			wantContains(t, text, "outside the workspace roots")
		}
		s.ok(t, syncInName, map[string]any{"sandbox_id": id, "local_path": "inside"})
		text := s.fail(t, syncOutName, map[string]any{"sandbox_id": id, "remote_path": "inside", "local_path": filepath.Join(root, "escape")})
		wantContains(t, text, "outside the workspace roots")
	}, syncConfig(root, t.TempDir()))
}

// A server without workspace roots (a team server over HTTP) says the sync tools are not available there.
func TestSyncWithoutWorkspaces(t *testing.T) {
	t.Parallel()
	forEachEra(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, nil)
		wantContains(t, s.fail(t, syncInName, map[string]any{"sandbox_id": id, "local_path": "."}), "not available on this server")
		wantContains(t, s.fail(t, syncOutName, map[string]any{"sandbox_id": id, "remote_path": "x", "local_path": "."}), "not available on this server")
	})
}

// The policy sees e2b_sync_out's action (patch or apply) and the sandbox path: the built-in policy asks before an
// apply, and a rule can deny syncing out, or a path.
func TestSyncPolicy(t *testing.T) {
	t.Parallel()
	var out, in Tool
	for _, tl := range All(Deps{}) {
		switch tl.Tool.Name {
		case syncOutName:
			out = tl
		case syncInName:
			in = tl
		}
	}
	decide := func(p *policy.Policy, tl Tool, args map[string]any) policy.Action {
		return p.Evaluate(policy.Call{Tool: tl.Tool.Name, Args: tl.Judged(args)}).Action
	}
	builtin := PolicyTools().Default()
	if got := decide(builtin, out, map[string]any{"sandbox_id": "s", "remote_path": "p", "apply": true}); got != policy.RequireApproval {
		t.Errorf("built-in policy on an apply: %s, want require_approval", got)
	}
	if got := decide(builtin, out, map[string]any{"sandbox_id": "s", "remote_path": "p"}); got != policy.Allow {
		t.Errorf("built-in policy on a patch: %s, want allow", got)
	}
	custom, err := PolicyTools().Parse("p.yaml", []byte(`default_action: allow
rules:
  - id: no-sync-out
    when: { target: e2b_sync_out, action: [patch, apply] }
    then: { decision: deny }
  - id: no-secrets-dir
    when: { target: e2b_sync_in, path: "/home/user/secret/**" }
    then: { decision: deny }
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := decide(custom, out, map[string]any{"sandbox_id": "s", "remote_path": "p"}); got != policy.Deny {
		t.Errorf("a rule denying sync out: %s", got)
	}
	if got := decide(custom, in, map[string]any{"sandbox_id": "s", "local_path": ".", "remote_path": "secret/x"}); got != policy.Deny {
		t.Errorf("a rule denying a sandbox path: %s", got)
	}
	if got := decide(custom, in, map[string]any{"sandbox_id": "s", "local_path": ".", "remote_path": "work"}); got != policy.Allow {
		t.Errorf("a path no rule names: %s", got)
	}
}

// A fork of a sandbox synced into carries the manifest: syncing out of it gives the fork's own changes against
// the same base, and the source's changes stay the source's.
func TestSyncOutOfAFork(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	repo := filepath.Join(root, "repo")
	os.Mkdir(repo, 0o755)
	os.WriteFile(filepath.Join(repo, "a.txt"), []byte("base\n"), 0o644)
	forEachEra(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, nil)
		s.ok(t, syncInName, map[string]any{"sandbox_id": id, "local_path": repo})
		cp := s.ok(t, "e2b_checkpoint_sandbox", map[string]any{"sandbox_id": id})
		fork := s.ok(t, "e2b_fork_sandbox", map[string]any{"checkpoint_id": cp["checkpoint_id"]})
		forkID := fork["sandboxes"].([]any)[0].(map[string]any)["sandbox_id"].(string)
		s.exec(t, forkID, "echo fork >> repo/a.txt")
		s.exec(t, id, "echo source > repo/b.txt")
		out := s.ok(t, syncOutName, map[string]any{"sandbox_id": forkID, "remote_path": "repo", "local_path": repo})
		wantContains(t, out["patch"].(string), "diff --git a/a.txt b/a.txt", "+fork")
		if strings.Contains(out["patch"].(string), "b.txt") {
			t.Errorf("the fork's patch has the source's change: %s", out["patch"])
		}
	}, syncConfig(root, t.TempDir()))
}

// Code in the sandbox that swaps a synced directory for a symlink leading out of the tree gets no apply: nothing
// is written, locally or through the link, and the change is named.
func TestSyncOutRefusesAPlantedSymlink(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	forEachBackend(t, func(t *testing.T, e *env, s *session) {
		repo := filepath.Join(root, filepath.Base(t.Name()))
		os.MkdirAll(filepath.Join(repo, "lib"), 0o755)
		os.WriteFile(filepath.Join(repo, "lib", "a.txt"), []byte("a\n"), 0o644)
		os.WriteFile(filepath.Join(repo, "b.txt"), []byte("b\n"), 0o644)
		id := s.createSandbox(t, nil)
		remote := "/home/user/planted-" + strings.ToLower(rand.Text()[:8])
		s.ok(t, syncInName, map[string]any{"sandbox_id": id, "local_path": repo, "remote_path": remote})
		s.exec(t, id, "cd "+remote+" && rm -rf lib && ln -s /tmp lib && echo changed > b.txt")
		// The manifest naming the local directory is the sandbox's word: a sync out must name it itself.
		wantContains(t, s.fail(t, syncOutName, map[string]any{"sandbox_id": id, "remote_path": remote, "apply": true}), "Missing required parameter: local_path")
		text := s.fail(t, syncOutName, map[string]any{"sandbox_id": id, "remote_path": remote, "local_path": repo, "apply": true})
		wantContains(t, text, "Nothing was applied", "lib (the sandbox made it a symlink pointing outside the tree)")
		if fi, err := os.Lstat(filepath.Join(repo, "lib")); err != nil || !fi.IsDir() {
			t.Fatalf("lib was replaced locally: %v %v", fi, err)
		}
		if b, _ := os.ReadFile(filepath.Join(repo, "b.txt")); string(b) != "b\n" {
			t.Errorf("b.txt was changed by a refused apply: %q", b)
		}
		if b, _ := os.ReadFile(filepath.Join(repo, "lib", "a.txt")); string(b) != "a\n" {
			t.Errorf("lib/a.txt was changed by a refused apply: %q", b)
		}
	}, syncConfig(root, t.TempDir()))
}

// A sync is a step of the checkpoint policy: the checkpoint taken after a sync in is one to fork from, and its
// forks carry the sync's base.
func TestSyncInIsAStep(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "a.txt"), []byte("a\n"), 0o644)
	forEachEra(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, nil)
		in := s.ok(t, syncInName, map[string]any{"sandbox_id": id, "local_path": root, "remote_path": "proj"})
		cp, _ := in["checkpoint_id"].(string)
		if cp == "" {
			t.Fatalf("no checkpoint after a sync in, with one every step: %v", in)
		}
		fork := s.ok(t, "e2b_fork_sandbox", map[string]any{"checkpoint_id": cp})
		forkID := fork["sandboxes"].([]any)[0].(map[string]any)["sandbox_id"].(string)
		s.exec(t, forkID, "echo b > proj/b.txt")
		out := s.ok(t, syncOutName, map[string]any{"sandbox_id": forkID, "remote_path": "proj", "local_path": root})
		if num(out["changed"]) != 1 || out["files"].([]any)[0].(map[string]any)["path"] != "b.txt" {
			t.Fatalf("the fork's changes: %v", out)
		}
	}, syncConfig(root, t.TempDir()), func(c *Config) { c.Checkpoints = state.CheckpointPolicy{EverySteps: 1} })
}

// The policy judges the local directory a sync would read or write as the tool resolves it: relative to the
// first workspace root, with symlinks and ".." resolved, so that no other name for a denied directory gets past
// a rule; and sync in's sandbox path where the tree lands when the call gives none.
func TestSyncPolicyOnLocalPath(t *testing.T) {
	t.Parallel()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"proj", "private/keys"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../private", filepath.Join(root, "proj", "link")); err != nil {
		t.Fatal(err)
	}
	var in, out Tool
	for _, tl := range All(Deps{Config: Config{Workspaces: []string{root}}}) {
		switch tl.Tool.Name {
		case syncInName:
			in = tl
		case syncOutName:
			out = tl
		}
	}
	p, err := PolicyTools().Parse("p.yaml", []byte(`default_action: allow
rules:
  - id: keep-private
    when: { target: [e2b_sync_in, e2b_sync_out], local_path: "`+filepath.ToSlash(root)+`/private/**" }
    then: { decision: deny }
  - id: landing
    when: { target: e2b_sync_in, path: /home/user/proj }
    then: { decision: require_approval }
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tool  Tool
		local string
		want  policy.Action
	}{
		{in, "proj", policy.RequireApproval}, // lands in /home/user/proj by default
		{in, "private", policy.Deny},
		{in, "private/keys", policy.Deny},
		{in, filepath.Join(root, "private"), policy.Deny},
		{in, "proj/link", policy.Deny},       // a symlink to it
		{in, "proj/../private", policy.Deny}, // ".."
		{in, "proj/link/keys", policy.Deny},
		{in, ".", policy.Deny}, // the root holds it
		{out, "proj/link", policy.Deny},
		{out, "proj", policy.Allow},
	} {
		args := map[string]any{"sandbox_id": "s", "local_path": c.local}
		if c.tool.Tool.Name == syncOutName {
			args["remote_path"] = "x"
		}
		if got := p.Evaluate(policy.Call{Tool: c.tool.Tool.Name, Args: c.tool.Judged(args)}).Action; got != c.want {
			t.Errorf("%s local_path %q: %s, want %s", c.tool.Tool.Name, c.local, got, c.want)
		}
	}
}

// judgedOnly is a team server's SyncLinks for tests that only judge calls.
type judgedOnly struct{}

func (judgedOnly) Link(Caller, SyncLink) (string, time.Time, error) { return "", time.Time{}, nil }

// On a team server the policy judges local_path as the call gives it, for the member's machine, never resolved on
// the server's disk (where the same path may be a symlink to anywhere), and the sandbox directory is named after
// its last element, whatever the member's system writes paths like.
func TestSyncPolicyOnATeamServer(t *testing.T) {
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(dir, "proj")); err != nil {
		t.Fatal(err)
	}
	var in Tool
	for _, tl := range All(Deps{SyncLinks: judgedOnly{}}) {
		if tl.Tool.Name == syncInName {
			in = tl
		}
	}
	p, err := PolicyTools().Parse("p.yaml", []byte(`default_action: allow
rules:
  - id: no-etc
    when: { target: e2b_sync_in, local_path: "/etc/**" }
    then: { decision: deny }
  - id: landing
    when: { target: e2b_sync_in, path: /home/user/proj }
    then: { decision: require_approval }
`))
	if err != nil {
		t.Fatal(err)
	}
	for local, want := range map[string]policy.Action{
		filepath.Join(dir, "proj"): policy.RequireApproval, // a symlink to /etc here, the member's project there
		`C:\Users\me\proj`:         policy.RequireApproval,
		"/home/me/proj/":           policy.RequireApproval,
		"/etc/ssh":                 policy.Deny,
		"/home/me/other":           policy.Allow,
	} {
		judged := in.Judged(map[string]any{"sandbox_id": "s", "local_path": local})
		if got := p.Evaluate(policy.Call{Tool: syncInName, Args: judged}).Action; got != want || judged["local_path"] != local {
			t.Errorf("local_path %q: %s (judged %v), want %s", local, got, judged, want)
		}
	}
}
