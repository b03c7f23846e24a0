package e2b

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	testAPIKey = "e2b_00112233445566778899aabbccddeeff"
	testToken  = "envd-token-5f3a"
)

// recorded is one request as the fake envd saw it.
type recorded struct {
	method, path, rawQuery string
	header                 http.Header
	body                   []byte
	transferEncoding       []string
	contentLength          int64
}

// fakeEnvd is an httptest server that records requests and answers with handle.
type fakeEnvd struct {
	srv    *httptest.Server
	mu     sync.Mutex
	reqs   []recorded
	handle func(w http.ResponseWriter, r *http.Request, body []byte)
}

func newFakeEnvd(t *testing.T, handle func(w http.ResponseWriter, r *http.Request, body []byte)) *fakeEnvd {
	t.Helper()
	f := &fakeEnvd{handle: handle}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.reqs = append(f.reqs, recorded{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Clone(), body, r.TransferEncoding, r.ContentLength})
		f.mu.Unlock()
		f.handle(w, r, body)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeEnvd) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.reqs...)
}

func (f *fakeEnvd) last(t *testing.T) recorded {
	t.Helper()
	reqs := f.requests()
	if len(reqs) == 0 {
		t.Fatal("no request reached envd")
	}
	return reqs[len(reqs)-1]
}

// envdFor is a client of the fake envd for a secure sandbox running envd version.
func (f *fakeEnvd) envd(t *testing.T, version string) *Envd {
	t.Helper()
	c, err := NewClient(Config{APIKey: testAPIKey, SandboxURL: f.srv.URL, RetryWaitMin: time.Millisecond, RetryWaitMax: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return c.Envd(SandboxConn{ID: "sbx1", Domain: "e2b.app", EnvdVersion: version, AccessToken: testToken})
}

func writeFrames(w http.ResponseWriter, frames ...[]byte) {
	w.Header().Set("Content-Type", "application/connect+json")
	w.WriteHeader(http.StatusOK)
	for _, f := range frames {
		_, _ = w.Write(f)
		w.(http.Flusher).Flush()
	}
}

// answerAll answers every call with the smallest valid answer for its kind.
func answerAll(w http.ResponseWriter, r *http.Request, _ []byte) {
	switch {
	case r.URL.Path == "/health":
		w.WriteHeader(http.StatusNoContent)
	case r.URL.Path == "/files" && r.Method == http.MethodGet:
		_, _ = w.Write([]byte("content"))
	case r.URL.Path == "/files":
		_, _ = w.Write([]byte(`[{"name":"f","path":"/home/user/f","type":"file"}]`))
	case r.URL.Path == "/process.Process/Start" || r.URL.Path == "/process.Process/Connect":
		writeFrames(w, frame(0, `{"event":{"start":{"pid":7}}}`), frame(0, `{"event":{"end":{"exited":true,"status":"exit status 0"}}}`), frame(2, `{}`))
	case strings.HasPrefix(r.URL.Path, "/filesystem.Filesystem/Stat"), strings.HasPrefix(r.URL.Path, "/filesystem.Filesystem/Move"):
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"entry":{"name":"f","type":"FILE_TYPE_FILE","path":"/home/user/f"}}`))
	default:
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{}`))
	}
}

// everyCall makes each kind of envd request once.
func everyCall(ctx context.Context, e *Envd) []error {
	var errs []error
	add := func(err error) { errs = append(errs, err) }
	add(e.Health(ctx))
	_, err := e.Stat(ctx, "/home/user/f")
	add(err)
	_, err = e.ListDir(ctx, "/home/user", 1)
	add(err)
	_, err = e.MakeDir(ctx, "/home/user/d")
	add(err)
	_, err = e.Move(ctx, "/home/user/a", "/home/user/b")
	add(err)
	add(e.Remove(ctx, "/home/user/b"))
	add(e.SendSignal(ctx, 7, SIGTERM))
	add(e.SendStdin(ctx, 7, []byte("x")))
	add(e.CloseStdin(ctx, 7))
	_, err = e.ListProcesses(ctx)
	add(err)
	_, err = e.Start(ctx, StartOptions{Process: ProcessConfig{Cmd: "true"}}, nil)
	add(err)
	_, err = e.ConnectProcess(ctx, 7, nil)
	add(err)
	r, _, err := e.Download(ctx, "/home/user/f", DownloadOptions{})
	if err == nil {
		_, _ = io.Copy(io.Discard, r)
		r.Close()
	}
	add(err)
	_, err = e.Upload(ctx, "/home/user/f", strings.NewReader("x"))
	add(err)
	return errs
}

