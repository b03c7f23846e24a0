package tests

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"

	"github.com/e2b-mcp/e2b-mcp/internal/modcachetest"
)

// syncCLI runs `e2b-mcp sync ARGS` with token as the member's bearer token and server's address as their pinned
// team server, as a member runs the command a team server's sync tool gave, and waits at most two minutes.
func (x *h) syncCLI(server *httpServer, token string, args ...string) result {
	x.t.Helper()
	ctx, cancel := context.WithTimeout(x.t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, the.bin, append([]string{"sync"}, args...)...)
	cmd.Env = append(x.env(), "E2B_MCP_TOKEN="+token, "E2B_MCP_SERVER="+server.base)
	cmd.Dir = x.dir
	out, errOut := x.capture("sync "+args[0]+" stdout"), x.capture("sync "+args[0]+" stderr")
	cmd.Stdout, cmd.Stderr = out, errOut
	err := cmd.Run()
	return result{stdout: out.String(), stderr: errOut.String(), err: err}
}

// startSyncTeam starts a team server on b for sync links, alice's (logged in to E2B) with bob as another member,
// and returns it with alice's client, a sandbox of hers, and each member's bearer token.
func (x *h) startSyncTeam(b cancelBackend) (srv *httpServer, c *client.Client, id, aliceToken, bobToken string) {
	x.t.Helper()
	alice, bob := x.owner("alice"), x.owner("bob")
	x.login(alice)
	tokens := x.path("tokens.json")
	aliceToken, bobToken = x.addToken(alice, tokens), x.addToken(bob, tokens)
	srv = x.startHTTP(append(x.serveOn(b, alice, "sync"), "--transport", "http", "--tokens-file", tokens)...)
	c = x.connectHTTP(srv.base, aliceToken, "")
	return srv, c, create(x.t, c, nil), aliceToken, bobToken
}

// syncedProject is a local project of one Go file, synced in through a link of the team server srv by the member
// of token tok, into the sandbox id of c.
func (x *h) syncedProject(srv *httpServer, c *client.Client, id, tok string) string {
	x.t.Helper()
	project := x.path("project")
	writeTree(x.t, project, map[string]string{"main.go": "package main\n"})
	in := ok(x.t, c, "e2b_sync_in", map[string]any{"sandbox_id": id, "local_path": project})
	if r := x.syncCLI(srv, tok, "in", "--link", syncLink(x.t, in), project); r.err != nil {
		x.t.Fatalf("sync in: %s", r)
	}
	return project
}

var syncLinkPattern = regexp.MustCompile(`--link '([^']+)'`)

// syncLink is the link of the command a sync tool answered with on a team server.
func syncLink(t testing.TB, res map[string]any) string {
	t.Helper()
	m := syncLinkPattern.FindStringSubmatch(str(res, "command"))
	if m == nil {
		t.Fatalf("the sync tool answered no command with a link: %v", res)
	}
	return m[1]
}

