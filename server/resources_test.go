package server

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/audit"
	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/state"
	"github.com/e2b-mcp/e2b-mcp/tools"
)

func readResource(t *testing.T, c *client.Client, uri string) (*mcp.ReadResourceResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var req mcp.ReadResourceRequest
	req.Params.URI = uri
	return c.ReadResource(ctx, req)
}

const noEtcPolicy = `
default_action: allow
rules:
  - id: no-etc
    when: { target: e2b_read_file, path: "/etc/**" }
    then: { decision: deny, reason: system files are off limits }
  - id: ask-for-secrets
    when: { target: e2b_read_file, path: "**/secret*" }
    then: { decision: require_approval, reason: secrets need a human }
`

// Sandbox files are resources: the caller's files read as text or blob, directories as URI lists, under the
// policy of e2b_read_file and recorded in the audit log; other owners' sandboxes are not found.
func TestSandboxFileResources(t *testing.T) {
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{policy: noEtcPolicy})
			c := connect(t, f.srv, era, nil)
			id := createSandbox(t, c)

			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			templates, err := c.ListResourceTemplates(ctx, mcp.ListResourceTemplatesRequest{})
			if err != nil || len(templates.ResourceTemplates) != 1 || templates.ResourceTemplates[0].URITemplate.Raw() != tools.SandboxFileTemplate {
				t.Fatalf("resource templates: %+v %v", templates, err)
			}
			listed, err := c.ListResources(ctx, mcp.ListResourcesRequest{})
			workspace := "e2b://sandbox/" + id + "/home/user/"
			if err != nil || len(listed.Resources) != 1 || listed.Resources[0].URI != workspace {
				t.Fatalf("resources/list: %+v %v", listed, err)
			}

			// The write's result links the file it wrote.
			res := callTool(t, c, "e2b_write_file", map[string]any{"sandbox_id": id, "path": "notes/a b.txt", "content": "hello\n"})
			var link mcp.ResourceLink
			for _, ct := range res.Content {
				if l, ok := ct.(mcp.ResourceLink); ok {
					link = l
				}
			}
			if link.URI != "e2b://sandbox/"+id+"/home/user/notes/a%20b.txt" || link.Name != "a b.txt" {
				t.Fatalf("write result link: %+v", res.Content)
			}
			got, err := readResource(t, c, link.URI)
			if err != nil {
				t.Fatal(err)
			}
			if tc, ok := got.Contents[0].(mcp.TextResourceContents); !ok || tc.Text != "hello\n" || !strings.HasPrefix(tc.MIMEType, "text/plain") {
				t.Fatalf("text resource: %+v", got.Contents)
			}
			listing, err := readResource(t, c, "e2b://sandbox/"+id+"/home/user/notes/")
			if err != nil {
				t.Fatal(err)
			}
			if tc, ok := listing.Contents[0].(mcp.TextResourceContents); !ok || tc.MIMEType != "text/uri-list" || tc.Text != link.URI+"\r\n" {
				t.Fatalf("directory listing: %+v", listing.Contents)
			}
			mustOK(t, c, "e2b_exec", map[string]any{"sandbox_id": id, "command": "printf '\\x00\\x01\\xff' > bin.dat"})
			got, err = readResource(t, c, "e2b://sandbox/"+id+"/home/user/bin.dat")
			if err != nil {
				t.Fatal(err)
			}
			if bc, ok := got.Contents[0].(mcp.BlobResourceContents); !ok || bc.Blob != base64.StdEncoding.EncodeToString([]byte{0, 1, 0xff}) {
				t.Fatalf("blob resource: %+v", got.Contents)
			}

			// The policy of e2b_read_file applies, to the path the URI really reads.
			for uri, want := range map[string]string{
				"e2b://sandbox/" + id + "/etc/passwd":                    "Denied by policy rule 'no-etc'",
				"e2b://sandbox/" + id + "/home/user/../../etc/passwd":    "Denied by policy rule 'no-etc'",
				"e2b://sandbox/" + id + "/home/user/%2E%2E/../etc/hosts": "Denied by policy rule 'no-etc'",
				"e2b://sandbox/" + id + "/home/user/secret.txt":          "needs a human's approval",
				"e2b://sandbox/" + id + "/home/user/missing.txt":         "No such file",
				"e2b://sandbox/sbx_nosuch/home/user/a.txt":               "Sandbox 'sbx_nosuch' not found",
			} {
				if _, err := readResource(t, c, uri); err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("%s: %v, want %q", uri, err, want)
				}
			}

			// Another owner's sandbox, even one whose ID is known, is not found.
			bob := state.SandboxRecord{ID: "sbx_bobs", Owner: "bob", Session: "s1", State: state.StateRunning, Created: time.Now()}
			if err := f.srv.Store().PutSandbox(bob); err != nil {
				t.Fatal(err)
			}
			if _, err := readResource(t, c, "e2b://sandbox/sbx_bobs/home/user/a.txt"); err == nil || !strings.Contains(err.Error(), "Sandbox 'sbx_bobs' not found") {
				t.Fatalf("another owner's sandbox: %v", err)
			}

			var reads []audit.Entry
			for _, e := range f.auditEntries(t) {
				if e.Tool == "resources/read" {
					reads = append(reads, e)
				}
			}
			if len(reads) != 10 {
				t.Fatalf("%d resource reads audited, want 10: %+v", len(reads), reads)
			}
			denied := 0
			for _, r := range reads {
				if r.Rule == "no-etc" {
					denied++
					if r.Decision != "deny" || r.Outcome != audit.OutcomeDenied || !strings.HasPrefix(r.Args["path"].(string), "/etc/") {
						t.Errorf("a denied read is audited as %+v", r)
					}
				}
			}
			if denied != 3 {
				t.Errorf("%d denied reads audited, want 3", denied)
			}
		})
	}
}

