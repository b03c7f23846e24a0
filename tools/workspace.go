package tools

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/policy"
	"github.com/e2b-mcp/e2b-mcp/workspace"
)

// What e2b_sync_in and e2b_sync_out share: where on the user's machine they may read and write (the workspace
// roots), and where in the sandbox the manifest of the last sync in is kept.

// manifestDir is where a sandbox keeps the manifests of the syncs into it, one per remote path. It lives in the
// sandbox so that a fork carries it (and diffs against the same base); it is outside what a sync lists unless
// the remote path holds it, and then it is pruned.
const manifestDir = WorkspacePath + "/.e2b-mcp-sync"

// maxManifestBytes bounds a manifest read back from the sandbox.
const maxManifestBytes = 64 << 20

func manifestPath(remote string) string {
	sum := sha256.Sum256([]byte(remote))
	return manifestDir + "/" + hex.EncodeToString(sum[:12]) + ".json"
}

// noWorkspaces is the answer of the sync tools on a server that has no workspace roots and makes no links (a stdio
// server started in the home directory, say).
func noWorkspaces(tool string) error {
	return userErrorf("%s is not available on this server: it has no workspace roots (start it with --workspace DIR). "+
		"Use e2b_write_file and e2b_read_file, or the upload and download links, meanwhile.", tool)
}

// localTree is a local directory inside a workspace root: the path as resolved (symlinks and ".." followed) and
// an os.Root on it, through which every read and write goes, so that nothing reaches outside it.
type localTree struct {
	path string
	root *os.Root
}

// openLocal resolves p (absolute, or relative to the first workspace root) and opens it when it is a directory
// inside one of the roots, every symlink and ".." resolved before the check, and the directory the policy judged
// the call by (judgeLocalPath): a symlink changed since then is refused rather than followed somewhere no rule saw.
func (b *base) openLocal(ctx context.Context, tool, p string) (*localTree, error) {
	if len(b.cfg.Workspaces) == 0 {
		return nil, noWorkspaces(tool)
	}
	p = b.absLocal(p)
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return nil, userErrorf("Cannot use '%s': %v", p, unwrapPathError(err))
	}
	if judged, ok := judgedArgs(ctx)["local_path"].(string); ok && judged != real {
		return nil, userErrorf("Nothing was done: '%s' was %s when the policy judged this call and is %s now (a symlink "+
			"changed in between); call again.", p, judged, real)
	}
	inside := false
	for _, r := range b.cfg.Workspaces {
		rr, err := filepath.EvalSymlinks(r)
		if err != nil {
			continue
		}
		if rel, err := filepath.Rel(rr, real); err == nil && (rel == "." || filepath.IsLocal(rel)) {
			inside = true
			break
		}
	}
	if !inside {
		return nil, userErrorf("Cannot use '%s': it is outside the workspace roots (%s), with symlinks and .. resolved. "+
			"Start the server with --workspace DIR to allow another directory.", p, strings.Join(b.cfg.Workspaces, ", "))
	}
	fi, err := os.Stat(real)
	if err != nil {
		return nil, userErrorf("Cannot use '%s': %v", p, unwrapPathError(err))
	}
	if !fi.IsDir() {
		return nil, userErrorf("Cannot use '%s': it is not a directory; a sync takes a whole directory.", p)
	}
	root, err := os.OpenRoot(real)
	if err != nil {
		return nil, userErrorf("Cannot open '%s': %v", p, unwrapPathError(err))
	}
	return &localTree{path: real, root: root}, nil
}

// absLocal is p made absolute as a sync reads it: relative to the first workspace root.
func (b *base) absLocal(p string) string {
	if !filepath.IsAbs(p) && len(b.cfg.Workspaces) > 0 {
		return filepath.Join(b.cfg.Workspaces[0], p)
	}
	return filepath.Clean(p)
}

// judgeLocalPath sets args' local_path (args is the caller's copy) to the directory openLocal will resolve it to
// (absolute, symlinks and ".." resolved; only made absolute when it cannot be resolved, and the call then fails),
// which is what the policy's local_path condition and a human approving the call judge, and returns it. Resolving
// reads no file, only directories' entries.
func (b *base) judgeLocalPath(args map[string]any) (string, bool) {
	p, ok := args["local_path"].(string)
	if !ok || p == "" {
		return "", false
	}
	abs := b.absLocal(p)
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	args["local_path"] = abs
	return abs, true
}

