package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/display"
	"github.com/e2b-mcp/e2b-mcp/server"
	"github.com/e2b-mcp/e2b-mcp/server/synclink"
	"github.com/e2b-mcp/e2b-mcp/tools"
	"github.com/e2b-mcp/e2b-mcp/workspace"
)

// tokenEnv names the variable that holds the member's bearer token of the team server for `sync`; serverEnv the one
// that pins that server, the only one a link may point at.
const (
	tokenEnv  = "E2B_MCP_TOKEN"
	serverEnv = "E2B_MCP_SERVER"
)

const syncAbout = `Sync a directory of this machine with a sandbox through a team server, which cannot see this
machine's disk: e2b_sync_in and e2b_sync_out answer there with this command and a one-time link (it works
once, for ten minutes). The bearer token the server knows you by (your MCP client's) goes in ` + tokenEnv + `,
and the server's URL (your MCP client's, e.g. https://mcp.example.com/mcp) in ` + serverEnv + `: a link that
points at any other server is refused before anything is sent, as a model may have been made to rewrite it.

  in   copies DIR into the sandbox: only what changed since the last sync in, .gitignore honoured, files
       that look like secrets left out (as the link's call said).
  out  brings back what changed in the sandbox since the sync in, as a patch git apply accepts, saved
       under --patch-dir; with --apply (and a link made with apply) applies it to DIR, all or nothing.`

func runSync(ctx context.Context, a *app, args []string) error {
	f := newFlags("sync", "in|out --link URL [--apply] DIR", syncAbout)
	link := f.String("link", "", "the link the tool gave (http(s)://SERVER/sync#TICKET)")
	apply := f.Bool("apply", false, "out: apply the changes to DIR (the link must have been made with apply)")
	patchDir := f.String("patch-dir", "", "out: where the patch is saved (default: the user cache directory's "+
		"e2b-mcp/patches)")
	rest, err := a.parse(f, args)
	if err != nil {
		return err
	}
	if err := f.wantArgs(rest, 2, 2); err != nil {
		return err
	}
	direction, dir := rest[0], rest[1]
	if direction != tools.SyncDirectionIn && direction != tools.SyncDirectionOut {
		return f.usageErrorf("sync %q: want in or out", direction)
	}
	if *link == "" {
		return f.usageErrorf("--link is required: the link the sync tool gave")
	}
	if *apply && direction == tools.SyncDirectionIn {
		return f.usageErrorf("--apply is for sync out")
	}
	token := strings.TrimSpace(a.getenv(tokenEnv))
	if token == "" {
		return fmt.Errorf("set %s to your bearer token of the team server (the one your MCP client sends)", tokenEnv)
	}
	pin := strings.TrimSpace(a.getenv(serverEnv))
	if pin == "" {
		return fmt.Errorf("set %s to the URL of your team server, the one your MCP client connects to (e.g. "+
			"https://mcp.example.com/mcp), from your own configuration rather than from the link: the command sends "+
			"your token and files to that server alone", serverEnv)
	}
	// The MCP endpoint's URL is what a member has at hand; the links are the server's, beside that endpoint.
	pin = strings.TrimSuffix(strings.TrimRight(pin, "/"), server.PathMCP)
	c, err := synclink.NewClient(*link, pin, token, &http.Client{})
	if errors.Is(err, synclink.ErrNotTheServer) {
		return shownError(fmt.Errorf("%w (%s names your team server)", err, serverEnv))
	} else if err != nil {
		return err
	}
	local, root, err := openSyncDir(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	begun, err := c.Begin(ctx)
	if err != nil {
		return shownError(linkError(err))
	}
	if begun.Link.Direction != direction {
		return fmt.Errorf("this link is for sync %s, not sync %s", begun.Link.Direction, direction)
	}
	// The command is text the model gave: DIR may have been changed after the call that the policy judged.
	if bound, err := filepath.EvalSymlinks(begun.Link.Local); err != nil || bound != local {
		return fmt.Errorf("this link is for the directory %q (the one its call named), not %s: nothing was synced",
			begun.Link.Local, dir)
	}
	s := &syncRun{a: a, c: c, begun: begun, local: local, root: root, start: a.now()}
	if direction == tools.SyncDirectionIn {
		return shownError(s.in(ctx))
	}
	if *patchDir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			cache = os.TempDir()
		}
		*patchDir = filepath.Join(cache, "e2b-mcp", "patches")
	}
	return shownError(s.out(ctx, *apply, *patchDir))
}