func writeTree(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// On a team server, which cannot see the member's disk, the sync tools answer with `e2b-mcp sync` commands and
// one-time links, and the loop works through them: a project synced in (.gitignore and secrets honoured), changed
// in the sandbox, brought back and applied; a second sync in sends only the file changed locally; a link works
// once, and only with its member's token.
func TestSyncThroughATeamServer(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, b cancelBackend) {
		x := newH(t)
		srv, c, id, tok, bobTok := x.startSyncTeam(b)
		project := x.path("project")
		writeTree(t, project, map[string]string{"main.go": "package main\n\nfunc main() {}\n",
			"sub/util.go": "package main\n\nfunc util() int { return 1 }\n", ".gitignore": "build/\n",
			"build/out.bin": "built", ".env": "SECRET=1\n", "README": "readme\n"})
		if err := os.Symlink("sub/util.go", filepath.Join(project, "util-link")); err != nil {
			t.Fatal(err)
		}

		in := ok(t, c, "e2b_sync_in", map[string]any{"sandbox_id": id, "local_path": project})
		if str(in, "remote_path") != "/home/user/project" || !strings.HasPrefix(str(in, "command"), "e2b-mcp sync in") {
			t.Fatalf("e2b_sync_in on a team server: %v", in)
		}
		link := syncLink(t, in)
		if r := x.syncCLI(srv, bobTok, "in", "--link", link, project); r.err == nil ||
			!strings.Contains(r.stderr, "another member's") {
			t.Fatalf("bob ran alice's link: %s", r)
		}
		r := x.syncCLI(srv, tok, "in", "--link", link, project)
		if r.err != nil || !strings.Contains(r.stdout, "6 entries, 6 sent") || !strings.Contains(r.stdout, ".env") {
			t.Fatalf("sync in: %s", r)
		}
		if r := x.syncCLI(srv, tok, "in", "--link", link, project); r.err == nil || !strings.Contains(r.stderr, "used already") {
			t.Fatalf("the link ran twice: %s", r)
		}
		tree := ok(t, c, "e2b_exec", map[string]any{"sandbox_id": id, "command": "cd project && find . -path ./.e2b-mcp-sync " +
			"-prune -o -print | sort && readlink util-link && cat sub/util.go"})
		want := ".\n./.gitignore\n./README\n./main.go\n./sub\n./sub/util.go\n./util-link\nsub/util.go\n" +
			"package main\n\nfunc util() int { return 1 }\n"
		if got := str(tree, "stdout"); got != want {
			t.Fatalf("the sandbox's copy:\n%s\nwant:\n%s", got, want)
		}

		ok(t, c, "e2b_exec", map[string]any{"sandbox_id": id, "command": "cd project && sed -i 's/return 1/return 2/' " +
			"sub/util.go && echo new > added.txt && rm README"})
		out := ok(t, c, "e2b_sync_out", map[string]any{"sandbox_id": id, "remote_path": "project", "local_path": project,
			"apply": true})
		r = x.syncCLI(srv, tok, "out", "--link", syncLink(t, out), "--apply", project)
		if r.err != nil || !strings.Contains(r.stdout, "Applied 3 changes") {
			t.Fatalf("sync out: %s", r)
		}
		for name, want := range map[string]string{"sub/util.go": "package main\n\nfunc util() int { return 2 }\n",
			"added.txt": "new\n"} {
			if got, err := os.ReadFile(filepath.Join(project, name)); err != nil || string(got) != want {
				t.Errorf("after the apply %s holds %q (%v), want %q", name, got, err, want)
			}
		}
		if _, err := os.Stat(filepath.Join(project, "README")); !os.IsNotExist(err) {
			t.Errorf("README deleted in the sandbox is still here (%v)", err)
		}
		// The apply made the sandbox's state the base: nothing is left to bring back.
		again := ok(t, c, "e2b_sync_out", map[string]any{"sandbox_id": id, "remote_path": "project", "local_path": project})
		if r := x.syncCLI(srv, tok, "out", "--link", syncLink(t, again), project); r.err != nil ||
			!strings.Contains(r.stdout, "Nothing changed") {
			t.Fatalf("a second sync out: %s", r)
		}

		writeTree(t, project, map[string]string{"main.go": "package main\n\nfunc main() { util() }\n"})
		in = ok(t, c, "e2b_sync_in", map[string]any{"sandbox_id": id, "local_path": project})
		if r := x.syncCLI(srv, tok, "in", "--link", syncLink(t, in), project); r.err != nil ||
			!strings.Contains(r.stdout, ", 1 sent (") {
			t.Fatalf("a second sync in after one local change: %s", r)
		}
		got := ok(t, c, "e2b_exec", map[string]any{"sandbox_id": id, "command": "cat project/main.go"})
		if str(got, "stdout") != "package main\n\nfunc main() { util() }\n" {
			t.Errorf("the sandbox's main.go after the second sync in: %q", str(got, "stdout"))
		}

		// Both sides change main.go, the sandbox another file too: the apply is refused, naming main.go, and
		// writes nothing, while the patch of the other change is saved.
		ok(t, c, "e2b_exec", map[string]any{"sandbox_id": id, "command": "cd project && echo '// sandbox' >> main.go && " +
			"echo more > added.txt"})
		writeTree(t, project, map[string]string{"main.go": "package main\n\n// local\nfunc main() { util() }\n"})
		out = ok(t, c, "e2b_sync_out", map[string]any{"sandbox_id": id, "remote_path": "project", "local_path": project,
			"apply": true})
		r = x.syncCLI(srv, tok, "out", "--link", syncLink(t, out), "--apply", project)
		if r.err == nil || !strings.Contains(r.stdout, "conflict main.go") || !strings.Contains(r.stderr, "main.go") ||
			!strings.Contains(r.stdout, "patch: ") {
			t.Fatalf("an apply over a local change: %s", r)
		}
		for name, want := range map[string]string{"main.go": "package main\n\n// local\nfunc main() { util() }\n",
			"added.txt": "new\n"} {
			if got, err := os.ReadFile(filepath.Join(project, name)); err != nil || string(got) != want {
				t.Errorf("after a refused apply %s holds %q (%v), want %q", name, got, err, want)
			}
		}
	})
}

