package e2b

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/e2b/wire"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"3", 3 * time.Second, true},
		{" 0 ", 0, true},
		{"-4", 0, true},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0, true},
		{"99999999999", 24 * time.Hour, true},
		{"", 0, false},
		{"soon", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseRetryAfter(tt.in, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("%q: %v %v, want %v %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestBackoff(t *testing.T) {
	c := cpClient(t, "http://127.0.0.1:1")
	resp := func(status int, retryAfter string) *http.Response {
		h := http.Header{}
		if retryAfter != "" {
			h.Set("Retry-After", retryAfter)
		}
		return &http.Response{StatusCode: status, Header: h}
	}
	if got := c.backoff(time.Millisecond, time.Minute, 0, resp(429, "7")); got != 7*time.Second {
		t.Errorf("429 Retry-After 7: %v", got)
	}
	if got := c.backoff(time.Millisecond, 5*time.Second, 0, resp(503, "7")); got != 5*time.Second {
		t.Errorf("capped: %v", got)
	}
	for attempt := range 10 {
		got := c.backoff(100*time.Millisecond, 2*time.Second, attempt, resp(502, "7"))
		ceiling := min(100*time.Millisecond<<attempt, 2*time.Second)
		if got < ceiling/2 || got > ceiling {
			t.Errorf("attempt %d: %v not in [%v, %v]", attempt, got, ceiling/2, ceiling)
		}
	}
	if got := c.backoff(time.Millisecond, time.Second, 3, nil); got > 8*time.Millisecond {
		t.Errorf("no response: %v", got)
	}
}

func TestCheckRetry(t *testing.T) {
	dialErr := &url.Error{Op: "Get", URL: "http://x", Err: &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}}
	resetErr := &url.Error{Op: "Post", URL: "http://x", Err: &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}}
	schemeErr := &url.Error{Op: "Get", URL: "ftp://x", Err: errors.New(`unsupported protocol scheme "ftp"`)}
	idem := withIdempotent(context.Background())
	plain := context.Background()
	cancelled, cancel := context.WithCancel(idem)
	cancel()
	tests := []struct {
		name   string
		ctx    context.Context
		status int
		err    error
		want   bool
	}{
		{"dial, create", plain, 0, dialErr, false}, // redialing has tried it again already
		{"dial, idempotent", idem, 0, dialErr, false},
		{"reset, create", plain, 0, resetErr, false},
		{"reset, idempotent", idem, 0, resetErr, true},
		{"bad scheme", idem, 0, schemeErr, false},
		{"429, create", plain, 429, nil, true},
		{"503, create", plain, 503, nil, false},
		{"503, idempotent", idem, 503, nil, true},
		{"502, idempotent", idem, 502, nil, true},
		{"504, idempotent", idem, 504, nil, true},
		{"500, idempotent", idem, 500, nil, false},
		{"404, idempotent", idem, 404, nil, false},
		{"200", idem, 200, nil, false},
		{"cancelled", cancelled, 503, nil, false},
	}
	for _, tt := range tests {
		var resp *http.Response
		if tt.err == nil {
			resp = &http.Response{StatusCode: tt.status, Header: http.Header{}}
		}
		got, err := checkRetry(tt.ctx, resp, tt.err)
		if got != tt.want {
			t.Errorf("%s: %v", tt.name, got)
		}
		if (tt.ctx == cancelled) != (err != nil) {
			t.Errorf("%s: err %v", tt.name, err)
		}
	}
}

func cpCountRequests(reqs []e2btest.RecordedRequest, method, pathPrefix string) int {
	n := 0
	for _, r := range reqs {
		if r.Method == method && strings.HasPrefix(r.Path, pathPrefix) {
			n++
		}
	}
	return n
}

