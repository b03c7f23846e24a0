package tools

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/imagesafe"
	"github.com/e2b-mcp/e2b-mcp/internal/shellquote"
	"github.com/e2b-mcp/e2b-mcp/policy"
	"github.com/e2b-mcp/e2b-mcp/state"
)

// SandboxFileTemplate is the URI template of sandbox files as MCP resources: e2b://sandbox/<id>/<absolute path
// without its leading slash>. A directory reads as the list of its entries' URIs.
const SandboxFileTemplate = "e2b://sandbox/{sandbox_id}/{+path}"

// maxDirEntries bounds a directory listing read as a resource.
const maxDirEntries = 1000

// SandboxFileURI is the resource URI of an absolute path in a sandbox.
func SandboxFileURI(sandboxID, p string) string {
	u := url.URL{Scheme: "e2b", Host: "sandbox", Path: "/" + sandboxID + "/" + strings.TrimPrefix(p, "/")}
	return u.String()
}

// fileLink is a resource link to a file a result names, so that a client can open it without another call.
func fileLink(sandboxID, p, description string) mcp.Content {
	return mcp.NewResourceLink(SandboxFileURI(sandboxID, p), path.Base(p), description, textMIME(p))
}

// ResourceCall is the call the policy judges a read of the resource at path in sandbox sandboxID as: a read of that
// file, so that every rule on reading files covers resources too.
func ResourceCall(sandboxID, path string) policy.Call {
	return policy.Call{Tool: readFileName, Args: map[string]any{"sandbox_id": sandboxID, "path": path}}
}

// ResourceTarget reads the sandbox and the absolute, cleaned path a resource read names from the arguments the
// template matched. Cleaning happens here, before the policy sees the path, so that "a/../../etc/passwd" is
// judged as the /etc/passwd it reads.
func ResourceTarget(req mcp.ReadResourceRequest) (sandboxID, p string, err error) {
	sandboxID = argString(req.Params.Arguments["sandbox_id"])
	raw := argString(req.Params.Arguments["path"])
	if sandboxID == "" || strings.ContainsAny(sandboxID, "/?#") {
		return "", "", fmt.Errorf("resource URI %q names no sandbox: use %s", req.Params.URI, SandboxFileTemplate)
	}
	if unescaped, uerr := url.PathUnescape(raw); uerr == nil {
		raw = unescaped
	}
	return sandboxID, path.Clean("/" + raw), nil
}

// argString reads one matched template variable (a string, or the first of a list).
func argString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case []string:
		if len(x) > 0 {
			return x[0]
		}
	case []any:
		if len(x) > 0 {
			s, _ := x[0].(string)
			return s
		}
	}
	return ""
}

// ResourceTemplates are the resource templates of e2b-mcp: the files of the caller's sandboxes. The server puts
// the caller in the context and applies the policy (as an e2b_read_file of the same path) and audit first.
func ResourceTemplates(d Deps) []server.ServerResourceTemplate {
	r := sandboxFiles{newBase(d)}
	return []server.ServerResourceTemplate{{
		Template: mcp.NewResourceTemplate(SandboxFileTemplate, "sandbox-file",
			mcp.WithTemplateDescription(fmt.Sprintf("A file of one of this session's sandboxes, by absolute path: text "+
				"as text, other files as base64 blobs, within the result limit of the client (images: "+
				"up to %d bytes). A directory reads as the URIs of its entries (text/uri-list), e.g. "+
				"e2b://sandbox/ID/home/user/.", r.cfg.ImageLimitBytes))),
		Handler: r.read,
	}}
}

// sandboxFiles answers resources/read of sandbox files.
type sandboxFiles struct{ *base }

func (r sandboxFiles) read(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	call, ok := CallerFrom(ctx)
	if !ok {
		return nil, errors.New("the server did not say who is calling (no owner or session)")
	}
	contents, err := r.contents(ctx, call, req)
	if err != nil {
		return nil, errors.New(r.errorText(ctx, call, "resources/read", err))
	}
	return contents, nil
}