func TestEnvdHeadersOnEveryRequest(t *testing.T) {
	tests := []struct {
		name, version, withUser string
		wantBasic, wantUsername string // "" means absent
	}{
		{name: "default user of envd >= 0.4.0", version: "0.6.13"},
		{name: "named user", version: "0.6.13", withUser: "root", wantBasic: "Basic cm9vdDo=", wantUsername: "root"},
		{name: "envd < 0.4.0 has no default user", version: "0.3.9", wantBasic: "Basic dXNlcjo=", wantUsername: "user"},
		{name: "unknown version counts as new", version: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeEnvd(t, answerAll)
			e := f.envd(t, tt.version)
			if tt.withUser != "" {
				e = e.WithUser(tt.withUser)
			}
			for i, err := range everyCall(context.Background(), e) {
				if err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
			}
			reqs := f.requests()
			if len(reqs) != 14 {
				t.Fatalf("%d requests, want 14", len(reqs))
			}
			for _, r := range reqs {
				name := r.method + " " + r.path
				h := r.header
				if h.Get("User-Agent") != DefaultUserAgent || h.Get("E2b-Sandbox-Id") != "sbx1" || h.Get("E2b-Sandbox-Port") != "49983" {
					t.Errorf("%s: routing headers %v", name, h)
				}
				if h.Get("X-Access-Token") != testToken {
					t.Errorf("%s: X-Access-Token = %q", name, h.Get("X-Access-Token"))
				}
				for k, vs := range h {
					if strings.EqualFold(k, "X-Api-Key") || strings.Contains(strings.Join(vs, " "), testAPIKey) {
						t.Errorf("%s: the API key was sent to envd in %s", name, k)
					}
				}
				if r.method == http.MethodPost && (r.contentLength != -1 || !slices.Equal(r.transferEncoding, []string{"chunked"})) {
					// A body of declared length through a Go reverse proxy can have its answer cut (newRequest).
					t.Errorf("%s: body sent with Content-Length %d, transfer encoding %v; want chunked", name, r.contentLength, r.transferEncoding)
				}
				isRPC := strings.Contains(r.path, ".")
				switch {
				case isRPC && h.Get("Authorization") != tt.wantBasic:
					t.Errorf("%s: Authorization = %q, want %q", name, h.Get("Authorization"), tt.wantBasic)
				case !isRPC && h.Get("Authorization") != "":
					t.Errorf("%s: Authorization on a plain HTTP call", name)
				}
				if r.path == "/files" {
					wantQuery := "path=%2Fhome%2Fuser%2Ff"
					if tt.wantUsername != "" {
						wantQuery += "&username=" + tt.wantUsername
					}
					if r.rawQuery != wantQuery {
						t.Errorf("%s: query %q, want %q", name, r.rawQuery, wantQuery)
					}
				}
			}
		})
	}
}