func TestRetriesIdempotent(t *testing.T) {
	srv := cpEmulator(t)
	c := cpClient(t, srv.URL())
	rec, _ := srv.CreateSandbox(cpKey, e2btest.SandboxOptions{})

	srv.FailNext(2, 503)
	if _, err := c.GetSandbox(cpCtx(t), rec.ID); err != nil {
		t.Fatalf("after two 503s: %v", err)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Fatalf("%d requests", n)
	}

	// Exhausted: E2B's last answer is returned as it is.
	srv.ResetRequests()
	srv.FailNext(10, 503)
	_, err := c.GetSandbox(cpCtx(t), rec.ID)
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != 503 || ae.RetryAfter != time.Second || ae.Op != "get sandbox" {
		t.Fatalf("exhausted: %v", err)
	}
	if n := len(srv.Requests()); n != 4 { // 1 + MaxRetries
		t.Fatalf("%d requests", n)
	}

	// Retries disabled.
	srv.ResetRequests()
	srv.SetFaults(e2btest.Faults{})
	srv.FailNext(1, 502)
	noRetry := cpClient(t, srv.URL(), func(cfg *Config) { cfg.MaxRetries = -1 })
	if _, err := noRetry.GetSandbox(cpCtx(t), rec.ID); !errors.As(err, &ae) || ae.Status != 502 {
		t.Fatalf("no retries: %v", err)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Fatalf("%d requests without retries", n)
	}
}

func TestRetriesNonIdempotent(t *testing.T) {
	srv := cpEmulator(t)
	c := cpClient(t, srv.URL())
	rec, _ := srv.CreateSandbox(cpKey, e2btest.SandboxOptions{})

	// 503 on a snapshot: E2B may have taken it, so it is not repeated.
	srv.FailNext(1, 503)
	var ae *APIError
	if _, err := c.CreateSnapshot(cpCtx(t), rec.ID, ""); !errors.As(err, &ae) || ae.Status != 503 {
		t.Fatalf("snapshot 503: %v", err)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Fatalf("%d requests", n)
	}
	// 429: nothing was done, so it is retried.
	srv.ResetRequests()
	srv.SetFaults(e2btest.Faults{RetryAfter: -1})
	srv.FailNext(1, 429)
	if _, err := c.CreateSnapshot(cpCtx(t), rec.ID, ""); err != nil {
		t.Fatalf("snapshot after 429: %v", err)
	}
	if n := len(srv.Requests()); n != 2 {
		t.Fatalf("%d requests", n)
	}
}

func TestRetryAfterHonoured(t *testing.T) {
	srv := cpEmulator(t)
	c := cpClient(t, srv.URL(), func(cfg *Config) { cfg.RetryWaitMax = 5 * time.Second })
	rec, _ := srv.CreateSandbox(cpKey, e2btest.SandboxOptions{})
	srv.SetFaults(e2btest.Faults{RetryAfter: time.Second})
	srv.FailNext(1, 429)
	if _, err := c.GetSandbox(cpCtx(t), rec.ID); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	if gap := reqs[1].Time.Sub(reqs[0].Time); gap < time.Second {
		t.Fatalf("retried after %v, before Retry-After: 1", gap)
	}
}

func TestRetryAfterCapped(t *testing.T) {
	srv := cpEmulator(t)
	c := cpClient(t, srv.URL())
	rec, _ := srv.CreateSandbox(cpKey, e2btest.SandboxOptions{})
	srv.SetFaults(e2btest.Faults{RetryAfter: time.Hour})
	srv.FailNext(2, 429)
	// Without the RetryWaitMax cap (10 ms here) this would wait two hours and hit the test's deadline.
	if _, err := c.GetSandbox(cpCtx(t), rec.ID); err != nil {
		t.Fatal(err)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Fatalf("%d requests", n)
	}
	// A 429 that outlasts the retries is returned with its Retry-After.
	srv.FailNext(10, 429)
	_, err := c.GetSandbox(cpCtx(t), rec.ID)
	var ae *APIError
	if !errors.As(err, &ae) || !errors.Is(err, ErrRateLimited) || ae.RetryAfter != time.Hour {
		t.Fatalf("%v", err)
	}
}

func cpDeadURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// A connection never made is tried again for RedialFor (300 ms here: see TestRedialGivesUp), by redialing alone:
// the retries of answers do not repeat it.
func TestDeadNetwork(t *testing.T) {
	c := cpClient(t, cpDeadURL(t), func(cfg *Config) { cfg.MaxRetries = 2 })
	ctx := cpCtx(t)
	_, err := c.GetSandbox(ctx, "abc")
	var ce *Error
	if !errors.As(err, &ce) || ce.Op != "get sandbox" || !errors.Is(err, ErrNoAnswer) || !strings.Contains(err.Error(), "connection refused") ||
		strings.Count(err.Error(), "gave up after") != 1 {
		t.Fatalf("%v", err)
	}
	// A create against a dead network fails the same way: nothing can have been created, nothing to reconcile.
	_, err = c.CreateSandbox(ctx, NewSandbox{TemplateID: "base"})
	if !errors.As(err, &ce) || ce.Op != "create sandbox" || !errors.Is(err, ErrNoAnswer) || strings.Contains(err.Error(), "looking for") {
		t.Fatalf("create: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatal("took until the test's deadline")
	}
}

func TestRequestTimeout(t *testing.T) {
	srv := cpEmulator(t)
	rec, _ := srv.CreateSandbox(cpKey, e2btest.SandboxOptions{})
	srv.SetFaults(e2btest.Faults{Latency: 2 * time.Second})
	c := cpClient(t, srv.URL(), func(cfg *Config) { cfg.RequestTimeout = 50 * time.Millisecond; cfg.MaxRetries = 1 })
	_, err := c.GetSandbox(cpCtx(t), rec.ID)
	if !errors.Is(err, ErrTimeout) || !errors.Is(err, ErrNoAnswer) {
		t.Fatalf("%v", err)
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("not a timeout: %v", err)
	}
}

func TestContextCancellation(t *testing.T) {
	srv := cpEmulator(t)
	rec, _ := srv.CreateSandbox(cpKey, e2btest.SandboxOptions{})
	answered := make(chan struct{}, 1)
	c := cpClient(t, srv.URL(), func(cfg *Config) {
		cfg.RetryWaitMax = time.Hour
		cfg.HTTPClient = &http.Client{Transport: answerSignal{next: http.DefaultTransport, answered: answered}}
	})

	// Cancelled while waiting out a Retry-After: no further attempt. The cancel comes once the first attempt
	// has been answered (a timer could fire before a loaded machine even sends it).
	srv.SetFaults(e2btest.Faults{RetryAfter: 30 * time.Minute})
	srv.FailNext(5, 429)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-answered:
		case <-ctx.Done():
		}
		cancel()
	}()
	_, err := c.GetSandbox(ctx, rec.ID)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("%v", err)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Fatalf("%d requests", n)
	}

	// Already cancelled: nothing is sent.
	srv.ResetRequests()
	done, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if _, err := c.ListSandboxes(done, ListQuery{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("%v", err)
	}
	if _, err := c.CreateSandbox(done, NewSandbox{TemplateID: "base"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("create: %v", err)
	}
	if n := len(srv.Requests()); n != 0 {
		t.Fatalf("%d requests with a cancelled context", n)
	}

	// Cancelled while the request is in flight: the emulator would answer long after the deadline, however
	// slowly a loaded machine gets to it.
	srv.SetFaults(e2btest.Faults{Latency: time.Hour})
	ctx3, cancel3 := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel3()
	if _, err := c.GetSandbox(ctx3, rec.ID); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("in flight: %v", err)
	}
}

// answerSignal is a transport that signals on answered (without blocking) each time an answer's headers are in.
type answerSignal struct {
	next     http.RoundTripper
	answered chan<- struct{}
}

func (a answerSignal) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := a.next.RoundTrip(req)
	if err == nil {
		select {
		case a.answered <- struct{}{}:
		default:
		}
	}
	return resp, err
}

