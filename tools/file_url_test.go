package tools

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
	"github.com/e2b-mcp/e2b-mcp/state"
)

// fetch does what a browser or curl does with a link: no headers, no key.
func fetch(t *testing.T, method, link string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, link, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/octet-stream")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

func TestDownloadAndUploadURLs(t *testing.T) {
	t.Parallel()
	forEachEra(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, nil)
		payload := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{0, 0xff, 7}, 5000)...)
		if _, err := e.envdOf(t, "alice", id).Upload(t.Context(), "/home/user/out/plot.png", bytes.NewReader(payload)); err != nil {
			t.Fatal(err)
		}
		before := time.Now()
		res := s.ok(t, "e2b_download_url", map[string]any{"sandbox_id": id, "path": "out/plot.png", "expires_in_seconds": 1})
		link := res["url"].(string)
		if res["path"] != "/home/user/out/plot.png" || res["method"] != "GET" || num(res["size"]) != len(payload) || num(res["expires_in_seconds"]) != 1 {
			t.Fatalf("download link: %v", res)
		}
		u, err := url.Parse(link)
		if err != nil {
			t.Fatal(err)
		}
		exp, _ := strconv.ParseInt(u.Query().Get("signature_expiration"), 10, 64)
		if strings.Contains(link, aliceKey) || u.Query().Get("signature") == "" || exp < before.Unix() || exp > time.Now().Unix()+2 {
			t.Fatalf("link %s: no signature, the API key, or a wrong expiry", link)
		}
		if at, err := time.Parse(time.RFC3339, res["expires_at"].(string)); err != nil || at.Unix() != exp {
			t.Fatalf("expires_at %v, link expiry %d", res["expires_at"], exp)
		}
		wantContains(t, res["usage"].(string), "curl -fo plot.png '"+link+"'")
		if status, got := fetch(t, http.MethodGet, link, nil); status != 200 || !bytes.Equal(got, payload) {
			t.Fatalf("fetching the link: %d, %d bytes", status, len(got))
		}
		// The link reads, and only reads: posting to it is refused.
		if status, _ := fetch(t, http.MethodPost, link, []byte("overwrite")); status != 401 {
			t.Fatalf("a download link took an upload: %d", status)
		}
		waitfor.Until(t, 30*time.Second, "the link to expire", func() bool {
			status, body := fetch(t, http.MethodGet, link, nil)
			return status == 401 && strings.Contains(string(body), "signature is already expired")
		})

		// Upload: bytes e2b_write_file could not carry, to a new directory.
		res = s.ok(t, "e2b_upload_url", map[string]any{"sandbox_id": id, "path": "/tmp/in/data.bin"})
		link = res["url"].(string)
		if res["method"] != "POST" || res["size"] != nil || num(res["expires_in_seconds"]) != 900 {
			t.Fatalf("upload link: %v", res)
		}
		wantContains(t, res["usage"].(string), "curl -X POST", "--data-binary @LOCAL_FILE '"+link+"'")
		blob := bytes.Repeat([]byte{0, 1, 2, 0xfe}, 10000)
		if status, body := fetch(t, http.MethodPost, link, blob); status != 200 {
			t.Fatalf("upload through the link: %d %s", status, body)
		}
		r, _, err := e.envdOf(t, "alice", id).Download(t.Context(), "/tmp/in/data.bin", e2b.DownloadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(r)
		r.Close()
		if !bytes.Equal(got, blob) {
			t.Fatalf("uploaded %d bytes, the sandbox has %d", len(blob), len(got))
		}
		if status, _ := fetch(t, http.MethodGet, link, nil); status != 401 {
			t.Fatalf("an upload link read: %d", status)
		}

		// Refusals.
		for _, tt := range []struct {
			tool string
			args map[string]any
			want string
		}{
			{"e2b_download_url", map[string]any{"sandbox_id": id, "path": "nope.txt"}, "No such file in sandbox"},
			{"e2b_download_url", map[string]any{"sandbox_id": id, "path": "/home/user"}, "is a directory"},
			{"e2b_upload_url", map[string]any{"sandbox_id": id, "path": "/tmp"}, "is a directory"},
			{"e2b_upload_url", map[string]any{"sandbox_id": id, "path": "dir/"}, "names a directory"},
			{"e2b_download_url", map[string]any{"sandbox_id": id, "path": "out/plot.png", "expires_in_seconds": 86401}, "between 1 and 86400"},
			{"e2b_download_url", map[string]any{"sandbox_id": id}, "Missing required parameter: path"},
			{"e2b_download_url", map[string]any{"sandbox_id": "sbx_other", "path": "a"}, "Sandbox 'sbx_other' not found"},
		} {
			wantContains(t, s.fail(t, tt.tool, tt.args), tt.want)
		}
		// A sandbox without an access token would give a link that never expires and opens every file.
		if _, err := e.store.UpdateSandbox("alice", id, func(r *state.SandboxRecord) error { r.AccessToken = ""; return nil }); err != nil {
			t.Fatal(err)
		}
		wantContains(t, s.fail(t, "e2b_download_url", map[string]any{"sandbox_id": id, "path": "out/plot.png"}), "has no envd access token")
	})
}

// Another owner's sandbox gets no link, whatever ID is sent.
func TestFileURLOtherOwner(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	alice := e.connect(t, eras[0], Caller{Owner: "alice", Session: "main"})
	bob := e.connect(t, eras[0], Caller{Owner: "bob", Session: "main"})
	id := alice.createSandbox(t, nil)
	alice.ok(t, "e2b_write_file", map[string]any{"sandbox_id": id, "path": "a.txt", "content": "alice's"})
	for _, tool := range []string{"e2b_download_url", "e2b_upload_url"} {
		wantContains(t, bob.fail(t, tool, map[string]any{"sandbox_id": id, "path": "a.txt"}), "Sandbox '"+id+"' not found")
	}
}

// The links work against E2B's own envd too: it checks their signatures with the sandbox's access token.
func TestFileURLsAgainstEachBackend(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, nil)
		path := "/tmp/" + strings.ToLower(strings.NewReplacer("/", "-").Replace(t.Name())) + "/data.bin"
		blob := bytes.Repeat([]byte{0, 1, 2, 0xfe}, 1000)
		up := s.ok(t, "e2b_upload_url", map[string]any{"sandbox_id": id, "path": path})
		if status, body := fetch(t, http.MethodPost, up["url"].(string), blob); status != 200 {
			t.Fatalf("upload link: HTTP %d %s", status, body)
		}
		down := s.ok(t, "e2b_download_url", map[string]any{"sandbox_id": id, "path": path})
		if status, got := fetch(t, http.MethodGet, down["url"].(string), nil); status != 200 || !bytes.Equal(got, blob) {
			t.Fatalf("download link: HTTP %d, %d bytes %.100s", status, len(got), got)
		}
	})
}
