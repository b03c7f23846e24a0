package emulator

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/optional"
)

func TestEnvdFilesSignatures(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	s := envdServer(t, Options{Now: func() time.Time { return now }})
	b := envdCreate(t, s, map[string]any{"secure": true})
	noToken := map[string]string{"X-Access-Token": ""}
	query := func(p, op, user string, exp *int64) string {
		q := "path=" + url.QueryEscape(p)
		if user != "" {
			q += "&username=" + user
		}
		q += "&signature=" + url.QueryEscape(fileSignature(p, op, user, b.token, exp))
		if exp != nil {
			q += "&signature_expiration=" + strconv.FormatInt(*exp, 10)
		}
		return q
	}
	later, earlier := now.Unix()+60, now.Unix()-1
	tests := []struct {
		name, method, query string
		hdr                 map[string]string
		status              int
		message             string
	}{
		{"no signature", "GET", "path=.bashrc", noToken, 401, "missing signature query parameter"},
		{"wrong signature", "GET", "path=.bashrc&signature=v1_AAAA", noToken, 401, "invalid signature"},
		{"signature for another path", "GET", "path=.profile&signature=" + url.QueryEscape(fileSignature(".bashrc", "read", "", b.token, nil)), noToken, 401, "invalid signature"},
		{"write signature used to read", "GET", query(".bashrc", "write", "", nil), noToken, 401, "invalid signature"},
		{"expired", "GET", query(".bashrc", "read", "", &earlier), noToken, 401, "signature is already expired"},
		{"header token that does not match", "GET", "path=.bashrc", map[string]string{"X-Access-Token": "wrong"}, 401, "access token present in header but does not match"},
		{"signed read", "GET", query(".bashrc", "read", "", nil), noToken, 200, ""},
		{"signed read with user and expiry", "GET", query("/home/user/.bashrc", "read", "user", &later), noToken, 200, ""},
		{"header token", "GET", "path=.bashrc", nil, 200, ""},
		{"signed write", "POST", query("/tmp/w.txt", "write", "", nil), noToken, 200, ""},
		{"read signature used to write", "POST", query("/tmp/w.txt", "read", "", nil), noToken, 401, "invalid signature"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hdr := map[string]string{"Content-Type": "application/octet-stream"}
			for k, v := range tt.hdr {
				hdr[k] = v
			}
			resp, body := b.do(t, tt.method, "/files?"+tt.query, hdr, []byte("data"))
			if resp.StatusCode != tt.status {
				t.Fatalf("HTTP %d %s, want %d", resp.StatusCode, body, tt.status)
			}
			if tt.message != "" {
				want := fmt.Sprintf(`{"code":%d,"message":%q}`+"\n", tt.status, tt.message)
				if string(body) != want {
					t.Fatalf("body %s, want %s", body, want)
				}
			}
		})
	}
}

func TestEnvdListDirEntry(t *testing.T) {
	b := envdCreate(t, envdServer(t, Options{}), nil)
	status, body := b.unary(t, "filesystem.Filesystem/ListDir", `{"path":"/home/user","depth":1}`, nil)
	want := `{"name":".bashrc","type":"FILE_TYPE_FILE","path":"/home/user/.bashrc","size":"3526","mode":420,"permissions":"-rw-r--r--","owner":"user","group":"user","modifiedTime":"2025-04-18T22:47:34Z"}`
	if status != 200 || !strings.Contains(body, want) {
		t.Fatalf("HTTP %d %s\nwant an entry %s", status, body, want)
	}
	status, body = b.unary(t, "filesystem.Filesystem/ListDir", `{"path":"/"}`, nil)
	if status != 200 || !strings.Contains(body, `"path":"/tmp"`) || strings.Contains(body, `"path":"/usr"`) {
		t.Fatalf("listing / answered %d %s", status, body)
	}
}