func (r sandboxFiles) contents(ctx context.Context, call Caller,
	req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
	id, p, err := ResourceTarget(req)
	if err != nil {
		return nil, userErrorf("%v", err)
	}
	rec, c, err := r.sandbox(ctx, call, id, true)
	if err != nil {
		return nil, err
	}
	e := envd(c, rec)
	info, err := e.Stat(ctx, p)
	switch {
	case errors.Is(err, e2b.ErrNotFound):
		return nil, userErrorf("No such file in sandbox '%s': %s", rec.ID, p)
	case err != nil:
		return nil, r.sandboxFailure(ctx, c, call, rec, err)
	case info.Type == e2b.FileTypeDirectory:
		return r.listing(ctx, c, call, rec, req.Params.URI, p)
	}
	// Text and blobs are sent once (there is no structuredContent copy), escaped or in base64; an image is the
	// exception, with the image limit of e2b_read_file, since clients show it as an image.
	fetch := max(r.limit(ctx), r.cfg.ImageLimitBytes)
	tooLarge := func(size string) error {
		return userErrorf("'%s' is %s, more than one result holds (the result limit is %d characters, %d bytes for an "+
			"image); read it in parts with e2b_read_file, or get a download link with e2b_download_url.", p, size,
			r.limit(ctx), r.cfg.ImageLimitBytes)
	}
	if info.Size > int64(fetch) {
		return nil, tooLarge(fmt.Sprintf("%d bytes", info.Size))
	}
	body, _, err := e.Download(ctx, p, e2b.DownloadOptions{})
	if err != nil {
		return nil, r.sandboxFailure(ctx, c, call, rec, err)
	}
	defer body.Close()
	data, err := io.ReadAll(io.LimitReader(body, int64(fetch)+1))
	if err != nil {
		return nil, r.sandboxFailure(ctx, c, call, rec, err)
	}
	if len(data) > fetch {
		return nil, tooLarge(fmt.Sprintf("more than %d bytes (it grew while it was read)", fetch))
	}
	uri := SandboxFileURI(rec.ID, p)
	sniff := data[:min(len(data), binarySniff)]
	var contents mcp.ResourceContents
	if !isBinary(sniff, len(data) > binarySniff) {
		contents = mcp.TextResourceContents{URI: uri, MIMEType: textMIME(p), Text: string(data)}
	} else {
		contents = mcp.BlobResourceContents{URI: uri, MIMEType: binaryMIME(p, data),
			Blob: base64.StdEncoding.EncodeToString(data)}
	}
	if imagesafe.MIME(sniff) != "" {
		if len(data) > r.cfg.ImageLimitBytes {
			return nil, tooLarge(fmt.Sprintf("an image of %d bytes", len(data)))
		}
	} else if sent, _ := json.Marshal(mcp.ReadResourceResult{
		Contents: []mcp.ResourceContents{contents},
	}); len(sent) > r.limit(ctx) {
		return nil, tooLarge(fmt.Sprintf("%d bytes (%d as sent)", len(data), len(sent)))
	}
	return []mcp.ResourceContents{contents}, nil
}

// listing answers a directory read: the URIs of its entries, one per line (text/uri-list), directories with a
// trailing slash.
func (r sandboxFiles) listing(ctx context.Context, c *e2b.Client, call Caller, rec state.SandboxRecord, uri,
	dir string) ([]mcp.ResourceContents, error) {
	entries, err := envd(c, rec).ListDir(ctx, dir, 1)
	if err != nil {
		return nil, r.sandboxFailure(ctx, c, call, rec, err)
	}
	// The listing stops where the result limit would be passed, with room left for the line saying so and the
	// quotes and names around the text.
	moreLine := func(n int) string {
		return fmt.Sprintf("# ... and %d more entries; list them with e2b_exec (ls -la %s)\r\n", n, shellquote.Quote(dir))
	}
	room := r.limit(ctx) - fieldCost([]byte(uri+moreLine(len(entries)))) - 256
	var b strings.Builder
	for i, en := range entries {
		p := en.Path
		if en.Type == e2b.FileTypeDirectory {
			p += "/"
		}
		line := SandboxFileURI(rec.ID, p) + "\r\n"
		room -= fieldCost([]byte(line))
		if i == maxDirEntries || room < 0 {
			b.WriteString(moreLine(len(entries) - i))
			break
		}
		b.WriteString(line)
	}
	return []mcp.ResourceContents{mcp.TextResourceContents{URI: uri, MIMEType: "text/uri-list", Text: b.String()}}, nil
}

// textMIME is the MIME type of a text file, by its name (text/plain when the name says nothing).
func textMIME(p string) string {
	if t := mime.TypeByExtension(path.Ext(p)); strings.HasPrefix(t, "text/") || strings.HasSuffix(t, "+xml") ||
		strings.HasSuffix(t, "/json") || strings.HasSuffix(t, "/xml") || strings.HasSuffix(t, "/javascript") {
		return t
	}
	return "text/plain; charset=utf-8"
}

// binaryMIME is the MIME type of a binary file: by its content when it is an image, else by its name, else by
// what its bytes look like.
func binaryMIME(p string, data []byte) string {
	if m := imagesafe.MIME(data); m != "" {
		return m
	}
	if t := mime.TypeByExtension(path.Ext(p)); t != "" {
		return t
	}
	return http.DetectContentType(data)
}