// cpCreateRequestIDs returns the request ID of every create the emulator received.
func cpCreateRequestIDs(t *testing.T, reqs []e2btest.RecordedRequest) []string {
	t.Helper()
	var ids []string
	for _, r := range reqs {
		if r.Method == "POST" && r.Path == "/v2/sandboxes" {
			var body wire.NewSandboxV2
			if err := json.Unmarshal(r.Body, &body); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, body.Metadata[RequestIDMetadataKey])
		}
	}
	return ids
}

func TestCreateReconcilesCutConnection(t *testing.T) {
	srv := cpEmulator(t)
	c := cpClient(t, srv.URL())
	srv.SetFaults(e2btest.Faults{CutAfterCreate: 1})
	sb, err := c.CreateSandbox(cpCtx(t), NewSandbox{TemplateID: "base", Timeout: 120, Secure: true})
	if err != nil {
		t.Fatal(err)
	}
	all := srv.Sandboxes()
	if len(all) != 1 || all[0].ID != sb.SandboxID {
		t.Fatalf("emulator has %d sandboxes, create returned %s", len(all), sb.SandboxID)
	}
	if sb.EnvdAccessToken != all[0].AccessToken || sb.Domain == nil || *sb.Domain != "e2b.local" {
		t.Fatalf("reconciled sandbox lacks connection details: %+v", sb)
	}
	reqs := srv.Requests()
	ids := cpCreateRequestIDs(t, reqs)
	if len(ids) != 1 {
		t.Fatalf("%d creates sent", len(ids))
	}
	// The lookup used the request ID of the create, then connect filled in the token.
	list := reqs[1]
	if list.Method != "GET" || list.Path != "/v2/sandboxes" || list.RawQuery != "metadata="+url.QueryEscape(RequestIDMetadataKey+"="+ids[0]) {
		t.Fatalf("lookup %s %s?%s", list.Method, list.Path, list.RawQuery)
	}
	if r := reqs[2]; r.Method != "POST" || r.Path != "/v2/sandboxes/"+sb.SandboxID+"/connect" || string(r.Body) != `{"timeout":120}` {
		t.Fatalf("connect %s %s %s", r.Method, r.Path, r.Body)
	}
	if len(reqs) != 3 {
		t.Fatalf("%d requests", len(reqs))
	}
}

func TestCreateReconcilesLostAnswer(t *testing.T) {
	srv := cpEmulator(t)
	c := cpClient(t, srv.URL())
	// The create happened, but a proxy answered 502 with an HTML page.
	srv.SetFaults(e2btest.Faults{FailAfterCreate: 1, HTMLBody: true})
	sb, err := c.CreateSandbox(cpCtx(t), NewSandbox{TemplateID: "base"})
	if err != nil {
		t.Fatal(err)
	}
	if all := srv.Sandboxes(); len(all) != 1 || all[0].ID != sb.SandboxID {
		t.Fatalf("%d sandboxes", len(all))
	}
	if n := len(cpCreateRequestIDs(t, srv.Requests())); n != 1 {
		t.Fatalf("%d creates sent", n)
	}
}

func TestCreateRetriesWhenNothingWasCreated(t *testing.T) {
	srv := cpEmulator(t)
	c := cpClient(t, srv.URL())
	// The first create is refused with 503 before it is performed: the lookup finds nothing, so it is sent again.
	srv.FailNext(1, 503)
	sb, err := c.CreateSandbox(cpCtx(t), NewSandbox{TemplateID: "base"})
	if err != nil {
		t.Fatal(err)
	}
	if all := srv.Sandboxes(); len(all) != 1 || all[0].ID != sb.SandboxID {
		t.Fatalf("%d sandboxes", len(all))
	}
	ids := cpCreateRequestIDs(t, srv.Requests())
	if len(ids) != 2 || ids[0] != ids[1] {
		t.Fatalf("creates %v", ids)
	}
	if n := cpCountRequests(srv.Requests(), "GET", "/v2/sandboxes"); n != 1 {
		t.Fatalf("%d lookups", n)
	}

	// Always refused: bounded by MaxRetries, and nothing exists afterwards.
	srv.ResetRequests()
	srv.SetFaults(e2btest.Faults{RefuseCreate: 100, RefuseCreateStatus: 504})
	_, err = c.CreateSandbox(cpCtx(t), NewSandbox{TemplateID: "base"})
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != 504 {
		t.Fatalf("%v", err)
	}
	if n := len(cpCreateRequestIDs(t, srv.Requests())); n != 4 { // 1 + MaxRetries
		t.Fatalf("%d creates", n)
	}
	if n := cpCountRequests(srv.Requests(), "GET", "/v2/sandboxes"); n != 4 {
		t.Fatalf("%d lookups", n)
	}
	if n := len(srv.Sandboxes()); n != 1 {
		t.Fatalf("%d sandboxes", n)
	}
}

