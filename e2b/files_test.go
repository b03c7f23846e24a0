package e2b

import (
	"bytes"
	"context"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// serveContent answers GET /files with content, honouring Range as envd (http.ServeContent) does.
func serveContent(content string) func(w http.ResponseWriter, r *http.Request, _ []byte) {
	return func(w http.ResponseWriter, r *http.Request, _ []byte) {
		http.ServeContent(w, r, "f", time.Time{}, strings.NewReader(content))
	}
}

func TestDownload(t *testing.T) {
	const content = "0123456789"
	tests := []struct {
		name      string
		opts      DownloadOptions
		handler   func(w http.ResponseWriter, r *http.Request, _ []byte)
		wantRange string
		want      string
		wantSize  int64
	}{
		{"whole", DownloadOptions{}, serveContent(content), "", content, 10},
		{"offset", DownloadOptions{Offset: 4}, serveContent(content), "bytes=4-", "456789", 10},
		{"offset and length", DownloadOptions{Offset: 2, Length: 3}, serveContent(content), "bytes=2-4", "234", 10},
		{"length", DownloadOptions{Length: 4}, serveContent(content), "bytes=0-3", "0123", 10},
		{"past the end", DownloadOptions{Offset: 50}, serveContent(content), "bytes=50-", "", 10},
		{"server ignores Range", DownloadOptions{Offset: 3, Length: 2}, func(w http.ResponseWriter, r *http.Request, _ []byte) {
			w.Header().Set("Content-Length", "10")
			_, _ = w.Write([]byte(content))
		}, "bytes=3-4", "34", 10},
		{"unknown length", DownloadOptions{}, func(w http.ResponseWriter, r *http.Request, _ []byte) {
			w.(http.Flusher).Flush()
			_, _ = w.Write([]byte(content))
		}, "", content, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeEnvd(t, tt.handler)
			r, size, err := f.envd(t, "0.6.13").Download(context.Background(), "/home/user/f", tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			data, err := io.ReadAll(r)
			r.Close()
			if err != nil || string(data) != tt.want || size != tt.wantSize {
				t.Fatalf("read %q (%v), size %d; want %q, %d", data, err, size, tt.want, tt.wantSize)
			}
			req := f.last(t)
			if req.header.Get("Range") != tt.wantRange || req.header.Get("Accept-Encoding") != "identity" {
				t.Fatalf("Range %q Accept-Encoding %q", req.header.Get("Range"), req.header.Get("Accept-Encoding"))
			}
		})
	}
	f := newFakeEnvd(t, serveContent(content))
	if _, _, err := f.envd(t, "0.6.13").Download(context.Background(), "/f", DownloadOptions{Offset: -1}); err == nil {
		t.Fatal("negative offset accepted")
	}
}

func TestDownloadStreams(t *testing.T) {
	release := make(chan struct{})
	f := newFakeEnvd(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		w.Header().Set("Content-Length", "8")
		_, _ = w.Write([]byte("head"))
		w.(http.Flusher).Flush()
		<-release
		_, _ = w.Write([]byte("tail"))
	})
	r, size, err := f.envd(t, "0.6.13").Download(context.Background(), "/f", DownloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	head := make([]byte, 4)
	if _, err := io.ReadFull(r, head); err != nil || string(head) != "head" || size != 8 {
		t.Fatalf("first bytes %q %v size %d: the download must start before the file is whole", head, err, size)
	}
	close(release)
	rest, err := io.ReadAll(r)
	if err != nil || string(rest) != "tail" {
		t.Fatalf("rest %q %v", rest, err)
	}
}

func TestDownloadCutShort(t *testing.T) {
	f := newFakeEnvd(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		w.Header().Set("Content-Length", "100")
		_, _ = w.Write([]byte("only this"))
		w.(http.Flusher).Flush()
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	})
	r, _, err := f.envd(t, "0.6.13").Download(context.Background(), "/f", DownloadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := io.ReadAll(r); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("read err %v, want the truncation reported", err)
	}
}

func TestUploadOctetStream(t *testing.T) {
	f := newFakeEnvd(t, answer(`[{"name":"a b.txt","path":"/home/user/a b.txt","type":"file"}]`))
	info, err := f.envd(t, "0.6.13").Upload(context.Background(), "a b.txt", strings.NewReader("payload"))
	if err != nil {
		t.Fatal(err)
	}
	if info != (WriteInfo{Path: "/home/user/a b.txt", Name: "a b.txt", Type: "file"}) {
		t.Fatalf("info %+v", info)
	}
	r := f.last(t)
	if r.method != http.MethodPost || r.path != "/files" || r.rawQuery != "path=a+b.txt" ||
		r.header.Get("Content-Type") != "application/octet-stream" || string(r.body) != "payload" {
		t.Fatalf("request %s %s?%s %v %q", r.method, r.path, r.rawQuery, r.header, r.body)
	}
}