// readManifest reads the manifest of the last sync into remote; nil when there is none (or one that cannot be
// read, which a sync in replaces by sending everything). Each hold is told its size before it is read; a hold's
// refusal is a heldError.
func readManifest(ctx context.Context, e *e2b.Envd, remote string, hold ...workspace.Hold) (*workspace.Manifest,
	error) {
	r, size, err := e.Download(ctx, manifestPath(remote), e2b.DownloadOptions{})
	if errors.Is(err, e2b.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer r.Close()
	if size < 0 || size > maxManifestBytes {
		size = maxManifestBytes // what ReadManifest may hold of it
	}
	if err := holdAll(hold, size); err != nil {
		return nil, &heldError{err}
	}
	m, err := workspace.ReadManifest(r, maxManifestBytes)
	if err != nil || m.Remote != remote {
		return nil, nil
	}
	return m, nil
}

// heldError is a Hold's refusal, which is not the sandbox's failure.
type heldError struct{ err error }

func (e *heldError) Error() string { return e.err.Error() }
func (e *heldError) Unwrap() error { return e.err }

// remoteDir is the sandbox directory a sync uses: remote as the sandbox resolves it, else the home directory
// joined with the local directory's name.
func remoteDir(remote, local string) string {
	if remote == "" {
		return path.Join(WorkspacePath, filepath.Base(local))
	}
	return policy.SandboxPath(remote)
}

// scratchPath is a file of one call in the sandbox's /tmp.
func scratchPath(kind string) string {
	return fmt.Sprintf("/tmp/e2b-mcp-sync-%s-%s", rand.Text()[:12], kind)
}

// scriptTimeout bounds one of the sync's commands in the sandbox (a tar of 2 GiB takes well under it).
const scriptTimeout = 10 * time.Minute

// runScript runs one of the sync's commands and returns its stdout, at most limit bytes; a command that fails is
// an error with its stderr. Each hold is told limit once the stdout passes holdFrom; a refusal stops the command
// and is a heldError.
func runScript(ctx context.Context, e *e2b.Envd, script string, limit int, hold ...workspace.Hold) ([]byte, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var out, stderr []byte
	over, told := false, false
	var held error // a hold's refusal: the command is stopped, its output dropped
	res, err := e.RunCommand(ctx, script, e2b.CommandOptions{Timeout: scriptTimeout,
		OnOutput: func(kind e2b.EventKind, data []byte) {
			if kind == e2b.EventStdout && !told && len(out)+len(data) > holdFrom {
				told, held = true, holdAll(hold, int64(limit))
			}
			switch {
			case held != nil:
				cancel()
			case kind == e2b.EventStdout && len(out)+len(data) <= limit:
				out = append(out, data...)
			case kind == e2b.EventStdout:
				over = true
			case kind == e2b.EventStderr && len(stderr) < 4096:
				stderr = append(stderr, data[:min(len(data), 4096-len(stderr))]...)
			}
		}})
	if held != nil {
		return nil, &heldError{held}
	}
	if err != nil {
		return nil, err
	}
	if over {
		return nil, &workspace.LimitError{Text: fmt.Sprintf("the sandbox's answer to a sync command is over %d bytes", limit)}
	}
	if res.ExitCode != 0 {
		return nil, userErrorf("A sync command failed in the sandbox (exit %d): %s", res.ExitCode,
			strings.TrimSpace(string(stderr)))
	}
	return out, nil
}

// holdFrom is the output of a sync command past which runScript tells its holds: a small one is held without.
const holdFrom = 1 << 20

// holdAll tells each hold of size, the first refusal.
func holdAll(hold []workspace.Hold, size int64) error {
	for _, h := range hold {
		if h == nil {
			continue
		}
		if err := h(size); err != nil {
			return err
		}
	}
	return nil
}

// upload sends r to path in the sandbox.
func uploadTo(ctx context.Context, e *e2b.Envd, p string, r io.Reader) error {
	_, err := e.Upload(ctx, p, r)
	return err
}

// unpackTar uploads the tar that tarred writes to a scratch file of the sandbox, then, once the tar is whole, the
// deletions (paths relative to remote) and the manifest that settled gives, and unpacks it all into remote with
// one command, which moves the manifest into place last. Until that command runs nothing is in remote, and when a
// step fails the scratch files are removed: a sync that fails leaves the sandbox as it was. It returns the bytes
// of tar uploaded, tarred's error apart from the others.
func unpackTar(ctx context.Context, e *e2b.Envd, remote string, tarred func(io.Writer) error,
	settled func() (deletes []string, manifest []byte, err error)) (sent int64, tarErr, err error) {
	tarPath, manTmp, delPath := scratchPath("in.tar"), scratchPath("manifest"), scratchPath("delete")
	defer func() {
		if tarErr != nil || err != nil {
			for _, p := range []string{tarPath, manTmp, delPath} {
				_ = e.Remove(context.WithoutCancel(ctx), p)
			}
		}
	}()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := tarred(pw)
		// Even a tar that failed half-way ends the upload as a whole one: an upload cut off could still be
		// writing its file in the sandbox when the removal below arrives, and leave it there.
		pw.Close()
		done <- err
	}()
	counted := &workspace.CountingReader{R: pr}
	err = uploadTo(ctx, e, tarPath, counted)
	pr.CloseWithError(io.ErrClosedPipe) // unblocks the writer should the upload stop early
	if tarErr = <-done; tarErr != nil || err != nil {
		return counted.N, tarErr, err
	}
	deletes, man, err := settled()
	if err != nil {
		return counted.N, nil, err
	}
	if len(deletes) > 0 {
		if err := uploadTo(ctx, e, delPath, strings.NewReader(strings.Join(deletes, "\x00"))); err != nil {
			return counted.N, nil, err
		}
	} else {
		delPath = ""
	}
	if err := uploadTo(ctx, e, manTmp, bytes.NewReader(man)); err != nil {
		return counted.N, nil, err
	}
	_, err = runScript(ctx, e, workspace.UnpackCommand(remote, tarPath, delPath, manTmp, manifestPath(remote)), 4096)
	return counted.N, nil, err
}