func TestEnvdWithoutAccessToken(t *testing.T) {
	f := newFakeEnvd(t, answerAll)
	c, err := NewClient(Config{SandboxURL: f.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	e := c.Envd(SandboxConn{ID: "sbx1", EnvdVersion: "0.6.13"})
	if err := e.Health(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.last(t).header["X-Access-Token"]; ok {
		t.Fatal("X-Access-Token sent for a sandbox without a token")
	}
}

func TestEnvdURLs(t *testing.T) {
	c, err := NewClient(Config{APIKey: testAPIKey})
	if err != nil {
		t.Fatal(err)
	}
	e := c.Envd(SandboxConn{ID: "abc123"})
	if got := e.baseURL(); got != "https://49983-abc123.e2b.app" {
		t.Errorf("base URL = %q", got)
	}
	e = c.Envd(SandboxConn{ID: "abc123", Domain: "example.dev"})
	if got := e.baseURL(); got != "https://49983-abc123.example.dev" {
		t.Errorf("base URL with the sandbox's domain = %q", got)
	}
	c, err = NewClient(Config{APIKey: testAPIKey, SandboxURL: "http://127.0.0.1:9/"})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Envd(SandboxConn{ID: "abc123"}).baseURL(); got != "http://127.0.0.1:9" {
		t.Errorf("base URL with E2B_SANDBOX_URL = %q", got)
	}
}

func TestVersionCode(t *testing.T) {
	tests := map[string]int{"0.6.13": 6_013, "v0.4.0": 4_000, "1.2": 1_002_000, "0.5.7-rc1": 5_007, "2": 2_000_000}
	for in, want := range tests {
		if got, ok := versionCode(in); !ok || got != want {
			t.Errorf("versionCode(%q) = %d, %v; want %d", in, got, ok, want)
		}
	}
	for _, bad := range []string{"", "x", "1.2.3.4", "1.-2.0", "0.1000.0", "99999.0.0"} {
		if _, ok := versionCode(bad); ok {
			t.Errorf("versionCode(%q) accepted", bad)
		}
	}
	if a, _ := versionCode("0.5.6"); a >= envdVersionOctetStream {
		t.Error("0.5.6 counts as at least 0.5.7")
	}
	if a, _ := versionCode("0.10.0"); a < envdVersionOctetStream {
		t.Error("0.10.0 counts as older than 0.5.7")
	}
}

func TestEnvdErrors(t *testing.T) {
	tests := []struct {
		name        string
		status      int
		contentType string
		body        string
		call        func(*Envd) error
		want        APIError
		is          []error
		text        string
	}{
		{
			name: "connect not_found", status: 404, contentType: "application/json",
			body: `{"code":"not_found","message":"file not found: lstat /nope: no such file or directory"}`,
			call: func(e *Envd) error { _, err := e.Stat(context.Background(), "/nope"); return err },
			want: APIError{Op: "envd Stat", Status: 404, Code: "not_found", Message: "file not found: lstat /nope: no such file or directory", SandboxID: "sbx1"},
			is:   []error{ErrNotFound},
			text: "E2B API error (envd Stat: 404 not_found): file not found: lstat /nope: no such file or directory",
		},
		{
			name: "connect unauthenticated", status: 401, contentType: "application/json",
			body: `{"code":"unauthenticated","message":"invalid username: 'nobodyx'"}`,
			call: func(e *Envd) error { return e.Remove(context.Background(), "/x") },
			want: APIError{Op: "envd Remove", Status: 401, Code: "unauthenticated", Message: "invalid username: 'nobodyx'", SandboxID: "sbx1"},
			is:   []error{ErrUnauthorized},
		},
		{
			name: "plain 401 from the token check", status: 401, contentType: "application/json; charset=utf-8",
			body: `{"code":401,"message":"unauthorized access, please provide a valid access token or method signing if supported"}` + "\n",
			call: func(e *Envd) error { _, err := e.ListProcesses(context.Background()); return err },
			want: APIError{Op: "envd List", Status: 401, Message: "unauthorized access, please provide a valid access token or method signing if supported", SandboxID: "sbx1"},
			is:   []error{ErrUnauthorized},
		},
		{
			name: "sandbox gone at the edge", status: 502, contentType: "application/json",
			body: `{"sandboxId":"sbx1","message":"The sandbox was not found","code":502}`,
			call: func(e *Envd) error { return e.SendSignal(context.Background(), 1, SIGKILL) },
			want: APIError{Op: "envd SendSignal", Status: 502, Message: "The sandbox was not found", SandboxID: "sbx1"},
			is:   []error{ErrSandboxGone},
			text: "E2B API error (envd SendSignal: 502): sandbox sbx1 is not running (paused, killed or timed out): The sandbox was not found",
		},
		{
			name: "sandbox gone on a stream", status: 502, contentType: "application/json",
			body: `{"sandboxId":"sbx1","message":"The sandbox was not found","code":502}`,
			call: func(e *Envd) error {
				_, err := e.Start(context.Background(), StartOptions{Process: ProcessConfig{Cmd: "true"}}, nil)
				return err
			},
			want: APIError{Op: "envd Start", Status: 502, Message: "The sandbox was not found", SandboxID: "sbx1"},
			is:   []error{ErrSandboxGone},
		},
		{
			name: "proxy HTML", status: 503, contentType: "text/html",
			body: "<html><head><title>503 Service Unavailable</title></head><body>down</body></html>",
			call: func(e *Envd) error { return e.Health(context.Background()) },
			want: APIError{Op: "envd health", Status: 503, Message: "503 Service Unavailable", SandboxID: "sbx1"},
		},
		{
			name: "files 404", status: 404, contentType: "application/json; charset=utf-8",
			body: `{"code":404,"message":"path '/home/user/nope' does not exist"}` + "\n",
			call: func(e *Envd) error {
				_, _, err := e.Download(context.Background(), "nope", DownloadOptions{})
				return err
			},
			want: APIError{Op: "envd download", Status: 404, Message: "path '/home/user/nope' does not exist", SandboxID: "sbx1"},
			is:   []error{ErrNotFound},
		},
		{
			name: "files 400 on upload", status: 400, contentType: "application/json; charset=utf-8",
			body: `{"code":400,"message":"path is a directory: /home/user"}` + "\n",
			call: func(e *Envd) error {
				_, err := e.Upload(context.Background(), "/home/user", strings.NewReader("x"))
				return err
			},
			want: APIError{Op: "envd upload", Status: 400, Message: "path is a directory: /home/user", SandboxID: "sbx1"},
			is:   []error{ErrInvalidArgument},
		},
		{
			name: "the access token is never echoed", status: 500, contentType: "text/plain",
			body: "bad request with X-Access-Token: " + testToken,
			call: func(e *Envd) error { _, err := e.MakeDir(context.Background(), "/d"); return err },
			want: APIError{Op: "envd MakeDir", Status: 500, Message: "bad request with X-Access-Token: [redacted]", SandboxID: "sbx1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeEnvd(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
				w.Header().Set("Content-Type", tt.contentType)
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(tt.body))
			})
			err := tt.call(f.envd(t, "0.6.13"))
			var apiErr *APIError
			if !errors.As(err, &apiErr) {
				t.Fatalf("err = %v (%T), want *APIError", err, err)
			}
			if *apiErr != tt.want {
				t.Fatalf("error = %+v\nwant    %+v", *apiErr, tt.want)
			}
			for _, target := range tt.is {
				if !errors.Is(err, target) {
					t.Errorf("errors.Is(err, %v) = false", target)
				}
			}
			if tt.text != "" && err.Error() != tt.text {
				t.Errorf("text = %q\nwant   %q", err.Error(), tt.text)
			}
		})
	}
}

