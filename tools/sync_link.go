package tools

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/shellquote"
	"github.com/e2b-mcp/e2b-mcp/workspace"
)

// The sync tools on a server that cannot see the user's disk (a team server, reached over HTTP): the tool answers
// with a command the user runs on their machine, `e2b-mcp sync in|out --link URL DIR`, and that command does the
// walking, planning, diffing and applying there while the server does the sandbox's side through the link. The
// link is the server's to sign (SyncLinks); SyncTransfers is what redeeming it does in the sandbox.

// The directions of a sync link.
const (
	SyncDirectionIn  = "in"
	SyncDirectionOut = "out"
)

// SyncLink is what a sync link lets the member who holds it (with their own bearer token) do: one sync of one
// directory of one of their sandboxes, in one direction, with the options of the call the policy judged.
type SyncLink struct {
	Direction  string `json:"d"`
	SandboxID  string `json:"s"`
	RemotePath string `json:"r"`
	// Local is the user's directory as the call named it, which the policy and a human approving it judged: the
	// command line syncs it alone, whatever directory its command names.
	Local          string   `json:"l"`
	Excludes       []string `json:"x,omitempty"`
	IncludeGit     bool     `json:"g,omitempty"`
	IncludeSecrets bool     `json:"k,omitempty"`
	// Apply lets a sync out bring the sandbox's manifest up to date after the user's side applied the changes.
	Apply bool `json:"a,omitempty"`
}

// SyncLinks makes the one-time links of the sync tools; nil in Deps when the server cannot serve them (a stdio
// server, which has the user's disk).
type SyncLinks interface {
	// Link is a link for call's owner and session to do l, and when it expires.
	Link(call Caller, l SyncLink) (link string, expires time.Time, err error)
}

// syncCommand is the command the user runs for a link, in dir (as the call named it).
func syncCommand(direction, link, dir string, apply bool) string {
	cmd := "e2b-mcp sync " + direction + " --link " + shellquote.Quote(link)
	if apply {
		cmd += " --apply"
	}
	return cmd + " " + shellquote.Quote(dir)
}

// linkNote says what the user does with a link's command.
func linkNote(expires time.Time) string {
	return fmt.Sprintf("This server cannot see the user's disk: give the user the command, to run on their machine "+
		"with their bearer token of this server in E2B_MCP_TOKEN and this server's URL, as their MCP client has it, "+
		"in E2B_MCP_SERVER (the command refuses a link to any other server). The link works once, until %s.",
		expires.UTC().Format(time.RFC3339))
}

// SyncTransfers do the sandbox's side of a sync link for the server's handler: what e2b_sync_in and e2b_sync_out
// do there on a server that has the user's disk, with the user's side's words checked as any input.
type SyncTransfers struct{ b *base }

// NewSyncTransfers makes the sync links' transfers of the tools made with d.
func NewSyncTransfers(d Deps) *SyncTransfers { return &SyncTransfers{newBase(d)} }

// Limits are the bounds of one sync.
func (s *SyncTransfers) Limits() workspace.Limits { return s.b.cfg.SyncLimits }

// MaxManifestBytes bounds a manifest, MaxListingBytes a listing of a tree.
const (
	MaxManifestBytes = maxManifestBytes
	MaxListingBytes  = maxListingBytes
)

// ErrorText words err for the user's side; refused reports whether it is the user's side's to correct (the link,
// what it sent, the sandbox's state) rather than a failure of the server or of E2B.
func (s *SyncTransfers) ErrorText(ctx context.Context, call Caller, err error) (text string, refused bool) {
	var te *toolError
	var re *workspace.RefusedError
	var le *workspace.LimitError
	switch {
	case errors.As(err, &re), errors.As(err, &le):
		return "Nothing was synced: " + err.Error() + ".", true
	case errors.As(err, &te):
		return te.text, true
	}
	return s.b.errorText(ctx, call, "sync link", err), false
}

// Manifest is the manifest of the last sync into l's directory, nil when there is none; for a sync out, whose
// base it is, none is an error. hold is told the manifest's size before it is read (workspace.Hold); its error
// is returned as it came.
func (s *SyncTransfers) Manifest(ctx context.Context, call Caller, l SyncLink, hold workspace.Hold) (
	*workspace.Manifest, error) {
	use, err := s.b.running(ctx, call, l.SandboxID)
	if err != nil {
		return nil, err
	}
	man, err := readManifest(ctx, envd(use.c, use.rec), l.RemotePath, hold)
	if held := (*heldError)(nil); errors.As(err, &held) {
		return nil, held.err
	}
	if err != nil {
		return nil, s.b.sandboxFailure(ctx, use.c, call, use.rec, err)
	}
	if man == nil && l.Direction == SyncDirectionOut {
		return nil, userErrorf("No sync in into %s was found in sandbox %s (nor in the sandbox it was forked from): "+
			"sync a local directory in first.", l.RemotePath, l.SandboxID)
	}
	return man, nil
}