// listTree is the sandbox's listing of the tree at remote (ListCommand's output, for ParseListing), pruning the
// names given and the manifests' directory when it is inside remote.
func listTree(ctx context.Context, e *e2b.Envd, remote string, pruneNames []string,
	hold ...workspace.Hold) ([]byte, error) {
	var prune []string
	if rel, ok := strings.CutPrefix(manifestDir, remote+"/"); ok {
		prune = append(prune, rel)
	}
	return runScript(ctx, e, workspace.ListCommand(remote, pruneNames, prune), maxListingBytes, hold...)
}

// fetchFiles is a tar of the files of remote named in fetch (paths relative to it), made in the sandbox and
// downloaded; closing it removes the tar there.
func fetchFiles(ctx context.Context, e *e2b.Envd, remote string, fetch []string) (io.ReadCloser, error) {
	list, tarPath := scratchPath("out.list"), scratchPath("out.tar")
	if err := uploadTo(ctx, e, list, strings.NewReader(strings.Join(fetch, "\x00"))); err != nil {
		return nil, err
	}
	if _, err := runScript(ctx, e, workspace.TarCommand(remote, list, tarPath), 4096); err != nil {
		return nil, err
	}
	r, _, err := e.Download(ctx, tarPath, e2b.DownloadOptions{})
	if err != nil {
		_ = e.Remove(context.WithoutCancel(ctx), tarPath)
		return nil, err
	}
	return &removedOnClose{ReadCloser: r, remove: func() { _ = e.Remove(context.WithoutCancel(ctx), tarPath) }}, nil
}

// removedOnClose is a download whose file in the sandbox is removed when it is closed.
type removedOnClose struct {
	io.ReadCloser
	remove func()
}

func (r *removedOnClose) Close() error {
	err := r.ReadCloser.Close()
	r.remove()
	return err
}