func TestEnvdFilesAnswers(t *testing.T) {
	b := envdCreate(t, envdServer(t, Options{}), nil)
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	part, _ := mw.CreateFormFile("file", "/home/user/d/hello.txt")
	_, _ = part.Write([]byte("hello\n"))
	other, _ := mw.CreateFormField("note")
	_, _ = other.Write([]byte("ignored"))
	part, _ = mw.CreateFormFile("file", "sub/second.txt")
	_, _ = part.Write([]byte("second"))
	mw.Close()
	resp, body := b.do(t, http.MethodPost, "/files?username=user", map[string]string{"Content-Type": mw.FormDataContentType()}, form.Bytes())
	want := `[{"name":"hello.txt","path":"/home/user/d/hello.txt","type":"file"},{"name":"second.txt","path":"/home/user/sub/second.txt","type":"file"}]`
	if resp.StatusCode != 200 || string(body) != want {
		t.Fatalf("upload: HTTP %d %s\nwant %s", resp.StatusCode, body, want)
	}
	resp, body = b.do(t, http.MethodGet, "/files?path=d%2Fhello.txt", nil, nil)
	if resp.StatusCode != 200 || string(body) != "hello\n" || resp.Header.Get("Content-Disposition") != "inline; filename=hello.txt" {
		t.Fatalf("download: HTTP %d %q %v", resp.StatusCode, body, resp.Header)
	}
	resp, body = b.do(t, http.MethodGet, "/files?path=d%2Fhello.txt", map[string]string{"Range": "bytes=1-3"}, nil)
	if resp.StatusCode != http.StatusPartialContent || string(body) != "ell" || resp.Header.Get("Content-Range") != "bytes 1-3/6" {
		t.Fatalf("range: HTTP %d %q %v", resp.StatusCode, body, resp.Header)
	}
	errorsWanted := []struct {
		method, query, contentType string
		status                     int
		message                    string
	}{
		{"GET", "path=nope", "", 404, "path '/home/user/nope' does not exist"},
		{"GET", "path=%2Fhome%2Fuser", "", 400, "path '/home/user' is a directory"},
		{"GET", "path=x&username=nobodyx", "", 401, "error looking up user 'nobodyx': user: unknown user nobodyx"},
		{"POST", "path=%2Fhome%2Fuser", "application/octet-stream", 400, "path is a directory: /home/user"},
		{"POST", "", "application/octet-stream", 400, "path query parameter is required for raw body upload"},
		{"POST", "path=x", "text/plain", 400, "unsupported content type: text/plain, expected multipart/form-data or application/octet-stream"},
		{"POST", "path=%2Fopt%2Fx", "application/octet-stream", 500, "error ensuring directories: failed to create directory: mkdir /opt: read-only file system"},
	}
	for _, tt := range errorsWanted {
		resp, body := b.do(t, tt.method, "/files?"+tt.query, map[string]string{"Content-Type": tt.contentType}, []byte("x"))
		want := fmt.Sprintf(`{"code":%d,"message":%q}`+"\n", tt.status, tt.message)
		if resp.StatusCode != tt.status || string(body) != want {
			t.Errorf("%s %s: HTTP %d %s\nwant %d %s", tt.method, tt.query, resp.StatusCode, body, tt.status, want)
		}
	}
}

