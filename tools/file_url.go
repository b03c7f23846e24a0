package tools

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/internal/shellquote"
	"github.com/e2b-mcp/e2b-mcp/policy"
	"github.com/e2b-mcp/e2b-mcp/state"
)

// Link lifetimes: long enough to click or script, short enough that a link pasted somewhere goes stale soon.
const (
	defaultLinkSeconds = 900
	maxLinkSeconds     = 86400
)

type fileURLArgs struct {
	SandboxID        string `json:"sandbox_id" jsonschema:"minLength=1" jsonschema_description:"The sandbox the file is in."`
	Path             string `json:"path" policy:"path" jsonschema:"minLength=1" jsonschema_description:"File path; relative paths are under /home/user."`
	ExpiresInSeconds int    `json:"expires_in_seconds,omitempty" jsonschema:"minimum=1,maximum=86400" jsonschema_description:"How long the link works."`
}

type fileURLResult struct {
	SandboxID        string `json:"sandbox_id"`
	Path             string `json:"path" jsonschema_description:"The absolute path the link reads or writes."`
	URL              string `json:"url" jsonschema_description:"The link. It carries a signature for this one file and operation, not the E2B API key."`
	Method           string `json:"method" jsonschema_description:"The HTTP method the link takes: GET to download, POST to upload."`
	ExpiresAt        string `json:"expires_at" jsonschema_description:"When the link stops working (RFC 3339, UTC)."`
	ExpiresInSeconds int    `json:"expires_in_seconds"`
	Size             *int64 `json:"size,omitempty" jsonschema_description:"The file's size in bytes now (downloads)."`
	Usage            string `json:"usage" jsonschema_description:"How to use the link from a shell."`
	Note             string `json:"note"`
}

// fileURL is e2b_download_url or e2b_upload_url: a signed envd /files URL the user can use without the server,
// for a limited time.
type fileURL struct {
	*base
	op e2b.FileOp
}

const (
	downloadURLName = "e2b_download_url"
	uploadURLName   = "e2b_upload_url"
)

func (t fileURL) tool() Tool {
	desc := fmt.Sprintf("Make a link that downloads a file of a sandbox in a browser or with curl, without this server, "+
		"for the user (give it to them; it is a credential for that one file). It works for expires_in_seconds "+
		"(default %d, max %d) and while the sandbox runs, and carries no API key. For you to see a file, use "+
		"e2b_read_file instead.", defaultLinkSeconds, maxLinkSeconds)
	name, grants := downloadURLName, readFileName
	// A download link reads; an upload link lets someone replace a file. Each call signs a new link.
	h := hints{readOnly: true, destructive: false, idempotent: false, openWorld: true}
	if t.op == e2b.FileWrite {
		name, grants = uploadURLName, writeFileName
		desc = fmt.Sprintf("Make a link the user can upload a file to a sandbox with (HTTP POST, e.g. with curl), "+
			"without this server: the upload creates or replaces the file at path (parent directories are made). "+
			"Use it for files too big or too binary for e2b_write_file. It works for expires_in_seconds (default %d, "+
			"max %d) and while the sandbox runs, and carries no API key.", defaultLinkSeconds, maxLinkSeconds)
		h = hints{readOnly: false, destructive: true, idempotent: false, openWorld: true}
	}
	return define(t.base, definition[fileURLArgs, fileURLResult]{
		name: name, description: desc, hints: h,
		defaults: fileURLArgs{ExpiresInSeconds: defaultLinkSeconds},
		grants:   grants,
		run:      t.run,
	})
}