// BenchmarkSyncThroughATeamServer measures, on the emulator and on the real envd, a repository of about 2,000
// files and 53 MB synced in through a team server's link (the tool call, then `e2b-mcp sync in` as a member runs
// it) beside the same sync by a stdio server's own e2b_sync_in, both measured in the same run: the first sync, and
// a re-sync after one local change. Each iteration does all four; the metrics are their means.
func BenchmarkSyncThroughATeamServer(b *testing.B) {
	for _, backend := range cancelBackends(b) {
		b.Run(backend.name, func(b *testing.B) {
			x := newH(b)
			owner := x.owner("bench")
			x.login(owner)
			root := x.path("work")
			repo := filepath.Join(root, "repo")
			if err := os.MkdirAll(repo, 0o755); err != nil {
				b.Fatal(err)
			}
			modcachetest.Copy(b, repo, modcachetest.Repository)
			tokens := x.path("tokens.json")
			tok := x.addToken(owner, tokens)
			srv := x.startHTTP(append(x.serveOn(backend, owner, "bench"), "--transport", "http", "--tokens-file", tokens)...)
			team := x.connectHTTP(srv.base, tok, "")
			teamID := create(b, team, nil)
			local := x.startStdio(clientOpts{}, append(x.serveOn(backend, owner, "bench-local"), "--state-dir",
				x.path("state-local"), "--workspace", root)...)
			localID := create(b, local.Client, nil)
			var teamFirst, teamResync, localFirst, localResync time.Duration
			b.ResetTimer()
			for i := range b.N {
				remote := fmt.Sprintf("/home/user/bench-%d", i)
				args := map[string]any{"sandbox_id": teamID, "local_path": repo, "remote_path": remote}
				teamIn := func() time.Duration {
					start := time.Now()
					r := x.syncCLI(srv, tok, "in", "--link", syncLink(b, ok(b, team, "e2b_sync_in", args)), repo)
					if r.err != nil {
						b.Fatalf("sync in: %s", r)
					}
					return time.Since(start)
				}
				localIn := func() (time.Duration, map[string]any) {
					start := time.Now()
					res := ok(b, local.Client, "e2b_sync_in", map[string]any{"sandbox_id": localID, "local_path": repo,
						"remote_path": remote})
					return time.Since(start), res
				}
				teamFirst += teamIn()
				d, _ := localIn()
				localFirst += d
				if err := os.WriteFile(filepath.Join(repo, "text", "doc.go"), fmt.Appendf(nil,
					"// Package text, change %d.\npackage text\n", i), 0o644); err != nil {
					b.Fatal(err)
				}
				teamResync += teamIn()
				d, res := localIn()
				if res["sent"] != float64(1) {
					b.Fatalf("the local re-sync sent %v", res["sent"])
				}
				localResync += d
			}
			n := float64(b.N)
			b.ReportMetric(teamFirst.Seconds()/n, "team-first-s")
			b.ReportMetric(localFirst.Seconds()/n, "local-first-s")
			b.ReportMetric(teamResync.Seconds()/n, "team-resync-s")
			b.ReportMetric(localResync.Seconds()/n, "local-resync-s")
		})
	}
}

// Replicas on one database honour each other's sync links, once: a link one replica made, sent to the other (as a
// load balancer may), syncs; sent again to the one that made it, it is refused as used.
func TestSyncLinkAcrossReplicas(t *testing.T) {
	t.Parallel()
	x := newH(t)
	rs := x.startReplicas(2)
	c := x.connectHTTP(rs.replicas[0].base, rs.token, "")
	id := create(t, c, nil)
	project := x.path("project")
	writeTree(t, project, map[string]string{"main.go": "package main\n"})
	link := syncLink(t, ok(t, c, "e2b_sync_in", map[string]any{"sandbox_id": id, "local_path": project}))
	if !strings.HasPrefix(link, rs.replicas[0].base+"/") {
		t.Fatalf("the link %q is not the first replica's", link)
	}
	elsewhere := rs.replicas[1].base + strings.TrimPrefix(link, rs.replicas[0].base)
	if r := x.syncCLI(rs.replicas[1], rs.token, "in", "--link", elsewhere, project); r.err != nil {
		t.Fatalf("the second replica refused the first's link: %s", r)
	}
	if r := x.syncCLI(rs.replicas[0], rs.token, "in", "--link", link, project); r.err == nil ||
		!strings.Contains(r.stderr, "used already") {
		t.Fatalf("the link used on one replica ran again on the other: %s", r)
	}
	if got := str(ok(t, c, "e2b_exec", map[string]any{"sandbox_id": id, "command": "cat project/main.go"}),
		"stdout"); got != "package main\n" {
		t.Errorf("the sandbox's copy holds %q", got)
	}
}
