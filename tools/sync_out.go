package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"path"
	"strings"
	"time"

	"github.com/e2b-mcp/e2b-mcp/audit"
	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/workspace"
)

const syncOutName = "e2b_sync_out"

// The actions of e2b_sync_out as the policy sees them (its "action" condition): a patch only, or applied.
const (
	syncActionPatch = "patch"
	syncActionApply = "apply"
)

type syncOutArgs struct {
	SandboxID  string `json:"sandbox_id" jsonschema:"minLength=1" jsonschema_description:"The sandbox to bring changes back from."`
	RemotePath string `json:"remote_path" policy:"path" jsonschema:"minLength=1" jsonschema_description:"The sandbox directory an e2b_sync_in copied into; relative paths are under /home/user."`
	// The manifest in the sandbox names the directory it came from, but it is the sandbox's word: a sync out reads
	// and writes only where the call itself, which the policy and a human approving it see, says.
	LocalPath string `json:"local_path" policy:"local_path" jsonschema:"minLength=1" jsonschema_description:"The local directory that was synced in (the local_path e2b_sync_in answered with); the changes are compared with it, and written into it with apply."`
	Apply     bool   `json:"apply,omitempty" jsonschema_description:"Apply the changes to the local directory, all or nothing: refused, naming the files, where the local side changed since the sync in."`
}

type syncOutFile struct {
	Path   string `json:"path"`
	Change string `json:"change" jsonschema_description:"added, modified or deleted."`
	Binary bool   `json:"binary,omitempty"`
}

type syncOutResult struct {
	SandboxID    string               `json:"sandbox_id"`
	LocalPath    string               `json:"local_path"`
	RemotePath   string               `json:"remote_path"`
	Changed      int                  `json:"changed" jsonschema_description:"Files changed in the sandbox since the sync in."`
	Applied      bool                 `json:"applied" jsonschema_description:"True when the changes were applied to the local directory."`
	PatchFile    string               `json:"patch_file,omitempty" jsonschema_description:"The patch on the user's machine, for git apply."`
	PatchBytes   int                  `json:"patch_bytes"`
	Conflicts    []workspace.Conflict `json:"conflicts,omitempty" jsonschema_description:"Files whose local side changed since the sync in: left out of the patch, and no apply happens while there are any."`
	Files        []syncOutFile        `json:"files" jsonschema_description:"The changed files (the first 200)."`
	Patch        string               `json:"patch,omitempty" jsonschema_description:"The patch itself, when it fits in the result."`
	Note         string               `json:"note,omitempty"`
	Seconds      float64              `json:"seconds"`
	Resumed      bool                 `json:"resumed,omitempty" jsonschema_description:"True when the sandbox had been paused at its timeout and this call resumed it first."`
	CheckpointID string               `json:"checkpoint_id,omitempty" jsonschema_description:"The checkpoint taken automatically after this step, by the checkpoint policy."`
	Warning      string               `json:"warning,omitempty"`
	Command      string               `json:"command,omitempty" jsonschema_description:"On a server that cannot see the user's disk: nothing was brought back yet; the user runs this command on their machine to do it."`
	ExpiresAt    string               `json:"expires_at,omitempty" jsonschema_description:"When command's one-time link stops working (RFC 3339, UTC)."`
}

// maxFilesShown bounds the files a result lists.
const maxFilesShown = 200

// syncOut is e2b_sync_out.
type syncOut struct{ *base }

func (t syncOut) tool() Tool {
	return define(t.base, definition[syncOutArgs, syncOutResult]{
		name: syncOutName,
		description: "Bring back what changed in a sandbox directory since e2b_sync_in: the added, modified and deleted " +
			"files as a patch git apply accepts, saved on the user's machine (patch_file) and shown when it fits. With apply " +
			"true it is applied to the local directory, all or nothing, and refused where the local side changed since " +
			"the sync in. From a fork it gives that fork's changes against the same base.",
		// A sync out may write into the local tree (apply), and a second apply finds its base changed.
		hints: hints{readOnly: false, destructive: true, idempotent: false, openWorld: true},
		shown: func(args map[string]any) map[string]any {
			out := maps.Clone(args)
			if !t.byLink() {
				t.judgeLocalPath(out) // a server that cannot see the user's disk shows the path as the call gives it
			}
			out["action"] = syncActionPatch
			if apply, _ := args["apply"].(bool); apply {
				out["action"] = syncActionApply
			}
			return out
		},
		actions: []string{syncActionPatch, syncActionApply},
		run:     t.run,
	})
}