// A download link is a read: the rules of e2b_read_file decide it too, and the audit log records it.
func TestDownloadLinksFollowReadPolicy(t *testing.T) {
	f := newFixture(t, fixtureOpts{policy: noEtcPolicy})
	c := connect(t, f.srv, eras[0], nil)
	id := createSandbox(t, c)
	got := mustFail(t, c, "e2b_download_url", map[string]any{"sandbox_id": id, "path": "../../etc/passwd"})
	if !strings.Contains(got, "Denied by policy rule 'no-etc'") {
		t.Fatalf("a link to /etc/passwd: %s", got)
	}
	if got := mustFail(t, c, "e2b_download_url", map[string]any{"sandbox_id": id, "path": "secret.txt"}); !strings.Contains(got, "Approval needed (rule 'ask-for-secrets'") {
		t.Fatalf("a link to a secret: %s", got)
	}
	mustOK(t, c, "e2b_write_file", map[string]any{"sandbox_id": id, "path": "ok.txt", "content": "fine"})
	if res := mustOK(t, c, "e2b_download_url", map[string]any{"sandbox_id": id, "path": "ok.txt"}); res["url"] == "" {
		t.Fatalf("an allowed link: %v", res)
	}
	var decisions []string
	for _, e := range f.auditEntries(t) {
		if e.Tool == "e2b_download_url" {
			decisions = append(decisions, e.Decision+"/"+e.Rule)
		}
	}
	if strings.Join(decisions, " ") != "deny/no-etc require_approval/ask-for-secrets allow/default" {
		t.Fatalf("audited link decisions: %v", decisions)
	}
}

// A file over the result limit is refused with the way to get it, never sent cut short.
func TestResourceSizeCap(t *testing.T) {
	f := newFixture(t, fixtureOpts{mutate: func(c *Config, _ *e2btest.Server) { c.Tools.ResultLimit = tools.MinResultLimit }})
	c := connect(t, f.srv, eras[0], nil)
	id := createSandbox(t, c)
	mustOK(t, c, "e2b_exec", map[string]any{"sandbox_id": id, "command": "head -c 2000 /dev/zero > fits.bin; head -c 3500 /dev/zero > big.bin"})
	got, err := readResource(t, c, "e2b://sandbox/"+id+"/home/user/fits.bin")
	if err != nil || len(got.Contents) != 1 {
		t.Fatalf("a file within the limit: %v", err)
	}
	if bc, ok := got.Contents[0].(mcp.BlobResourceContents); !ok || bc.Blob != base64.StdEncoding.EncodeToString(make([]byte, 2000)) {
		t.Fatalf("a file within the limit: %+v", got.Contents)
	}
	_, err = readResource(t, c, "e2b://sandbox/"+id+"/home/user/big.bin")
	if err == nil || !strings.Contains(err.Error(), "is 3500 bytes (") || !strings.Contains(err.Error(), "result limit is 4096 characters") ||
		!strings.Contains(err.Error(), "e2b_download_url") {
		t.Fatalf("a file over the limit: %v", err)
	}
}
