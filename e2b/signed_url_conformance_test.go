package e2b

import (
	"bytes"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Signed /files URLs answer the same from the emulator and from the real envd, fetched as a browser or curl
// fetches them: no routing header, no access token.
func TestConformanceSignedURLs(t *testing.T) {
	conformance(t, func(t *testing.T, e *Envd) {
		dir := "/tmp/" + unique(t) + "-signed"
		payload := bytes.Repeat([]byte{0x89, 'P', 0, 0xff}, 4096)
		if _, err := e.Upload(emuCtx(t), dir+"/plot.png", bytes.NewReader(payload)); err != nil {
			t.Fatal(err)
		}
		do := func(method, link, contentType string, body []byte) (int, string) {
			t.Helper()
			return fetchLink(t, method, link, contentType, body)
		}
		wantStatus := func(what string, status int, body string, want int, message string) {
			t.Helper()
			if status != want || (message != "" && !strings.Contains(body, message)) {
				t.Errorf("%s: HTTP %d %s, want %d %q", what, status, body, want, message)
			}
		}

		read, err := e.SignedURL(dir+"/plot.png", FileRead, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		status, body := do(http.MethodGet, read, "", nil)
		if status != 200 || body != string(payload) {
			t.Fatalf("signed read: HTTP %d, %d bytes", status, len(body))
		}
		status, body = do(http.MethodPost, read, "application/octet-stream", []byte("x"))
		wantStatus("a read link used to write", status, body, 401, `{"code":401,"message":"invalid signature"}`)
		status, body = do(http.MethodGet, strings.Replace(read, "plot.png", "plot.pnh", 1), "", nil)
		wantStatus("a link edited to another path", status, body, 401, "invalid signature")
		status, body = do(http.MethodGet, read[:strings.Index(read, "&signature_expiration")], "", nil)
		wantStatus("a link stripped of its expiry", status, body, 401, "invalid signature")
		missing, _ := e.SignedURL(dir+"/nope.png", FileRead, time.Minute)
		status, body = do(http.MethodGet, missing, "", nil)
		wantStatus("a link to a missing file", status, body, 404, "does not exist")

		write, _ := e.SignedURL(dir+"/up/raw.bin", FileWrite, time.Minute)
		status, body = do(http.MethodPost, write, "application/octet-stream", payload)
		wantStatus("a signed raw upload", status, body, 200, `"path":"`+dir+`/up/raw.bin"`)
		var form bytes.Buffer
		mw := multipart.NewWriter(&form)
		part, _ := mw.CreateFormFile("file", "anything.bin")
		part.Write([]byte("via form"))
		mw.Close()
		status, body = do(http.MethodPost, write, mw.FormDataContentType(), form.Bytes())
		wantStatus("a signed multipart upload (the path parameter wins)", status, body, 200, `"path":"`+dir+`/up/raw.bin"`)
		if got := sh(t, e, "cat "+dir+"/up/raw.bin"); got != "via form" {
			t.Errorf("after the uploads the file holds %q", got)
		}

		real := e.client.now
		e.client.now = func() time.Time { return real().Add(-time.Hour) }
		expired, _ := e.SignedURL(dir+"/plot.png", FileRead, time.Minute)
		e.client.now = real
		status, body = do(http.MethodGet, expired, "", nil)
		wantStatus("an expired link", status, body, 401, `{"code":401,"message":"signature is already expired"}`)
	})
}

// fetchLink requests a signed /files URL as a browser or curl would: no routing header, no token, only the
// content type given (if any). It returns the status and the body.
func fetchLink(t *testing.T, method, link, contentType string, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(emuCtx(t), method, link, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}