// SyncReceived is what a sync in through a link took.
type SyncReceived struct {
	Entries  int   `json:"entries"`
	Deleted  int   `json:"deleted"`
	Bytes    int64 `json:"bytes"`
	TarBytes int64 `json:"-"`
	// CheckpointID is the checkpoint the checkpoint policy took after the sync, a step of the sandbox as
	// e2b_sync_in is; Warning says why one could not be taken.
	CheckpointID string `json:"checkpoint_id,omitempty"`
	Warning      string `json:"warning,omitempty"`
}

// Receive takes a sync in's stream (workspace.WriteSyncTar) from body into l's directory, its manifest of at
// most maxManifest bytes: every header is checked as it streams into a scratch file of the sandbox
// (workspace.ReceiveTar), then the manifest, and only then is anything unpacked; a stream refused on the way
// leaves the sandbox as it was. hold is told of the deletions and the manifest before they are held whole
// (workspace.Hold); its error is returned as it came.
func (s *SyncTransfers) Receive(ctx context.Context, call Caller, l SyncLink, body io.Reader,
	maxManifest int64, hold workspace.Hold) (SyncReceived, error) {
	use, err := s.b.running(ctx, call, l.SandboxID)
	if err != nil {
		return SyncReceived{}, err
	}
	var got *workspace.Received
	sent, refused, err := unpackTar(ctx, envd(use.c, use.rec), l.RemotePath, func(w io.Writer) error {
		var err error
		got, err = workspace.ReceiveTar(body, w, s.b.cfg.SyncLimits, maxManifest, hold)
		return err
	}, func() ([]string, []byte, error) {
		return got.Deletes, got.Manifest, s.checkManifest(got.Manifest, l)
	})
	res := SyncReceived{TarBytes: sent}
	if got != nil {
		res.Entries, res.Deleted, res.Bytes = got.Entries, len(got.Deletes), got.Bytes
	}
	switch {
	case refused != nil && (err == nil || !errors.Is(refused, io.ErrClosedPipe)):
		return res, refused // not what the upload's failure made of the stream
	case err != nil:
		return res, s.b.sandboxFailure(ctx, use.c, call, use.rec, err)
	}
	rec, err := s.b.countStep(call, use.rec.ID)
	if err != nil {
		res.Warning = "The sync's step could not be counted: " + s.b.errorText(ctx, call, syncInName, err)
		return res, nil
	}
	res.CheckpointID, res.Warning = s.b.afterStep(ctx, use.c, call, rec, syncInName)
	return res, nil
}

// checkManifest checks that a manifest the user's side sent is one, of l's directory and options.
func (s *SyncTransfers) checkManifest(data []byte, l SyncLink) error {
	man, err := workspace.ReadManifest(bytes.NewReader(data), maxManifestBytes)
	switch {
	case err != nil:
		return &workspace.RefusedError{Text: err.Error()}
	case man.Remote != l.RemotePath:
		return &workspace.RefusedError{Text: fmt.Sprintf("the manifest is of %s, not of %s", man.Remote, l.RemotePath)}
	case !slices.Equal(man.Excludes, l.Excludes) || man.IncludeSecrets != l.IncludeSecrets:
		return &workspace.RefusedError{Text: "the manifest's options are not the link's"}
	case len(man.Entries) > s.b.cfg.SyncLimits.MaxEntries:
		return &workspace.LimitError{Text: fmt.Sprintf("the manifest has more than %d entries",
			s.b.cfg.SyncLimits.MaxEntries)}
	}
	return nil
}

// List is the sandbox's listing of l's directory (ListCommand's output, which the user's side parses as the
// sandbox's word), pruning the names given. hold is told the most the listing may be once it passes a small
// one (workspace.Hold); its error is returned as it came.
func (s *SyncTransfers) List(ctx context.Context, call Caller, l SyncLink, pruneNames []string,
	hold workspace.Hold) ([]byte, error) {
	use, err := s.b.running(ctx, call, l.SandboxID)
	if err != nil {
		return nil, err
	}
	out, err := listTree(ctx, envd(use.c, use.rec), l.RemotePath, pruneNames, hold)
	if held := (*heldError)(nil); errors.As(err, &held) {
		return nil, held.err
	}
	if err != nil {
		return nil, s.b.sandboxFailure(ctx, use.c, call, use.rec, err)
	}
	return out, nil
}