func (t fileURL) run(ctx context.Context, call Caller, a *fileURLArgs) (*fileURLResult, error) {
	if t.op == e2b.FileWrite && strings.HasSuffix(a.Path, "/") {
		return nil, userErrorf("path '%s' names a directory; give a file name.", a.Path)
	}
	seconds := a.ExpiresInSeconds
	// The path the policy judged, and the one the link is signed for: the same resolution envd applies.
	p := policy.SandboxPath(a.Path)
	rec, c, err := t.sandbox(ctx, call, a.SandboxID, true)
	if err != nil {
		return nil, err
	}
	if rec.AccessToken == "" {
		// envd serves /files of a sandbox without an access token to anyone: a link to it could not expire.
		return nil, userErrorf("Sandbox '%s' has no envd access token (it was not created secure), so a link to its "+
			"files could neither be limited to one file nor expire; none is made.", rec.ID)
	}
	e := envd(c, rec)
	res := fileURLResult{SandboxID: rec.ID, Path: p, ExpiresInSeconds: seconds}
	info, err := e.Stat(ctx, p)
	switch {
	case err == nil && info.Type == e2b.FileTypeDirectory:
		return nil, userErrorf("'%s' is a directory; links are made for files (pack it first, e.g. tar czf out.tgz -C %s .).",
			p, shellquote.Quote(p))
	case err == nil && t.op == e2b.FileRead:
		res.Size = &info.Size
	case errors.Is(err, e2b.ErrNotFound) && t.op == e2b.FileRead:
		return nil, userErrorf("No such file in sandbox '%s': %s", rec.ID, p)
	case err != nil && !errors.Is(err, e2b.ErrNotFound):
		return nil, t.sandboxFailure(ctx, c, call, rec, err)
	}
	link, err := e.SignedURL(p, t.op, time.Duration(seconds)*time.Second)
	if err != nil {
		return nil, err
	}
	res.URL = link
	res.ExpiresAt = linkExpiry(link, t.now().Add(time.Duration(seconds)*time.Second)).UTC().Format(time.RFC3339)
	if t.op == e2b.FileWrite {
		res.Method = "POST"
		res.Usage = fmt.Sprintf("curl -X POST -H 'Content-Type: application/octet-stream' --data-binary @LOCAL_FILE '%s'",
			link)
		res.Note = "Give the link and the command to the user; the upload replaces " + p + " if it exists. The link stops " +
			"working when it expires or the sandbox is paused or deleted."
	} else {
		res.Method = "GET"
		res.Usage = fmt.Sprintf("curl -fo %s '%s'", shellquote.Quote(path.Base(p)), link)
		res.Note = "Give the link to the user: it opens in a browser. It stops working when it expires or the sandbox " +
			"is paused or deleted."
	}
	return &res, nil
}

// linkExpiry reads the expiry a signed URL carries; fallback when it carries none.
func linkExpiry(link string, fallback time.Time) time.Time {
	u, err := url.Parse(link)
	if err != nil {
		return fallback
	}
	n, err := strconv.ParseInt(u.Query().Get("signature_expiration"), 10, 64)
	if err != nil {
		return fallback
	}
	return time.Unix(n, 0)
}

// unseenImage is what a result says of an image the calling client does not hand its model (Client.Images):
// that the model does not see it, and a link that downloads the file at p for the user, signed as
// e2b_download_url signs one, for defaultLinkSeconds. A sandbox without an access token gets no link: envd
// serves its files to anyone, so a link to them could not expire (e2b_download_url refuses it for that reason).
func (b *base) unseenImage(ctx context.Context, c *e2b.Client, rec state.SandboxRecord, p string) string {
	note := fmt.Sprintf("this client (%s) does not hand a tool's images to its model, so you do not see it",
		clientOf(ctx).Profile)
	if rec.AccessToken == "" {
		return note + fmt.Sprintf("; to show it to the user, copy %s out of the sandbox (e2b_sync_out)", p)
	}
	link, err := envd(c, rec).SignedURL(p, e2b.FileRead, defaultLinkSeconds*time.Second)
	if err != nil {
		return note + fmt.Sprintf("; to show it to the user, make a link to %s with e2b_download_url", p)
	}
	expires := linkExpiry(link, b.now().Add(defaultLinkSeconds*time.Second)).UTC().Format(time.RFC3339)
	return note + fmt.Sprintf(". To show it to the user, give them this link to %s (it downloads that one file, "+
		"until %s or until the sandbox is paused or deleted): %s", p, expires, link)
}