func TestCreateRetries429(t *testing.T) {
	srv := cpEmulator(t)
	c := cpClient(t, srv.URL())
	srv.SetFaults(e2btest.Faults{RetryAfter: -1})
	srv.FailNext(2, 429)
	if _, err := c.CreateSandbox(cpCtx(t), NewSandbox{TemplateID: "base"}); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	if n := len(cpCreateRequestIDs(t, reqs)); n != 3 || len(reqs) != 3 || len(srv.Sandboxes()) != 1 {
		t.Fatalf("%d creates, %d requests, %d sandboxes", n, len(reqs), len(srv.Sandboxes()))
	}
	// A concurrency limit that persists comes back as E2B's 429.
	srv.FailNext(10, 429)
	if _, err := c.CreateSandbox(cpCtx(t), NewSandbox{TemplateID: "base"}); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("%v", err)
	}
	if n := len(srv.Sandboxes()); n != 1 {
		t.Fatalf("%d sandboxes", n)
	}
}

func TestFindCreatedFallsBackToDetail(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.Method+" "+r.URL.Path)
		mu.Unlock()
		switch {
		case r.URL.Path == "/v2/sandboxes":
			_, _ = w.Write([]byte(`[{"sandboxID":"found1","templateID":"base","clientID":"6532622b","startedAt":"2026-01-01T00:00:00Z","endAt":"2026-01-01T00:05:00Z","cpuCount":2,"memoryMB":512,"diskSizeMB":1,"state":"running","envdVersion":"0.6.13"}]`))
		case strings.HasSuffix(r.URL.Path, "/connect"):
			w.WriteHeader(500)
			_, _ = w.Write([]byte(`{"code":500,"message":"Error when connecting"}`))
		case r.URL.Path == "/sandboxes/found1":
			_, _ = w.Write([]byte(`{"sandboxID":"found1","templateID":"base","clientID":"6532622b","envdVersion":"0.6.13","envdAccessToken":"tok","domain":"d.example","state":"running"}`))
		default:
			w.WriteHeader(404)
		}
	}))
	defer ts.Close()
	c := cpClient(t, ts.URL)
	sb, err := c.findCreated(cpCtx(t), "rid", 0)
	if err != nil || sb == nil || sb.SandboxID != "found1" || sb.EnvdAccessToken != "tok" || *sb.Domain != "d.example" {
		t.Fatalf("%+v %v", sb, err)
	}
	if want := []string{"GET /v2/sandboxes", "POST /v2/sandboxes/found1/connect", "GET /sandboxes/found1"}; strings.Join(paths, ",") != strings.Join(want, ",") {
		t.Fatalf("calls %v", paths)
	}
}

func TestFindCreatedKillsDuplicates(t *testing.T) {
	srv := cpEmulator(t)
	c := cpClient(t, srv.URL())
	md := map[string]string{RequestIDMetadataKey: "dup"}
	a, _ := srv.CreateSandbox(cpKey, e2btest.SandboxOptions{Metadata: md})
	b, _ := srv.CreateSandbox(cpKey, e2btest.SandboxOptions{Metadata: md})
	sb, err := c.findCreated(cpCtx(t), "dup", 60)
	if err != nil || sb == nil || (sb.SandboxID != a.ID && sb.SandboxID != b.ID) {
		t.Fatalf("%+v %v", sb, err)
	}
	if all := srv.Sandboxes(); len(all) != 1 || all[0].ID != sb.SandboxID {
		t.Fatalf("left %d sandboxes", len(all))
	}
	if sb, err := c.findCreated(cpCtx(t), "none", 60); sb != nil || err != nil {
		t.Fatalf("none: %+v %v", sb, err)
	}
}