func (t syncOut) run(ctx context.Context, call Caller, a *syncOutArgs) (*syncOutResult, error) {
	if t.byLink() {
		remote := remoteDir(a.RemotePath, "")
		cmd, expires, err := t.linked(ctx, call, SyncLink{Direction: SyncDirectionOut, SandboxID: a.SandboxID,
			RemotePath: remote, Apply: a.Apply}, a.LocalPath)
		if err != nil {
			return nil, err
		}
		does := " It prints the changed files and saves the patch on the user's machine."
		if a.Apply {
			does = " It prints the changed files, saves the patch on the user's machine and applies it there, all or " +
				"nothing, refused where the local side changed since the sync in."
		}
		return &syncOutResult{SandboxID: a.SandboxID, LocalPath: a.LocalPath, RemotePath: remote, Files: []syncOutFile{},
			Command: cmd, ExpiresAt: expires.UTC().Format(time.RFC3339), Note: linkNote(expires) + does}, nil
	}
	if len(t.cfg.Workspaces) == 0 {
		return nil, noWorkspaces(syncOutName)
	}
	start := t.now()
	use, err := t.running(ctx, call, a.SandboxID)
	if err != nil {
		return nil, err
	}
	rec, err := t.countStep(call, use.rec.ID)
	if err != nil {
		return nil, err
	}
	e := envd(use.c, rec)
	remote := remoteDir(a.RemotePath, "")
	man, err := readManifest(ctx, e, remote)
	if err != nil {
		return nil, t.sandboxFailure(ctx, use.c, call, rec, err)
	}
	if man == nil {
		return nil, userErrorf("No e2b_sync_in into %s was found in sandbox %s (nor in the sandbox it was forked from): "+
			"sync a local directory in first.", remote, rec.ID)
	}
	local, err := t.openLocal(ctx, syncOutName, a.LocalPath)
	if err != nil {
		return nil, err
	}
	defer local.root.Close()
	if local.path != man.Local {
		return nil, userErrorf("The last e2b_sync_in into %s copied %s, not %s; give that local_path.",
			remote, man.Local, local.path)
	}
	tree, err := workspace.Walk(local.root, workspace.Options{Excludes: man.Excludes, IncludeSecrets: man.IncludeSecrets,
		Limits: t.cfg.SyncLimits})
	if err != nil {
		return nil, syncError(local.path, err)
	}
	changes, listing, err := t.changes(ctx, e, remote, man, tree)
	if err != nil {
		var le *workspace.LimitError
		if errors.As(err, &le) {
			return nil, userErrorf("Nothing was brought back: %s.", le.Text)
		}
		return nil, t.sandboxFailure(ctx, use.c, call, rec, err)
	}
	audit.NoteTransfer(ctx, audit.Transfer{FilesOut: len(changes)})
	conflicts := workspace.ReadBase(local.root, changes)
	clean := workspace.WithoutConflicts(changes, conflicts)
	var patch bytes.Buffer
	workspace.WritePatch(&patch, clean)
	res := syncOutResult{SandboxID: rec.ID, LocalPath: local.path, RemotePath: remote, Changed: len(changes),
		Conflicts:  conflicts,
		PatchBytes: patch.Len(), Files: []syncOutFile{}}
	for _, c := range changes[:min(len(changes), maxFilesShown)] {
		res.Files = append(res.Files, syncOutFile{Path: c.Path, Change: c.Kind(), Binary: c.Binary()})
	}
	if patch.Len() > 0 {
		if res.PatchFile, err = t.savePatch(rec.ID, patch.Bytes()); err != nil {
			return nil, userErrorf("The patch could not be saved in %s: %v", t.cfg.PatchDir, unwrapPathError(err))
		}
	}
	if a.Apply && len(changes) > 0 {
		if len(conflicts) > 0 {
			return nil, userErrorf("Nothing was applied: %s. The patch of the other changes is %s; apply it by hand, or sync "+
				"the local changes in first.",
				(&workspace.ConflictError{Conflicts: conflicts}).Error()[len("nothing was applied: "):], res.PatchFile)
		}
		if err := workspace.Apply(local.root, changes, workspace.DirsOf(listing)); err != nil {
			return nil, userErrorf("%s (the patch is %s).", upperFirst(err.Error()), res.PatchFile)
		}
		res.Applied = true
		if err := t.rebase(ctx, e, man, listing, changes); err != nil {
			res.Note = "Applied, but the sandbox's sync manifest could not be brought up to date (" + t.errorText(ctx,
				call, syncOutName, err) +
				"): the next e2b_sync_out will report these changes again."
		}
	}
	var warning string
	res.CheckpointID, warning = t.afterStep(ctx, use.c, call, rec, syncOutName)
	res.Resumed, res.Warning = use.resumed, joinWarnings(use.warning, warning)
	res.Seconds = t.now().Sub(start).Seconds()
	if len(changes) == 0 {
		res.Note = "Nothing changed in the sandbox since the sync in."
	}
	res.Patch = patch.String()
	if sizeOf(res) > t.limit(ctx) {
		res.Patch = ""
		res.Note = strings.TrimSpace(res.Note + fmt.Sprintf(" The patch (%d bytes) is too long to show here; it is "+
			"saved in patch_file.", patch.Len()))
		for sizeOf(res) > t.limit(ctx) && len(res.Files) > 0 {
			res.Files = res.Files[:len(res.Files)/2]
		}
	}
	return &res, nil
}