// Fetch is a tar of the files of l's directory named in paths (each a clean path inside it).
func (s *SyncTransfers) Fetch(ctx context.Context, call Caller, l SyncLink, paths []string) (io.ReadCloser, error) {
	if len(paths) > s.b.cfg.SyncLimits.MaxEntries {
		return nil, &workspace.LimitError{Text: fmt.Sprintf("more than %d files asked for",
			s.b.cfg.SyncLimits.MaxEntries)}
	}
	for _, p := range paths {
		if !workspace.Local(p) {
			return nil, &workspace.RefusedError{Text: fmt.Sprintf("%q is not a clean path inside the tree", p)}
		}
	}
	use, err := s.b.running(ctx, call, l.SandboxID)
	if err != nil {
		return nil, err
	}
	r, err := fetchFiles(ctx, envd(use.c, use.rec), l.RemotePath, paths)
	if err != nil {
		return nil, s.b.sandboxFailure(ctx, use.c, call, use.rec, err)
	}
	return r, nil
}

// Rebase makes manifest (the state the user's side applied) the base of l's directory, as e2b_sync_out does
// after an apply.
func (s *SyncTransfers) Rebase(ctx context.Context, call Caller, l SyncLink, manifest []byte) error {
	if !l.Apply {
		return userErrorf("This link was made for a patch only (e2b_sync_out without apply): it cannot change the " +
			"sandbox's base.")
	}
	if err := s.checkManifest(manifest, l); err != nil {
		return err
	}
	use, err := s.b.running(ctx, call, l.SandboxID)
	if err != nil {
		return err
	}
	if err := uploadTo(ctx, envd(use.c, use.rec), manifestPath(l.RemotePath), bytes.NewReader(manifest)); err != nil {
		return s.b.sandboxFailure(ctx, use.c, call, use.rec, err)
	}
	return nil
}

// remoteForLink is the sandbox directory of a link's call: remote_path, else the home directory joined with the
// last element of the user's local_path (which may be a Windows path: the user's machine is not the server's).
func remoteForLink(remote, local string) (string, error) {
	if remote != "" {
		return remoteDir(remote, ""), nil
	}
	name := path.Base(strings.TrimRight(strings.ReplaceAll(local, `\`, "/"), "/"))
	if name == "." || name == "/" || name == ".." || strings.HasSuffix(name, ":") {
		return "", userErrorf("This server cannot see the user's disk, so '%s' does not say what the directory is "+
			"called: give remote_path (the sandbox directory to sync into, e.g. /home/user/myproject).", local)
	}
	return path.Join(WorkspacePath, name), nil
}

// linked answers a sync call on a server that cannot see the user's disk: the sandbox must be the caller's, and
// the answer is a link to l and the command that uses it.
func (b *base) linked(ctx context.Context, call Caller, l SyncLink, dir string) (command string, expires time.Time,
	err error) {
	if !userAbsolute(dir) {
		return "", time.Time{}, userErrorf("This server cannot see the user's disk, so it cannot tell where '%s' is: "+
			"give local_path as an absolute path of the user's machine (e.g. /home/me/myproject).", dir)
	}
	rec, _, err := b.sandbox(ctx, call, l.SandboxID, false)
	if err != nil {
		return "", time.Time{}, err
	}
	l.SandboxID, l.Local = rec.ID, dir
	link, expires, err := b.syncLinks.Link(call, l)
	if err != nil {
		return "", time.Time{}, userErrorf("No sync link could be made: %v.", err)
	}
	return syncCommand(l.Direction, link, dir, l.Apply), expires, nil
}

// userAbsolute reports whether p is an absolute path of a user's machine, Unix's or Windows' (C:\dir, C:/dir,
// \\host\share): a relative one is relative to where the command is run, which neither the policy nor a human
// approving the call can see.
func userAbsolute(p string) bool {
	if strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\\`) {
		return true
	}
	return len(p) >= 3 && p[1] == ':' && (p[2] == '\\' || p[2] == '/') &&
		('a' <= p[0]|0x20 && p[0]|0x20 <= 'z')
}