func TestCleanupAbandoned(t *testing.T) {
	srv := cpEmulator(t)
	c := cpClient(t, srv.URL())
	mine, _ := srv.CreateSandbox(cpKey, e2btest.SandboxOptions{Metadata: map[string]string{RequestIDMetadataKey: "gone"}})
	other, _ := srv.CreateSandbox(cpKey, e2btest.SandboxOptions{Metadata: map[string]string{RequestIDMetadataKey: "kept"}})
	c.cleanupAbandoned("gone")
	waitfor.Until(t, 10*time.Second, "the abandoned sandbox to be killed", func() bool {
		_, stillThere := srv.Sandbox(mine.ID)
		return !stillThere
	})
	if _, ok := srv.Sandbox(other.ID); !ok {
		t.Fatal("unrelated sandbox killed")
	}
}

func TestNonJSONErrors(t *testing.T) {
	srv := cpEmulator(t)
	c := cpClient(t, srv.URL())
	rec, _ := srv.CreateSandbox(cpKey, e2btest.SandboxOptions{})
	srv.SetFaults(e2btest.Faults{HTMLBody: true})
	srv.FailNext(1, 502)
	_, err := c.CreateSnapshot(cpCtx(t), rec.ID, "")
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != 502 || ae.Message != "502 Bad Gateway" || ae.SandboxID != rec.ID {
		t.Fatalf("%#v", err)
	}
	// A proxy's 502 on the control plane is not envd's "sandbox not running".
	if errors.Is(err, ErrSandboxGone) || strings.Contains(err.Error(), "not running") {
		t.Fatalf("control-plane 502 read as a stopped sandbox: %v", err)
	}
	if want := "E2B API error (create snapshot: 502): 502 Bad Gateway"; err.Error() != want {
		t.Fatalf("%q, want %q", err.Error(), want)
	}

	long := strings.Repeat("proxy error ", 100)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(400)
		_, _ = io.WriteString(w, "<html><body><p>"+long+"</p></body></html>")
	}))
	defer ts.Close()
	_, err = cpClient(t, ts.URL).GetSandbox(cpCtx(t), "abc")
	if !errors.As(err, &ae) || ae.Status != 400 || len(ae.Message) > 210 || !strings.HasPrefix(ae.Message, "proxy error proxy error") ||
		strings.Contains(ae.Message, "<") {
		t.Fatalf("%q", ae.Message)
	}
	// A 2xx that is not the protocol's JSON is reported as such.
	ts2 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "<html>") }))
	defer ts2.Close()
	if _, err := cpClient(t, ts2.URL).GetSandbox(cpCtx(t), "abc"); err == nil || !strings.Contains(err.Error(), "unexpected answer") {
		t.Fatalf("%v", err)
	}
}

// cpEchoServer answers with every request header in its body, as a misconfigured proxy might, in JSON or HTML.
func cpEchoServer(t *testing.T, status int, html bool) string {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b bytes.Buffer
		_ = r.Header.Write(&b)
		w.WriteHeader(status)
		if html {
			fmt.Fprintf(w, "<html><head><title>Error %s</title></head><body>%s</body></html>", r.Header.Get("X-API-Key"), b.String())
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"code": status, "message": "bad request from " + b.String(),
			"error_code": "key_" + r.Header.Get("X-API-Key")})
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