// TestEnvdPathsStayInTheSandbox tries to reach a host file through the filesystem RPC and /files: by "..", by
// absolute and relative symlinks made inside the sandbox. None may read or write it.
func TestEnvdPathsStayInTheSandbox(t *testing.T) {
	s := envdServer(t, Options{})
	b := envdCreate(t, s, nil)
	// Outside /tmp, /home/user and /root: a host path there is no sandbox path.
	dir, err := os.MkdirTemp("/var/tmp", "e2btest-victim-")
	if err != nil {
		optional.Skip(t, "no /var/tmp: "+err.Error())
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	victim := filepath.Join(dir, "victim.txt")
	if err := os.WriteFile(victim, []byte("original"), 0o644); err != nil {
		t.Fatal(err)
	}
	up := strings.Repeat("../", 20)
	b.run(t, fmt.Sprintf("ln -s %s ~/abs; ln -s %s ~/rel; ln -s %s /tmp/dirlink", victim, up+strings.TrimPrefix(victim, "/"), dir), nil)
	status, body := b.unary(t, "filesystem.Filesystem/Stat", `{"path":"/home/user/abs"}`, nil)
	if status != 200 || !strings.Contains(body, `"symlinkTarget":"/home/user/abs"`) || strings.Contains(body, `"type"`) {
		t.Fatalf("a link out of the sandbox: %d %s", status, body)
	}
	for _, p := range []string{victim, up + victim, "/home/user/abs", "/home/user/rel", "/tmp/dirlink/victim.txt"} {
		q := "path=" + url.QueryEscape(p)
		resp, body := b.do(t, http.MethodGet, "/files?"+q, nil, nil)
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: HTTP %d %q", p, resp.StatusCode, body)
		}
		resp, body = b.do(t, http.MethodPost, "/files?"+q, map[string]string{"Content-Type": "application/octet-stream"}, []byte("overwritten"))
		if resp.StatusCode == http.StatusOK {
			t.Errorf("POST %s succeeded: %s", p, body)
		}
		if status, body := b.unary(t, "filesystem.Filesystem/Remove", fmt.Sprintf(`{"path":%q}`, p), nil); status != 200 {
			t.Errorf("Remove %s: %d %s", p, status, body)
		}
	}
	if data, err := os.ReadFile(victim); err != nil || string(data) != "original" {
		t.Fatalf("the host file was touched: %q %v", data, err)
	}
}

func TestEnvdSymlinks(t *testing.T) {
	b := envdCreate(t, envdServer(t, Options{}), nil)
	b.run(t, "mkdir -p ~/real/sub && echo hi > ~/real/f && chmod 600 ~/real/f && ln -s /home/user/real/f ~/lf && ln -s real ~/ld && ln -s loop ~/loop", nil)
	status, body := b.unary(t, "filesystem.Filesystem/Stat", `{"path":"lf"}`, nil)
	if status != 200 || !strings.Contains(body, `"name":"lf","type":"FILE_TYPE_FILE","path":"/home/user/lf","size":"17","mode":384,"permissions":"Lrwxrwxrwx"`) ||
		!strings.Contains(body, `"symlinkTarget":"/home/user/real/f"`) {
		t.Fatalf("stat of a link: %d %s", status, body)
	}
	status, body = b.unary(t, "filesystem.Filesystem/ListDir", `{"path":"ld","depth":2}`, nil)
	if status != 200 || !strings.Contains(body, `"path":"/home/user/ld/f"`) || !strings.Contains(body, `"path":"/home/user/ld/sub"`) {
		t.Fatalf("listing through a link: %d %s", status, body)
	}
	status, body = b.unary(t, "filesystem.Filesystem/ListDir", `{"path":"loop"}`, nil)
	if status != 400 || body != `{"code":"failed_precondition","message":"cyclic symlink or chain \u003e255 links at \"/home/user/loop\""}` {
		t.Fatalf("a symlink loop: %d %s", status, body)
	}
	resp, data := b.do(t, http.MethodGet, "/files?path=lf", nil, nil)
	if resp.StatusCode != 200 || string(data) != "hi\n" {
		t.Fatalf("download through a link: %d %q", resp.StatusCode, data)
	}
}

func TestEnvdFilesGzip(t *testing.T) {
	b := envdCreate(t, envdServer(t, Options{}), nil)
	b.run(t, "seq 1 1000 > ~/n.txt", nil)
	req, _ := http.NewRequest(http.MethodGet, b.s.URL()+"/files?path=n.txt", nil)
	req.Header.Set("E2b-Sandbox-Id", b.id)
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := http.DefaultTransport.RoundTrip(req) // the raw answer, not decompressed
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Encoding") != "gzip" || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Fatalf("headers %v", resp.Header)
	}
	zr, err := gzip.NewReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(zr)
	if !strings.HasPrefix(string(data), "1\n2\n") || !strings.HasSuffix(string(data), "\n1000\n") {
		t.Fatalf("content %q", data)
	}
	for _, h := range []string{"identity", "gzip;q=0", ""} {
		req.Header.Set("Accept-Encoding", h)
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.Header.Get("Content-Encoding") != "" {
			t.Errorf("Accept-Encoding %q answered %q", h, resp.Header.Get("Content-Encoding"))
		}
	}
}