// hangUpFirst closes the connection without an answer for the first n requests.
func hangUpFirst(n int, then func(w http.ResponseWriter, r *http.Request, body []byte)) func(w http.ResponseWriter, r *http.Request, body []byte) {
	var mu sync.Mutex
	seen := 0
	return func(w http.ResponseWriter, r *http.Request, body []byte) {
		mu.Lock()
		seen++
		hang := seen <= n
		mu.Unlock()
		if hang {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		then(w, r, body)
	}
}

func TestIdempotentCallsRetryConnectionFailures(t *testing.T) {
	idempotent := map[string]func(*Envd) error{
		"Stat":    func(e *Envd) error { _, err := e.Stat(context.Background(), "/f"); return err },
		"ListDir": func(e *Envd) error { _, err := e.ListDir(context.Background(), "/", 1); return err },
		"Health":  func(e *Envd) error { return e.Health(context.Background()) },
		"Download": func(e *Envd) error {
			r, _, err := e.Download(context.Background(), "/f", DownloadOptions{})
			if err == nil {
				r.Close()
			}
			return err
		},
	}
	for name, call := range idempotent {
		t.Run(name, func(t *testing.T) {
			f := newFakeEnvd(t, hangUpFirst(2, answerAll))
			if err := call(f.envd(t, "0.6.13")); err != nil {
				t.Fatalf("err = %v, want success on the third attempt", err)
			}
			if n := len(f.requests()); n != 3 {
				t.Fatalf("%d attempts, want 3", n)
			}
		})
	}
	others := map[string]func(*Envd) error{
		"Remove":  func(e *Envd) error { return e.Remove(context.Background(), "/f") },
		"MakeDir": func(e *Envd) error { _, err := e.MakeDir(context.Background(), "/d"); return err },
		"Upload": func(e *Envd) error {
			_, err := e.Upload(context.Background(), "/f", strings.NewReader("x"))
			return err
		},
		"Start": func(e *Envd) error {
			_, err := e.Start(context.Background(), StartOptions{Process: ProcessConfig{Cmd: "true"}}, nil)
			return err
		},
	}
	for name, call := range others {
		t.Run(name, func(t *testing.T) {
			f := newFakeEnvd(t, hangUpFirst(1, answerAll))
			err := call(f.envd(t, "0.6.13"))
			if !errors.Is(err, ErrNoAnswer) {
				t.Fatalf("err = %v (%T), want no answer", err, err)
			}
			if n := len(f.requests()); n != 1 {
				t.Fatalf("%d attempts, want 1: %s is not safe to repeat", n, name)
			}
		})
	}
}

func TestNoRetryOnAnswers(t *testing.T) {
	f := newFakeEnvd(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	_, err := f.envd(t, "0.6.13").Stat(context.Background(), "/f")
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusServiceUnavailable {
		t.Fatalf("err = %v, want the 503", err)
	}
	if n := len(f.requests()); n != 1 {
		t.Fatalf("%d attempts after a 503 answer, want 1", n)
	}
}

func TestHealthAcceptsNoContent(t *testing.T) {
	f := newFakeEnvd(t, answerAll)
	if err := f.envd(t, "0.6.13").Health(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := f.last(t)
	if r.method != http.MethodGet || r.path != "/health" {
		t.Fatalf("request %s %s", r.method, r.path)
	}
}