func TestAPIKeyNeverInErrors(t *testing.T) {
	srv, err := e2btest.New(e2btest.Options{APIKeys: []string{cpOther}, ExpiryInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx := cpCtx(t)
	var errs []error
	collect := func(err error) {
		t.Helper()
		if err == nil {
			t.Fatal("expected an error")
		}
		errs = append(errs, err)
	}

	c := cpClient(t, srv.URL())
	_, err = c.ListSandboxes(ctx, ListQuery{}) // 401
	collect(err)
	okClient := cpClient(t, srv.URL(), func(cfg *Config) { cfg.APIKey = cpOther })
	_, err = okClient.GetSandbox(ctx, "missing") // 404
	collect(err)
	_, err = c.GetSandbox(ctx, cpKey) // invalid ID that is the key
	collect(err)
	_, err = c.GetSandbox(ctx, cpKey+"-x") // legacy form around the key
	collect(err)
	dead := cpClient(t, cpDeadURL(t), func(cfg *Config) { cfg.MaxRetries = 1 })
	_, err = dead.GetSandbox(ctx, "abc") // transport
	collect(err)
	_, err = dead.CreateSandbox(ctx, NewSandbox{TemplateID: "base"})
	collect(err)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = c.GetSandbox(cancelled, "abc")
	collect(err)
	for _, html := range []bool{false, true} {
		for _, status := range []int{400, 500, 503} {
			e := cpClient(t, cpEchoServer(t, status, html), func(cfg *Config) { cfg.MaxRetries = 1 })
			_, err = e.GetSandbox(ctx, "abc")
			collect(err)
			_, err = e.CreateSandbox(ctx, NewSandbox{TemplateID: "base"})
			collect(err)
		}
	}
	// A create whose answer is lost and whose lookup fails too, behind a proxy that echoes headers.
	lostURL := func() string {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == "POST" {
				conn, _, _ := http.NewResponseController(w).Hijack()
				conn.Close()
				return
			}
			w.WriteHeader(500)
			fmt.Fprintf(w, `{"code":500,"message":"lookup failed for %s"}`, r.Header.Get("X-API-Key"))
		}))
		t.Cleanup(ts.Close)
		return ts.URL
	}()
	lost := cpClient(t, lostURL, func(cfg *Config) { cfg.MaxRetries = 0 })
	_, err = lost.CreateSandbox(ctx, NewSandbox{TemplateID: "base"})
	if err == nil || !strings.Contains(err.Error(), "looking for the sandbox") {
		t.Fatalf("lost create: %v", err)
	}
	collect(err)

	for _, err := range errs {
		for _, text := range []string{err.Error(), fmt.Sprintf("%v", err), fmt.Sprintf("%+v", err)} {
			if strings.Contains(text, cpKey) || strings.Contains(text, cpOther) {
				t.Errorf("API key in error: %s", text)
			}
		}
		var ae *APIError
		if errors.As(err, &ae) && (strings.Contains(ae.Message, cpKey) || strings.Contains(ae.Code, cpKey)) {
			t.Errorf("API key in APIError fields: %+v", ae)
		}
	}
}

// cpSyncBuffer is a bytes.Buffer safe for the concurrent writes of a logger.
type cpSyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *cpSyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *cpSyncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func TestDebugLog(t *testing.T) {
	srv := cpEmulator(t)
	var buf cpSyncBuffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := cpClient(t, srv.URL(), func(cfg *Config) { cfg.Logger = logger })
	rec, _ := srv.CreateSandbox(cpKey, e2btest.SandboxOptions{})
	srv.FailNext(1, 503)
	if _, err := c.GetSandbox(cpCtx(t), rec.ID); err != nil {
		t.Fatal(err)
	}
	srv.SetFaults(e2btest.Faults{CutAfterCreate: 1})
	if _, err := c.CreateSandbox(cpCtx(t), NewSandbox{TemplateID: "base"}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{"retrying request", "create outcome unknown", "create had succeeded", "level=DEBUG"} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, cpKey) {
		t.Fatalf("API key in the log:\n%s", out)
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if !strings.Contains(line, "level=DEBUG") {
			t.Errorf("not at debug: %s", line)
		}
	}
}
