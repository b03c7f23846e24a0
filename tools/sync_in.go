package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"strings"
	"time"

	"github.com/e2b-mcp/e2b-mcp/audit"
	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/workspace"
)

const syncInName = "e2b_sync_in"

type syncInArgs struct {
	SandboxID      string   `json:"sandbox_id" jsonschema:"minLength=1" jsonschema_description:"The sandbox to copy into."`
	LocalPath      string   `json:"local_path" policy:"local_path" jsonschema:"minLength=1" jsonschema_description:"Directory on the user's machine, absolute or relative to the first workspace root; it must be inside a workspace root."`
	RemotePath     string   `json:"remote_path,omitempty" policy:"path" jsonschema_description:"Directory in the sandbox; relative paths are under /home/user. Default: /home/user/<name of local_path>."`
	Exclude        []string `json:"exclude,omitempty" jsonschema_description:"More patterns to leave out, in .gitignore syntax relative to local_path (the tree's .gitignore files apply already)."`
	IncludeGit     bool     `json:"include_git,omitempty" jsonschema_description:"Copy the repository's .git directory too, so that git works in the sandbox."`
	IncludeSecrets bool     `json:"include_secrets,omitempty" jsonschema_description:"Copy files that look like secrets (.env, private keys), which are left out otherwise."`
}

type syncInResult struct {
	SandboxID    string              `json:"sandbox_id"`
	LocalPath    string              `json:"local_path" jsonschema_description:"The local directory, symlinks resolved."`
	RemotePath   string              `json:"remote_path"`
	FirstSync    bool                `json:"first_sync" jsonschema_description:"True when everything was sent: no earlier sync of this directory to remote_path was found in the sandbox."`
	Entries      int                 `json:"entries" jsonschema_description:"Files, directories and symlinks the sync covers."`
	Sent         int                 `json:"sent" jsonschema_description:"Entries sent by this call: new or changed since the last sync."`
	Deleted      int                 `json:"deleted" jsonschema_description:"Paths removed in the sandbox because they are gone locally."`
	BytesSent    int64               `json:"bytes_sent" jsonschema_description:"Bytes of file content sent."`
	Seconds      float64             `json:"seconds"`
	LeftOut      []workspace.LeftOut `json:"left_out,omitempty" jsonschema_description:"Paths not copied for a reason other than .gitignore and exclude (first 20)."`
	LeftOutCount int                 `json:"left_out_count,omitempty"`
	Note         string              `json:"note,omitempty"`
	Resumed      bool                `json:"resumed,omitempty" jsonschema_description:"True when the sandbox had been paused at its timeout and this call resumed it first."`
	CheckpointID string              `json:"checkpoint_id,omitempty" jsonschema_description:"The checkpoint taken automatically after this step, by the checkpoint policy."`
	Warning      string              `json:"warning,omitempty"`
	// On a server that cannot see the user's disk, nothing is synced by the call: it answers with the command
	// that does it.
	Command   string `json:"command,omitempty" jsonschema_description:"On a server that cannot see the user's disk: nothing was synced yet; the user runs this command on their machine to do it (the counts above are then 0)."`
	ExpiresAt string `json:"expires_at,omitempty" jsonschema_description:"When command's one-time link stops working (RFC 3339, UTC)."`
}

// maxLeftOutShown bounds the paths a result names as left out.
const maxLeftOutShown = 20

// syncIn is e2b_sync_in.
type syncIn struct{ *base }

func (t syncIn) tool() Tool {
	return define(t.base, definition[syncInArgs, syncInResult]{
		name: syncInName,
		description: "Copy a directory of the user's machine into a running sandbox as one stream, honouring its " +
			".gitignore files, modes and symlinks (never one leading out of the tree). The next call sends only what changed " +
			"since and deletes there what was deleted locally. Files that look like secrets are left out unless " +
			"include_secrets. Then run its tests with e2b_exec, and bring the sandbox's changes back with e2b_sync_out.",
		// A sync in replaces the sandbox's copy of the tree; sending the same tree again changes nothing more.
		hints: hints{readOnly: false, destructive: true, idempotent: true, openWorld: true},
		shown: t.judged,
		run:   t.run,
	})
}

// judged is the call as the policy sees it: local_path resolved, and remote_path where the tree will land.
func (t syncIn) judged(args map[string]any) map[string]any {
	out := maps.Clone(args)
	if t.byLink() {
		remote, _ := out["remote_path"].(string)
		local, _ := out["local_path"].(string)
		if remote, err := remoteForLink(remote, local); err == nil {
			out["remote_path"] = remote
		}
		return out // the user's path, as the call gives it: this server cannot resolve it
	}
	local, ok := t.judgeLocalPath(out)
	if remote, _ := out["remote_path"].(string); ok && remote == "" {
		out["remote_path"] = remoteDir("", local)
	}
	return out
}