// shownError escapes err for the terminal: it may name what the sandbox named (a file, a conflict, its failure), and
// so may hold characters that would command the terminal or hide part of the line.
func shownError(err error) error {
	if err == nil {
		return nil
	}
	return errors.New(display.Escape(err.Error()))
}

// openSyncDir resolves dir (symlinks and ..) and opens it, through which every read and write of the sync goes.
func openSyncDir(dir string) (string, *os.Root, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", nil, err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", nil, err
	}
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
		return "", nil, fmt.Errorf("%s is not a directory; a sync takes a whole directory", dir)
	}
	root, err := os.OpenRoot(real)
	return real, root, err
}

// linkError words a step the server refused as the server said it.
func linkError(err error) error {
	var se *synclink.StepError
	if errors.As(err, &se) {
		return errors.New(se.Text)
	}
	return err
}

// syncRun is one `e2b-mcp sync` run.
type syncRun struct {
	a     *app
	c     *synclink.Client
	begun *synclink.Begun
	local string
	root  *os.Root
	start time.Time
}

func (s *syncRun) options() workspace.Options {
	l := s.begun.Link
	return workspace.Options{Excludes: l.Excludes, IncludeGit: l.IncludeGit, IncludeSecrets: l.IncludeSecrets}
}

func (s *syncRun) in(ctx context.Context) error {
	l, last := s.begun.Link, s.begun.Manifest
	opts := s.options()
	if last != nil && last.Local != s.local {
		last = nil // another local tree was synced there: send everything
	}
	var tree *workspace.Tree
	var plan *workspace.Plan
	replan := func() (err error) {
		if tree, err = workspace.Walk(s.root, opts); err == nil {
			plan, err = workspace.PlanSync(s.root, tree, last)
		}
		if err != nil {
			return fmt.Errorf("nothing was synced: reading %s failed: %w", s.local, err)
		}
		return nil
	}
	if err := replan(); err != nil {
		return err
	}
	tries := 0
	stream := func() io.ReadCloser {
		pr, pw := io.Pipe()
		// A step sent again (the server turned it away for a moment, the sandbox untouched) sends the tree as it
		// is then.
		if tries++; tries > 1 {
			if err := replan(); err != nil {
				pw.CloseWithError(err)
				return pr
			}
		}
		plan := plan
		go func() {
			pw.CloseWithError(workspace.WriteSyncTar(pw, s.root, plan.Send, plan.Delete, func() ([]byte, error) {
				// Only now are the hashes of a first sync known: the stream made them as it sent the files.
				return json.Marshal(workspace.Manifest{Version: workspace.ManifestVersion, Local: s.local,
					Remote: l.RemotePath, Excludes: opts.Excludes, IncludeSecrets: opts.IncludeSecrets,
					Stated: plan.Stated, Entries: plan.Entries})
			}))
		}()
		return pr
	}
	got, err := s.c.SendIn(ctx, stream)
	if err != nil {
		return linkError(err)
	}
	var sent int64
	for _, e := range plan.Send {
		sent += e.Size
	}
	first := ""
	if last == nil {
		first = " (first sync: everything sent)"
	}
	fmt.Fprintf(s.a.stdout, "Synced %s into sandbox %s at %s%s: %d entries, %d sent (%s), %d deleted, in %.1f s.\n",
		s.local, l.SandboxID, l.RemotePath, first, len(plan.Entries), got.Entries, display.Size(sent), got.Deleted,
		s.a.now().Sub(s.start).Seconds())
	for _, lo := range tree.LeftOut {
		fmt.Fprintf(s.a.stdout, "left out: %s (%s)\n", lo.Path, lo.Why)
	}
	if got.CheckpointID != "" {
		fmt.Fprintf(s.a.stdout, "checkpoint: %s (the sandbox's checkpoint policy)\n", got.CheckpointID)
	}
	if got.Warning != "" {
		fmt.Fprintf(s.a.stderr, "warning: %s\n", got.Warning)
	}
	return nil
}