// changes lists the sandbox's tree, fetches the files that may have changed as one tar, and returns the changes
// against the manifest with the listing they come from.
func (t syncOut) changes(ctx context.Context, e *e2b.Envd, remote string, man *workspace.Manifest,
	tree *workspace.Tree) ([]workspace.Change, []workspace.Entry, error) {
	changes, listing, fetched, err := workspace.Changes(envdSandbox{ctx, e, remote}, man, tree, t.cfg.SyncLimits)
	audit.NoteTransfer(ctx, audit.Transfer{BytesOut: fetched})
	return changes, listing, err
}

// envdSandbox is the sandbox's side of a sync out through envd.
type envdSandbox struct {
	ctx    context.Context
	e      *e2b.Envd
	remote string
}

func (s envdSandbox) List(pruneNames []string) ([]byte, error) {
	return listTree(s.ctx, s.e, s.remote, pruneNames)
}
func (s envdSandbox) Fetch(paths []string) (io.ReadCloser, error) {
	return fetchFiles(s.ctx, s.e, s.remote, paths)
}

// maxListingBytes bounds the sandbox's listing of a tree (about 100 bytes an entry).
const maxListingBytes = 64 << 20

// rebase makes the applied state the sandbox's new base.
func (t syncOut) rebase(ctx context.Context, e *e2b.Envd, man *workspace.Manifest, listing []workspace.Entry,
	changes []workspace.Change) error {
	b, err := json.Marshal(workspace.Rebased(man, listing, changes))
	if err != nil {
		return err
	}
	return uploadTo(ctx, e, manifestPath(man.Remote), bytes.NewReader(b))
}

// savePatch writes the patch to a new file of the patch directory, readable by the user alone.
func (t syncOut) savePatch(id string, patch []byte) (string, error) {
	return workspace.SavePatch(t.cfg.PatchDir, path.Base(id)+"-"+t.now().UTC().Format("20060102T150405")+"-*.patch",
		patch)
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