func (t syncIn) run(ctx context.Context, call Caller, a *syncInArgs) (*syncInResult, error) {
	if t.byLink() {
		return t.link(ctx, call, a)
	}
	start := t.now()
	local, err := t.openLocal(ctx, syncInName, a.LocalPath)
	if err != nil {
		return nil, err
	}
	defer local.root.Close()
	opts := workspace.Options{Excludes: a.Exclude, IncludeGit: a.IncludeGit, IncludeSecrets: a.IncludeSecrets,
		Limits: t.cfg.SyncLimits}
	tree, err := workspace.Walk(local.root, opts)
	if err != nil {
		return nil, syncError(local.path, err)
	}
	use, err := t.running(ctx, call, a.SandboxID)
	if err != nil {
		return nil, err
	}
	rec, err := t.countStep(call, use.rec.ID)
	if err != nil {
		return nil, err
	}
	e := envd(use.c, rec)
	remote := remoteDir(a.RemotePath, local.path)
	last, err := readManifest(ctx, e, remote)
	if err != nil {
		return nil, t.sandboxFailure(ctx, use.c, call, rec, err)
	}
	if last != nil && last.Local != local.path {
		last = nil // another local tree was synced there: send everything
	}
	plan, err := workspace.PlanSync(local.root, tree, last)
	if err != nil {
		return nil, syncError(local.path, err)
	}
	if err := t.send(ctx, e, local, remote, opts, plan); err != nil {
		return nil, t.sandboxFailure(ctx, use.c, call, rec, err)
	}
	res := syncInResult{SandboxID: rec.ID, LocalPath: local.path, RemotePath: remote, FirstSync: last == nil,
		Entries: len(plan.Entries), Sent: len(plan.Send), Deleted: len(plan.Delete)}
	for _, s := range plan.Send {
		res.BytesSent += s.Size
	}
	res.LeftOut, res.LeftOutCount = tree.LeftOut[:min(len(tree.LeftOut), maxLeftOutShown)], len(tree.LeftOut)
	if res.LeftOutCount > 0 {
		res.Note = leftOutNote(tree.LeftOut)
	}
	var warning string
	res.CheckpointID, warning = t.afterStep(ctx, use.c, call, rec, syncInName)
	res.Resumed, res.Warning = use.resumed, joinWarnings(use.warning, warning)
	res.Seconds = t.now().Sub(start).Seconds()
	return &res, nil
}

// link answers on a server that cannot see the user's disk: the command that syncs in through a link.
func (t syncIn) link(ctx context.Context, call Caller, a *syncInArgs) (*syncInResult, error) {
	remote, err := remoteForLink(a.RemotePath, a.LocalPath)
	if err != nil {
		return nil, err
	}
	cmd, expires, err := t.linked(ctx, call, SyncLink{Direction: SyncDirectionIn, SandboxID: a.SandboxID,
		RemotePath: remote, Excludes: a.Exclude, IncludeGit: a.IncludeGit, IncludeSecrets: a.IncludeSecrets}, a.LocalPath)
	if err != nil {
		return nil, err
	}
	return &syncInResult{SandboxID: a.SandboxID, LocalPath: a.LocalPath, RemotePath: remote, Command: cmd,
		ExpiresAt: expires.UTC().Format(time.RFC3339), Note: linkNote(expires) + " It prints the counts, bytes " +
			"and time, and what it left out; then carry on in the sandbox at remote_path."}, nil
}

// send sends the plan's tar, its deletions and the new manifest, and unpacks them (unpackTar).
func (t syncIn) send(ctx context.Context, e *e2b.Envd, local *localTree, remote string, opts workspace.Options,
	plan *workspace.Plan) error {
	sent, terr, err := unpackTar(ctx, e, remote, func(w io.Writer) error {
		return workspace.WriteTar(w, local.root, plan.Send)
	}, func() ([]string, []byte, error) {
		// Only now are the hashes of a first sync known: WriteTar made them as it sent the files.
		man, err := json.Marshal(workspace.Manifest{Version: workspace.ManifestVersion, Local: local.path,
			Remote: remote, Excludes: opts.Excludes, IncludeSecrets: opts.IncludeSecrets, Stated: plan.Stated,
			Entries: plan.Entries})
		return plan.Delete, man, err
	})
	moved := audit.Transfer{BytesIn: sent} // a failed upload may have sent a part
	if terr == nil && err == nil {
		moved.FilesIn = len(plan.Send)
	}
	audit.NoteTransfer(ctx, moved)
	if terr != nil {
		return syncError(local.path, terr) // what went wrong here, rather than the upload's word for it
	}
	return err
}

// syncError words a failure of the local side: a limit is the model's to act on, the rest names the tree.
func syncError(local string, err error) error {
	var le *workspace.LimitError
	if errors.As(err, &le) {
		return userErrorf("Nothing was synced: %s.", le.Text)
	}
	return userErrorf("Nothing was synced: reading %s failed: %v", local, unwrapPathError(err))
}

func leftOutNote(left []workspace.LeftOut) string {
	counts := map[string]int{}
	for _, l := range left {
		counts[l.Why]++
	}
	var parts []string
	for _, why := range []string{workspace.WhySecret, workspace.WhyLinkOutside, workspace.WhyNotAFile,
		workspace.WhyUnreadableIg} {
		if n := counts[why]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, why))
		}
	}
	note := "Left out: " + strings.Join(parts, ", ") + " (see left_out)."
	if counts[workspace.WhySecret] > 0 {
		note += " Files that look like secrets stay on this machine unless include_secrets is set."
	}
	return note
}