func (s *syncRun) out(ctx context.Context, apply bool, patchDir string) error {
	l, man := s.begun.Link, s.begun.Manifest
	if man == nil {
		return fmt.Errorf("no sync in into %s was found in sandbox %s", l.RemotePath, l.SandboxID)
	}
	if man.Local != s.local {
		return fmt.Errorf("the last sync in into %s copied %s, not %s: run this in that directory", l.RemotePath,
			man.Local, s.local)
	}
	if apply && !l.Apply {
		return errors.New("this link was made for a patch only: ask for one with apply to use --apply")
	}
	tree, err := workspace.Walk(s.root, workspace.Options{Excludes: man.Excludes, IncludeSecrets: man.IncludeSecrets})
	if err != nil {
		return fmt.Errorf("reading %s failed: %w", s.local, err)
	}
	changes, listing, _, err := workspace.Changes(s.c.Sandbox(ctx), man, tree, workspace.DefaultLimits)
	if err != nil {
		return fmt.Errorf("nothing was brought back: %w", linkError(err))
	}
	conflicts := workspace.ReadBase(s.root, changes)
	var pb bytes.Buffer
	workspace.WritePatch(&pb, workspace.WithoutConflicts(changes, conflicts))
	for _, c := range changes {
		binary := ""
		if c.Binary() {
			binary = " (binary)"
		}
		// The sandbox names the files: escaped, a name can neither command the terminal nor hide a line.
		fmt.Fprintf(s.a.stdout, "%-8s %s%s\n", c.Kind(), display.Escape(c.Path), binary)
	}
	for _, c := range conflicts {
		fmt.Fprintf(s.a.stdout, "conflict %s: %s\n", display.Escape(c.Path), c.Why)
	}
	if len(changes) == 0 {
		fmt.Fprintln(s.a.stdout, "Nothing changed in the sandbox since the sync in.")
		return nil
	}
	patchFile := ""
	if pb.Len() > 0 {
		name := l.SandboxID + "-" + s.a.now().UTC().Format("20060102T150405") + "-*.patch"
		if patchFile, err = workspace.SavePatch(patchDir, filepath.Base(name), pb.Bytes()); err != nil {
			return fmt.Errorf("the patch could not be saved in %s: %w", patchDir, err)
		}
		fmt.Fprintf(s.a.stdout, "patch: %s (%d bytes)\n", patchFile, pb.Len())
	}
	if !apply {
		return nil
	}
	if len(conflicts) > 0 {
		return fmt.Errorf("%w; the patch of the other changes is %s", &workspace.ConflictError{Conflicts: conflicts},
			patchFile)
	}
	if err := workspace.Apply(s.root, changes, workspace.DirsOf(listing)); err != nil {
		return fmt.Errorf("%w (the patch is %s)", err, patchFile)
	}
	fmt.Fprintf(s.a.stdout, "Applied %d changes to %s.\n", len(changes), s.local)
	next, err := json.Marshal(workspace.Rebased(man, listing, changes))
	if err != nil {
		return err
	}
	if err := s.c.Rebase(ctx, next); err != nil {
		return fmt.Errorf("applied, but the sandbox's sync manifest could not be brought up to date (%w): the next sync "+
			"out will report these changes again", linkError(err))
	}
	return nil
}