func TestUploadMultipartForOldEnvd(t *testing.T) {
	f := newFakeEnvd(t, answer(`[{"name":"hello.txt","path":"/home/user/d/hello.txt","type":"file"}]`))
	if _, err := f.envd(t, "0.5.6").Upload(context.Background(), "/home/user/d/hello.txt", strings.NewReader("hello\n")); err != nil {
		t.Fatal(err)
	}
	r := f.last(t)
	if r.rawQuery != "path=%2Fhome%2Fuser%2Fd%2Fhello.txt" {
		t.Fatalf("query %q", r.rawQuery)
	}
	mt, params, err := mime.ParseMediaType(r.header.Get("Content-Type"))
	if err != nil || mt != "multipart/form-data" {
		t.Fatalf("content type %q", r.header.Get("Content-Type"))
	}
	mr := multipart.NewReader(bytes.NewReader(r.body), params["boundary"])
	part, err := mr.NextPart()
	if err != nil {
		t.Fatal(err)
	}
	_, cd, _ := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
	data, _ := io.ReadAll(part)
	if part.FormName() != "file" || cd["filename"] != "/home/user/d/hello.txt" || string(data) != "hello\n" {
		t.Fatalf("part %q filename %q data %q", part.FormName(), cd["filename"], data)
	}
	if _, err := mr.NextPart(); err != io.EOF {
		t.Fatalf("more than one part: %v", err)
	}
}

// failingReader fails every read.
type failingReader struct{ err error }

func (f failingReader) Read([]byte) (int, error) { return 0, f.err }

func TestUploadReaderFailure(t *testing.T) {
	f := newFakeEnvd(t, answer(`[]`))
	boom := errors.New("disk on fire")
	for _, version := range []string{"0.6.13", "0.5.0"} {
		_, err := f.envd(t, version).Upload(context.Background(), "/f", failingReader{boom})
		if err == nil {
			t.Fatalf("envd %s: upload of a failing reader succeeded", version)
		}
	}
}

func TestUploadAnswers(t *testing.T) {
	f := newFakeEnvd(t, answer(`[]`))
	if _, err := f.envd(t, "0.6.13").Upload(context.Background(), "/f", strings.NewReader("x")); err == nil || !strings.Contains(err.Error(), "no file written") {
		t.Fatalf("empty answer: %v", err)
	}
	f = newFakeEnvd(t, answer(`{"not":"a list"}`))
	if _, err := f.envd(t, "0.6.13").Upload(context.Background(), "/f", strings.NewReader("x")); err == nil || !strings.Contains(err.Error(), "unexpected answer") {
		t.Fatalf("odd answer: %v", err)
	}
}

func TestSignedURL(t *testing.T) {
	c, err := NewClient(Config{APIKey: testAPIKey})
	if err != nil {
		t.Fatal(err)
	}
	c.now = func() time.Time { return time.Unix(1_700_000_000, 0) }
	secure := c.Envd(SandboxConn{ID: "sbx1", Domain: "e2b.app", EnvdVersion: "0.6.13", AccessToken: "tok123"})
	tests := []struct {
		name   string
		e      *Envd
		path   string
		op     FileOp
		expiry time.Duration
		want   string
	}{
		{"read, default user", secure, "/home/user/a b.txt", FileRead, 0,
			"https://49983-sbx1.e2b.app/files?path=%2Fhome%2Fuser%2Fa+b.txt&signature=" + url.QueryEscape("v1_oBWcB6Y7ynINkNCbWfy+5Q9m6wAVgyfQl9kI+laMHAA")},
		{"write as root with expiry", secure.WithUser("root"), "/home/user/a b.txt", FileWrite, time.Minute,
			"https://49983-sbx1.e2b.app/files?path=%2Fhome%2Fuser%2Fa+b.txt&username=root&signature=" + url.QueryEscape("v1_5ord7Xa5BWpQzoSMwVxma42zXvRAhTcB5SIMSTF3oYo") + "&signature_expiration=1700000060"},
		{"old envd signs for user", c.Envd(SandboxConn{ID: "sbx1", Domain: "e2b.app", EnvdVersion: "0.3.0", AccessToken: "tok123"}), "hello.txt", FileRead, 0,
			"https://49983-sbx1.e2b.app/files?path=hello.txt&username=user&signature=" + url.QueryEscape("v1_o1ctmrtZ7j0raqDn/SUe/yB/ZrYsQKsa8zQmxMvk/bY")},
		{"no token, no signature", c.Envd(SandboxConn{ID: "sbx1", Domain: "e2b.app", EnvdVersion: "0.6.13"}), "/f", FileRead, time.Minute,
			"https://49983-sbx1.e2b.app/files?path=%2Ff"},
	}
	for _, tt := range tests {
		got, err := tt.e.SignedURL(tt.path, tt.op, tt.expiry)
		if err != nil || got != tt.want {
			t.Errorf("%s:\n got %s (%v)\nwant %s", tt.name, got, err, tt.want)
		}
	}
	if _, err := secure.SignedURL("/f", "delete", 0); err == nil {
		t.Error("unknown operation accepted")
	}
	exp := int64(1700000060)
	if got := fileSignature("/home/user/a b.txt", FileWrite, "root", "tok123", &exp); got != "v1_5ord7Xa5BWpQzoSMwVxma42zXvRAhTcB5SIMSTF3oYo" {
		t.Errorf("signature %s", got)
	}
}
