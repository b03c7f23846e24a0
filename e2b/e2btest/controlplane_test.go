package e2btest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	cpKeyA = "e2b_00000000000000000000000000000000000000aa"
	cpKeyB = "e2b_00000000000000000000000000000000000000bb"
)

// testClock is a settable clock for Options.Now.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func newTestClock() *testClock { return &testClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)} }

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *testClock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func newCPServer(t *testing.T, opts Options) *Server {
	t.Helper()
	if opts.ExpiryInterval == 0 {
		opts.ExpiryInterval = -1
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

type cpAnswer struct {
	status int
	header http.Header
	body   []byte
}

func (a cpAnswer) json(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(a.body, v); err != nil {
		t.Fatalf("body %q: %v", a.body, err)
	}
}

func (a cpAnswer) errorBody(t *testing.T) (int, string) {
	t.Helper()
	var e struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	a.json(t, &e)
	return e.Code, e.Message
}

func cpCall(t *testing.T, s *Server, method, path, key string, body any) cpAnswer {
	t.Helper()
	return cpCallHeaders(t, s, method, path, body, map[string]string{"X-API-Key": key})
}

func cpCallHeaders(t *testing.T, s *Server, method, path string, body any, headers map[string]string) cpAnswer {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, s.URL()+path, r)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return cpAnswer{status: resp.StatusCode, header: resp.Header, body: data}
}

func cpCreate(t *testing.T, s *Server, key string, body map[string]any) map[string]any {
	t.Helper()
	a := cpCall(t, s, "POST", "/sandboxes", key, body)
	if a.status != http.StatusCreated {
		t.Fatalf("create: %d %s", a.status, a.body)
	}
	var m map[string]any
	a.json(t, &m)
	return m
}

func TestAuth(t *testing.T) {
	s := newCPServer(t, Options{APIKeys: []string{cpKeyA}})
	tests := []struct {
		name, key, want string
	}{
		{"missing", "", "Invalid API key format"},
		{"malformed", "sk-not-e2b", "Invalid API key format"},
		{"unknown", cpKeyB, "Invalid API key, please visit https://e2b.dev/docs/api-key for more information."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := cpCall(t, s, "GET", "/v2/sandboxes", tt.key, nil)
			if a.status != 401 {
				t.Fatalf("status %d", a.status)
			}
			if code, msg := a.errorBody(t); code != 401 || msg != tt.want {
				t.Fatalf("got %d %q", code, msg)
			}
		})
	}
	if a := cpCall(t, s, "GET", "/v2/sandboxes", cpKeyA, nil); a.status != 200 {
		t.Fatalf("valid key: %d %s", a.status, a.body)
	}

	// AcceptKey lets in the keys it accepts and no others.
	byFunc := newCPServer(t, Options{AcceptKey: func(k string) bool { return k == cpKeyB }})
	if a := cpCall(t, byFunc, "GET", "/v2/sandboxes", cpKeyB, nil); a.status != 200 {
		t.Fatalf("a key AcceptKey accepts: %d %s", a.status, a.body)
	}
	if a := cpCall(t, byFunc, "GET", "/v2/sandboxes", cpKeyA, nil); a.status != 401 {
		t.Fatalf("a key AcceptKey refuses: %d %s", a.status, a.body)
	}
	if a := cpCall(t, s, "GET", "/health", "", nil); a.status != 200 {
		t.Fatalf("health: %d", a.status)
	}
}

func TestCreateAnswers(t *testing.T) {
	clk := newTestClock()
	s := newCPServer(t, Options{Now: clk.Now, EnvdVersion: "0.5.9", Domain: "example.test"})

	m := cpCreate(t, s, cpKeyA, map[string]any{"templateID": "base", "timeout": 300, "secure": true,
		"metadata": map[string]string{"k": "v"}, "envVars": map[string]string{"FOO": "bar"}, "allow_internet_access": false})
	id, _ := m["sandboxID"].(string)
	if !sandboxIDPattern.MatchString(id) {
		t.Fatalf("sandboxID %q", id)
	}
	sb, ok := s.Sandbox(id)
	if !ok {
		t.Fatal("sandbox not recorded")
	}
	want := map[string]any{"sandboxID": id, "templateID": "base", "alias": "base", "clientID": "6532622b",
		"envdVersion": "0.5.9", "envdAccessToken": sb.AccessToken, "domain": "example.test", "trafficAccessToken": nil}
	if len(m) != len(want) {
		t.Fatalf("answer keys %v, want %v", m, want)
	}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %v, want %v", k, m[k], v)
		}
	}
	if sb.AccessToken == "" || !sb.Secure || sb.EnvVars["FOO"] != "bar" || sb.Metadata["k"] != "v" ||
		sb.AllowInternetAccess == nil || *sb.AllowInternetAccess || sb.DefaultUser != "user" || sb.DefaultWorkdir != "/home/user" {
		t.Fatalf("record %+v", sb)
	}
	if !sb.EndAt.Equal(clk.Now().Add(300*time.Second)) || !sb.StartedAt.Equal(clk.Now()) {
		t.Fatalf("times %v %v", sb.StartedAt, sb.EndAt)
	}

	// Not secure: no token in the answer. No timeout: 15 s.
	m = cpCreate(t, s, cpKeyA, map[string]any{"templateID": "base"})
	if _, has := m["envdAccessToken"]; has {
		t.Fatalf("token without secure: %v", m)
	}
	sb, _ = s.Sandbox(m["sandboxID"].(string))
	if got := sb.EndAt.Sub(sb.StartedAt); got != 15*time.Second {
		t.Fatalf("default timeout %v", got)
	}

	errs := []struct {
		name   string
		body   any
		status int
		msg    string
	}{
		{"zero timeout", map[string]any{"templateID": "base", "timeout": 0}, 400, "Timeout must be greater than 0"},
		{"negative timeout", map[string]any{"templateID": "base", "timeout": -5}, 400, "Timeout must be greater than 0"},
		{"too long", map[string]any{"templateID": "base", "timeout": 25 * 3600}, 400, "Timeout cannot be greater than 24 hours"},
		{"unknown template", map[string]any{"templateID": "nope"}, 404, "template 'nope' not found"},
		{"unknown tag", map[string]any{"templateID": "base:v9"}, 404, "template 'base' with tag 'v9' not found"},
		{"not json", "{", 400, "Error when parsing request: unexpected end of JSON input"},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			a := cpCall(t, s, "POST", "/sandboxes", cpKeyA, tt.body)
			if code, msg := a.errorBody(t); a.status != tt.status || code != tt.status || msg != tt.msg {
				t.Fatalf("got %d %d %q", a.status, code, msg)
			}
		})
	}
	if a := cpCall(t, s, "POST", "/sandboxes", cpKeyA, map[string]any{"timeout": 5}); a.status != 400 {
		t.Fatalf("no templateID: %d", a.status)
	}
	if a := cpCall(t, s, "POST", "/sandboxes", cpKeyA, map[string]any{"templateID": "base:default"}); a.status != 201 {
		t.Fatalf("base:default: %d %s", a.status, a.body)
	}
}

func TestSandboxDirSeeded(t *testing.T) {
	s := newCPServer(t, Options{})
	sb, err := s.CreateSandbox(cpKeyA, SandboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(sb.Dir, "home", ".bashrc"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != 3526 || fi.Mode().Perm() != 0o644 || !fi.ModTime().Equal(skelTime) {
		t.Fatalf(".bashrc %d %v %v", fi.Size(), fi.Mode(), fi.ModTime())
	}
	if _, err := os.Stat(filepath.Join(sb.Dir, "home", ".profile")); err != nil {
		t.Fatal(err)
	}
	ti, err := os.Stat(filepath.Join(sb.Dir, "tmp"))
	if err != nil || ti.Mode()&os.ModeSticky == 0 || ti.Mode().Perm() != 0o777 {
		t.Fatalf("tmp %v %v", ti.Mode(), err)
	}
}

func TestTeamIsolationAndIDs(t *testing.T) {
	s := newCPServer(t, Options{})
	sb, err := s.CreateSandbox(cpKeyA, SandboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	notFound := `Sandbox "` + sb.ID + `" doesn't exist or you don't have access to it`
	for _, c := range []struct{ method, path string }{
		{"GET", "/sandboxes/" + sb.ID},
		{"DELETE", "/sandboxes/" + sb.ID},
		{"POST", "/sandboxes/" + sb.ID + "/pause"},
		{"POST", "/sandboxes/" + sb.ID + "/connect"},
		{"POST", "/sandboxes/" + sb.ID + "/timeout"},
		{"POST", "/sandboxes/" + sb.ID + "/snapshots"},
		{"POST", "/sandboxes/" + sb.ID + "/fork"},
	} {
		a := cpCall(t, s, c.method, c.path, cpKeyB, map[string]any{"timeout": 30})
		if code, msg := a.errorBody(t); a.status != 404 || code != 404 || msg != notFound {
			t.Errorf("%s %s: %d %q", c.method, c.path, a.status, msg)
		}
	}
	var list []map[string]any
	cpCall(t, s, "GET", "/v2/sandboxes", cpKeyB, nil).json(t, &list)
	if len(list) != 0 {
		t.Fatalf("other team lists %v", list)
	}
	// The sandbox is untouched.
	if got, _ := s.Sandbox(sb.ID); got.State != StateRunning {
		t.Fatalf("state %s", got.State)
	}

	for _, bad := range []string{"ABC", "a_b", "a-b-c", "-x"} {
		a := cpCall(t, s, "GET", "/sandboxes/"+bad, cpKeyA, nil)
		if code, msg := a.errorBody(t); a.status != 400 || code != 400 || msg != "Invalid sandbox ID" {
			t.Errorf("%q: %d %q", bad, a.status, msg)
		}
	}
	if a := cpCall(t, s, "GET", "/sandboxes/"+sb.ID+"-6532622b", cpKeyA, nil); a.status != 200 {
		t.Fatalf("legacy id: %d %s", a.status, a.body)
	}
}

func TestGetDetail(t *testing.T) {
	clk := newTestClock()
	s := newCPServer(t, Options{Now: clk.Now})
	m := cpCreate(t, s, cpKeyA, map[string]any{"templateID": "base", "timeout": 60, "secure": true, "autoPause": true,
		"metadata": map[string]string{"a": "1"}, "allow_internet_access": true})
	id := m["sandboxID"].(string)
	var d map[string]any
	a := cpCall(t, s, "GET", "/sandboxes/"+id, cpKeyA, nil)
	a.json(t, &d)
	if a.status != 200 || d["state"] != "running" || d["envdAccessToken"] != m["envdAccessToken"] ||
		d["allowInternetAccess"] != true || d["domain"] != "e2b.local" || d["cpuCount"] != float64(2) ||
		d["startedAt"] != "2026-03-01T12:00:00Z" || d["endAt"] != "2026-03-01T12:01:00Z" {
		t.Fatalf("detail %v", d)
	}
	if lc, _ := d["lifecycle"].(map[string]any); lc["onTimeout"] != "pause" || lc["autoResume"] != false {
		t.Fatalf("lifecycle %v", d["lifecycle"])
	}
	if md, _ := d["metadata"].(map[string]any); md["a"] != "1" {
		t.Fatalf("metadata %v", d["metadata"])
	}
	cpCall(t, s, "POST", "/sandboxes/"+id+"/pause", cpKeyA, nil)
	cpCall(t, s, "GET", "/sandboxes/"+id, cpKeyA, nil).json(t, &d)
	if d["state"] != "paused" {
		t.Fatalf("paused detail %v", d)
	}
}

func TestPauseConnectResume(t *testing.T) {
	clk := newTestClock()
	s := newCPServer(t, Options{Now: clk.Now})
	id := cpCreate(t, s, cpKeyA, map[string]any{"templateID": "base", "timeout": 600})["sandboxID"].(string)

	// Connect to a running sandbox: 200, the end time only grows.
	a := cpCall(t, s, "POST", "/sandboxes/"+id+"/connect", cpKeyA, map[string]any{"timeout": 60})
	if a.status != 200 {
		t.Fatalf("connect running: %d %s", a.status, a.body)
	}
	if sb, _ := s.Sandbox(id); !sb.EndAt.Equal(clk.Now().Add(600 * time.Second)) {
		t.Fatalf("connect shortened: %v", sb.EndAt)
	}
	cpCall(t, s, "POST", "/sandboxes/"+id+"/connect", cpKeyA, map[string]any{"timeout": 900})
	if sb, _ := s.Sandbox(id); !sb.EndAt.Equal(clk.Now().Add(900 * time.Second)) {
		t.Fatalf("connect did not extend: %v", sb.EndAt)
	}

	if a := cpCall(t, s, "POST", "/sandboxes/"+id+"/pause", cpKeyA, nil); a.status != 204 {
		t.Fatalf("pause: %d %s", a.status, a.body)
	}
	a = cpCall(t, s, "POST", "/sandboxes/"+id+"/pause", cpKeyA, map[string]any{"memory": true})
	if code, msg := a.errorBody(t); a.status != 409 || code != 409 || msg != "Error pausing sandbox - sandbox '"+id+"' is already paused" {
		t.Fatalf("pause twice: %d %q", a.status, msg)
	}
	// The edge no longer reaches envd.
	if a := cpCallHeaders(t, s, "GET", "/health", nil, map[string]string{"E2b-Sandbox-Id": id, "E2b-Sandbox-Port": "49983"}); a.status != 502 {
		t.Fatalf("envd of paused sandbox: %d", a.status)
	}
	// A paused sandbox's timeout cannot be set.
	if a := cpCall(t, s, "POST", "/sandboxes/"+id+"/timeout", cpKeyA, map[string]any{"timeout": 30}); a.status != 404 {
		t.Fatalf("timeout of paused: %d", a.status)
	}

	clk.Advance(time.Hour)
	a = cpCall(t, s, "POST", "/sandboxes/"+id+"/connect", cpKeyA, map[string]any{"timeout": 120})
	var m map[string]any
	a.json(t, &m)
	if a.status != 201 || m["sandboxID"] != id {
		t.Fatalf("connect paused: %d %s", a.status, a.body)
	}
	if sb, _ := s.Sandbox(id); sb.State != StateRunning || !sb.EndAt.Equal(clk.Now().Add(120*time.Second)) {
		t.Fatalf("resumed %+v", sb)
	}

	// Deprecated resume: 409 on a running sandbox.
	a = cpCall(t, s, "POST", "/sandboxes/"+id+"/resume", cpKeyA, map[string]any{"timeout": 30})
	if _, msg := a.errorBody(t); a.status != 409 || msg != "Sandbox "+id+" is already running" {
		t.Fatalf("resume running: %d %q", a.status, msg)
	}
	a = cpCall(t, s, "POST", "/sandboxes/nosuchsandbox/connect", cpKeyA, map[string]any{"timeout": 30})
	if _, msg := a.errorBody(t); a.status != 404 || msg != `Sandbox "nosuchsandbox" doesn't exist or you don't have access to it` {
		t.Fatalf("connect missing: %d %q", a.status, msg)
	}
	if a := cpCall(t, s, "POST", "/sandboxes/"+id+"/connect", cpKeyA, map[string]any{}); a.status != 400 {
		t.Fatalf("connect without timeout: %d", a.status)
	}
}

// TestTimeoutBodies checks the answers to the bodies of connect, resume and set-timeout that E2B refuses.
func TestTimeoutBodies(t *testing.T) {
	s := newCPServer(t, Options{MaxTimeoutHours: 1})
	id := cpCreate(t, s, cpKeyA, map[string]any{"templateID": "base", "timeout": 600})["sandboxID"].(string)
	const schema = "Error when parsing request: request body has an error: "
	tests := []struct {
		endpoint string
		body     any
		status   int
		msg      string
	}{
		{"connect", "", 400, schema + "value is required but missing"},
		{"connect", `{"timeout":`, 400, "Error when parsing request: unexpected end of JSON input"},
		{"connect", map[string]any{}, 400, schema + `doesn't match schema: property "timeout" is missing`},
		{"connect", map[string]any{"timeout": -1}, 400, schema + "doesn't match schema: number must be at least 0"},
		{"connect", map[string]any{"timeout": 3601}, 400, "Timeout cannot be greater than 1 hours"},
		{"timeout", "", 400, schema + "value is required but missing"},
		{"timeout", map[string]any{}, 400, schema + `doesn't match schema: property "timeout" is missing`},
		{"timeout", map[string]any{"timeout": 3601}, 400, "Timeout cannot be greater than 1 hours"},
		{"resume", "", 400, schema + "value is required but missing"},
		{"resume", map[string]any{"timeout": 0}, 400, "Timeout must be greater than 0"},
		{"resume", map[string]any{}, 409, "Sandbox " + id + " is already running"},
	}
	for _, tt := range tests {
		a := cpCall(t, s, "POST", "/sandboxes/"+id+"/"+tt.endpoint, cpKeyA, tt.body)
		if code, msg := a.errorBody(t); a.status != tt.status || code != tt.status || msg != tt.msg {
			t.Errorf("%s %v: %d %d %q, want %d %q", tt.endpoint, tt.body, a.status, code, msg, tt.status, tt.msg)
		}
	}
	// A negative timeout sets the end to now.
	if a := cpCall(t, s, "POST", "/sandboxes/"+id+"/timeout", cpKeyA, map[string]any{"timeout": -5}); a.status != 204 {
		t.Fatalf("negative timeout: %d %s", a.status, a.body)
	}
}

func TestTimeoutAndExpiry(t *testing.T) {
	clk := newTestClock()
	s := newCPServer(t, Options{Now: clk.Now})
	killed := cpCreate(t, s, cpKeyA, map[string]any{"templateID": "base", "timeout": 600})["sandboxID"].(string)
	paused := cpCreate(t, s, cpKeyA, map[string]any{"templateID": "base", "timeout": 600, "autoPause": true})["sandboxID"].(string)
	kept := cpCreate(t, s, cpKeyA, map[string]any{"templateID": "base", "timeout": 600})["sandboxID"].(string)
	sbKilled, _ := s.Sandbox(killed)

	// The timeout endpoint sets (here: shortens) the end time.
	for _, id := range []string{killed, paused} {
		if a := cpCall(t, s, "POST", "/sandboxes/"+id+"/timeout", cpKeyA, map[string]any{"timeout": 10}); a.status != 204 {
			t.Fatalf("timeout: %d %s", a.status, a.body)
		}
	}
	if sb, _ := s.Sandbox(killed); !sb.EndAt.Equal(clk.Now().Add(10 * time.Second)) {
		t.Fatalf("end %v", sb.EndAt)
	}
	if got := s.Expire(); len(got) != 0 {
		t.Fatalf("expired early: %v", got)
	}
	clk.Advance(11 * time.Second)
	got := s.Expire()
	want := []string{killed, paused}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("expired %v, want %v", got, want)
	}
	if _, ok := s.Sandbox(killed); ok {
		t.Fatal("expired sandbox without autoPause still exists")
	}
	if _, err := os.Stat(sbKilled.Dir); !os.IsNotExist(err) {
		t.Fatalf("dir of killed sandbox: %v", err)
	}
	if sb, _ := s.Sandbox(paused); sb.State != StatePaused {
		t.Fatalf("autoPause sandbox %s", sb.State)
	}
	if sb, _ := s.Sandbox(kept); sb.State != StateRunning {
		t.Fatalf("kept %s", sb.State)
	}
	// Refresh only extends.
	if a := cpCall(t, s, "POST", "/sandboxes/"+kept+"/refreshes", cpKeyA, map[string]any{"duration": 5}); a.status != 204 {
		t.Fatalf("refresh %d", a.status)
	}
	if sb, _ := s.Sandbox(kept); !sb.EndAt.Equal(newTestClock().Now().Add(600 * time.Second)) {
		t.Fatalf("refresh shortened: %v", sb.EndAt)
	}
}

func TestExpiryTicker(t *testing.T) {
	clk := newTestClock()
	s := newCPServer(t, Options{Now: clk.Now, ExpiryInterval: 5 * time.Millisecond})
	sb, err := s.CreateSandbox(cpKeyA, SandboxOptions{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := s.Sandbox(sb.ID); !ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the ticker did not expire the sandbox")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestKillAndVanish(t *testing.T) {
	s := newCPServer(t, Options{})
	a, _ := s.CreateSandbox(cpKeyA, SandboxOptions{})
	b, _ := s.CreateSandbox(cpKeyA, SandboxOptions{})
	if r := cpCall(t, s, "DELETE", "/sandboxes/"+a.ID, cpKeyA, nil); r.status != 204 || len(r.body) != 0 {
		t.Fatalf("kill: %d %s", r.status, r.body)
	}
	if r := cpCall(t, s, "DELETE", "/sandboxes/"+a.ID, cpKeyA, nil); r.status != 404 {
		t.Fatalf("kill twice: %d", r.status)
	}
	if _, err := os.Stat(a.Dir); !os.IsNotExist(err) {
		t.Fatalf("dir left: %v", err)
	}
	// A paused sandbox can be killed too.
	cpCall(t, s, "POST", "/sandboxes/"+b.ID+"/pause", cpKeyA, nil)
	if !s.Vanish(b.ID) || s.Vanish(b.ID) {
		t.Fatal("vanish")
	}
	if r := cpCall(t, s, "GET", "/sandboxes/"+b.ID, cpKeyA, nil); r.status != 404 {
		t.Fatalf("vanished: %d", r.status)
	}
}

func TestListV2(t *testing.T) {
	clk := newTestClock()
	s := newCPServer(t, Options{Now: clk.Now})
	var ids []string
	for i := range 7 {
		md := map[string]string{"app": "x"}
		if i%2 == 0 {
			md["app"] = "y z/é"
		}
		sb, err := s.CreateSandbox(cpKeyA, SandboxOptions{Metadata: md})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sb.ID)
		clk.Advance(time.Second)
	}
	if _, err := s.CreateSandbox(cpKeyB, SandboxOptions{}); err != nil {
		t.Fatal(err)
	}
	cpCall(t, s, "POST", "/sandboxes/"+ids[0]+"/pause", cpKeyA, nil)

	list := func(query string) ([]map[string]any, cpAnswer) {
		t.Helper()
		a := cpCall(t, s, "GET", "/v2/sandboxes?"+query, cpKeyA, nil)
		if a.status != 200 {
			t.Fatalf("%s: %d %s", query, a.status, a.body)
		}
		var l []map[string]any
		a.json(t, &l)
		return l, a
	}
	all, a := list("")
	if len(all) != 7 || a.header.Get("X-Total-Running") != "6" || a.header.Get("X-Next-Token") != "" {
		t.Fatalf("default: %d sandboxes, total %q", len(all), a.header.Get("X-Total-Running"))
	}
	// Newest first.
	if all[0]["sandboxID"] != ids[6] || all[6]["sandboxID"] != ids[0] || all[6]["state"] != "paused" {
		t.Fatalf("order: %v ... %v", all[0]["sandboxID"], all[6]["sandboxID"])
	}
	if l, a := list("state=paused"); len(l) != 1 || a.header.Get("X-Total-Running") != "" {
		t.Fatalf("paused only: %d, total %q", len(l), a.header.Get("X-Total-Running"))
	}
	if l, _ := list("state=running%2Cpaused"); len(l) != 7 {
		t.Fatalf("escaped comma: %d", len(l))
	}
	if l, _ := list("state=running&state=paused"); len(l) != 7 {
		t.Fatalf("repeated state: %d", len(l))
	}
	// The metadata filter as the SDK sends it: urlencode({quote(k): quote(v)}) as one value.
	if l, a := list("metadata=app%3Dy%2520z%252F%25C3%25A9"); len(l) != 4 || a.header.Get("X-Total-Running") != "3" {
		t.Fatalf("metadata filter: %d %q", len(l), a.header.Get("X-Total-Running"))
	}
	// The same value escaped whole once more (every level decoded by the server) matches too.
	if l, _ := list("metadata=app%3Dy%252520z%25252F%2525C3%2525A9"); len(l) != 4 {
		t.Fatalf("metadata filter escaped whole: %d", len(l))
	}
	if l, _ := list("metadata=app%3Dx&state=running"); len(l) != 3 {
		t.Fatalf("metadata and state: %d", len(l))
	}
	// Paging.
	page1, a := list("limit=3")
	token := a.header.Get("X-Next-Token")
	if len(page1) != 3 || token == "" {
		t.Fatalf("page 1: %d %q", len(page1), token)
	}
	if raw, err := base64.URLEncoding.DecodeString(token); err != nil || !strings.HasSuffix(string(raw), "__"+page1[2]["sandboxID"].(string)) {
		t.Fatalf("token %q: %s %v", token, raw, err)
	}
	page2, a := list("limit=3&nextToken=" + url.QueryEscape(token))
	page3, a3 := list("limit=3&nextToken=" + url.QueryEscape(a.header.Get("X-Next-Token")))
	if len(page2) != 3 || len(page3) != 1 || a3.header.Get("X-Next-Token") != "" {
		t.Fatalf("pages %d %d", len(page2), len(page3))
	}
	var paged []any
	for _, p := range [][]map[string]any{page1, page2, page3} {
		for _, m := range p {
			paged = append(paged, m["sandboxID"])
		}
	}
	for i, m := range all {
		if paged[i] != m["sandboxID"] {
			t.Fatalf("paged order differs at %d", i)
		}
	}
	if l, _ := list("order=asc&limit=1"); l[0]["sandboxID"] != ids[0] {
		t.Fatalf("asc: %v", l[0]["sandboxID"])
	}
	if l, _ := list("limit=1000"); len(l) != 7 {
		t.Fatalf("limit clamp: %d", len(l))
	}
	for _, bad := range []string{"nextToken=%21%21", "limit=0", "state=gone", "metadata=nokeyvalue", "order=up"} {
		a := cpCall(t, s, "GET", "/v2/sandboxes?"+bad, cpKeyA, nil)
		if a.status != 400 {
			t.Errorf("%s: %d", bad, a.status)
		}
	}
	a = cpCall(t, s, "GET", "/v2/sandboxes?nextToken=%21%21", cpKeyA, nil)
	if _, msg := a.errorBody(t); msg != "Invalid next token" {
		t.Fatalf("bad token message %q", msg)
	}
	a = cpCall(t, s, "GET", "/v2/sandboxes?metadata=nokeyvalue", cpKeyA, nil)
	if _, msg := a.errorBody(t); msg != "Error parsing metadata" {
		t.Fatalf("bad metadata message %q", msg)
	}
	// The deprecated v1 listing: running only.
	var v1 []map[string]any
	cpCall(t, s, "GET", "/sandboxes", cpKeyA, nil).json(t, &v1)
	if len(v1) != 6 {
		t.Fatalf("v1: %d", len(v1))
	}
}

func TestListPagingOverLimit(t *testing.T) {
	s := newCPServer(t, Options{})
	for range 230 {
		if _, err := s.CreateSandbox(cpKeyA, SandboxOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[any]bool{}
	token, pages := "", 0
	for {
		q := ""
		if token != "" {
			q = "?nextToken=" + url.QueryEscape(token)
		}
		a := cpCall(t, s, "GET", "/v2/sandboxes"+q, cpKeyA, nil)
		var l []map[string]any
		a.json(t, &l)
		pages++
		if len(l) > 100 {
			t.Fatalf("page of %d", len(l))
		}
		for _, m := range l {
			if seen[m["sandboxID"]] {
				t.Fatalf("%v twice", m["sandboxID"])
			}
			seen[m["sandboxID"]] = true
		}
		if token = a.header.Get("X-Next-Token"); token == "" {
			break
		}
	}
	if len(seen) != 230 || pages != 3 {
		t.Fatalf("%d sandboxes in %d pages", len(seen), pages)
	}
}

func TestSnapshots(t *testing.T) {
	clk := newTestClock()
	s := newCPServer(t, Options{Now: clk.Now})
	orig := cpCreate(t, s, cpKeyA, map[string]any{"templateID": "base", "envVars": map[string]string{"A": "1"}})["sandboxID"].(string)
	sb, _ := s.Sandbox(orig)
	if err := os.WriteFile(filepath.Join(sb.Dir, "home", "work.txt"), []byte("v1"), 0o600); err != nil {
		t.Fatal(err)
	}

	a := cpCall(t, s, "POST", "/sandboxes/"+orig+"/snapshots", cpKeyA, map[string]any{})
	var snap struct {
		SnapshotID string   `json:"snapshotID"`
		Names      []string `json:"names"`
	}
	a.json(t, &snap)
	if a.status != 201 || !strings.HasSuffix(snap.SnapshotID, ":default") || snap.Names == nil || len(snap.Names) != 0 {
		t.Fatalf("snapshot: %d %s", a.status, a.body)
	}
	if !strings.Contains(string(a.body), `"names":[]`) {
		t.Fatalf("names must be an array: %s", a.body)
	}
	// The snapshot is a copy: later changes do not reach it.
	if err := os.WriteFile(filepath.Join(sb.Dir, "home", "work.txt"), []byte("v2"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := cpCreate(t, s, cpKeyA, map[string]any{"templateID": snap.SnapshotID})
	child, _ := s.Sandbox(m["sandboxID"].(string))
	if data, err := os.ReadFile(filepath.Join(child.Dir, "home", "work.txt")); err != nil || string(data) != "v1" {
		t.Fatalf("from snapshot: %q %v", data, err)
	}
	if child.EnvVars["A"] != "1" || child.TemplateID != strings.TrimSuffix(snap.SnapshotID, ":default") {
		t.Fatalf("child %+v", child)
	}
	// Another team cannot use it.
	a = cpCall(t, s, "POST", "/sandboxes", cpKeyB, map[string]any{"templateID": snap.SnapshotID})
	if a.status != 403 {
		t.Fatalf("other team: %d %s", a.status, a.body)
	}

	// Named.
	a = cpCall(t, s, "POST", "/sandboxes/"+orig+"/snapshots", cpKeyA, map[string]any{"name": "my-snap"})
	var named struct {
		SnapshotID string   `json:"snapshotID"`
		Names      []string `json:"names"`
	}
	a.json(t, &named)
	slug := teamSlug(cpKeyA)
	if named.SnapshotID != slug+"/my-snap:default" || !slices.Equal(named.Names, []string{slug + "/my-snap"}) {
		t.Fatalf("named: %s", a.body)
	}
	for _, ref := range []string{"my-snap", slug + "/my-snap", named.SnapshotID} {
		if a := cpCall(t, s, "POST", "/sandboxes", cpKeyA, map[string]any{"templateID": ref}); a.status != 201 {
			t.Errorf("create from %q: %d %s", ref, a.status, a.body)
		}
	}
	if a := cpCall(t, s, "POST", "/sandboxes/"+orig+"/snapshots", cpKeyA, map[string]any{"name": "other-team/x"}); a.status != 400 {
		t.Fatalf("foreign namespace: %d", a.status)
	}
	if a := cpCall(t, s, "POST", "/sandboxes/"+orig+"/snapshots", cpKeyA, nil); a.status != 400 {
		t.Fatalf("no body: %d", a.status)
	}

	// Listing, newest first, filtered by sandbox, paged.
	var list []map[string]any
	cpCall(t, s, "GET", "/snapshots", cpKeyA, nil).json(t, &list)
	if len(list) != 2 || list[0]["snapshotID"] != named.SnapshotID || list[1]["snapshotID"] != snap.SnapshotID {
		t.Fatalf("list %v", list)
	}
	cpCall(t, s, "GET", "/snapshots?sandboxID="+child.ID, cpKeyA, nil).json(t, &list)
	if len(list) != 0 {
		t.Fatalf("filtered %v", list)
	}
	a = cpCall(t, s, "GET", "/snapshots?limit=1", cpKeyA, nil)
	a.json(t, &list)
	tok := a.header.Get("X-Next-Token")
	if len(list) != 1 || tok == "" {
		t.Fatalf("page: %d %q", len(list), tok)
	}
	a = cpCall(t, s, "GET", "/snapshots?limit=1&nextToken="+url.QueryEscape(tok), cpKeyA, nil)
	a.json(t, &list)
	if len(list) != 1 || list[0]["snapshotID"] != snap.SnapshotID || a.header.Get("X-Next-Token") != "" {
		t.Fatalf("page 2: %v", list)
	}

	// Delete, with the ID escaped as one path segment (quote(id, safe="")).
	if a := cpCall(t, s, "DELETE", "/templates/"+strings.ReplaceAll(strings.ReplaceAll(named.SnapshotID, "/", "%2F"), ":", "%3A"), cpKeyB, nil); a.status != 404 {
		t.Fatalf("delete by other team: %d", a.status)
	}
	if a := cpCall(t, s, "DELETE", "/templates/"+strings.ReplaceAll(strings.ReplaceAll(named.SnapshotID, "/", "%2F"), ":", "%3A"), cpKeyA, nil); a.status != 204 {
		t.Fatalf("delete: %d %s", a.status, a.body)
	}
	a = cpCall(t, s, "DELETE", "/templates/"+url.PathEscape(snap.SnapshotID), cpKeyA, nil)
	if a.status != 204 {
		t.Fatalf("delete unnamed: %d", a.status)
	}
	a = cpCall(t, s, "DELETE", "/templates/"+url.PathEscape(snap.SnapshotID), cpKeyA, nil)
	if _, msg := a.errorBody(t); a.status != 404 || !strings.Contains(msg, "not found") {
		t.Fatalf("delete twice: %d %q", a.status, msg)
	}
	if a := cpCall(t, s, "POST", "/sandboxes", cpKeyA, map[string]any{"templateID": snap.SnapshotID}); a.status != 404 {
		t.Fatalf("create from deleted: %d", a.status)
	}
	// A paused sandbox is not snapshotted (E2B checkpoints live sandboxes only).
	cpCall(t, s, "POST", "/sandboxes/"+orig+"/pause", cpKeyA, nil)
	if a := cpCall(t, s, "POST", "/sandboxes/"+orig+"/snapshots", cpKeyA, map[string]any{}); a.status != 404 {
		t.Fatalf("snapshot of paused: %d", a.status)
	}
}

func TestFork(t *testing.T) {
	s := newCPServer(t, Options{})
	orig, _ := s.CreateSandbox(cpKeyA, SandboxOptions{Secure: true, Metadata: map[string]string{"m": "1"}})
	if err := os.WriteFile(filepath.Join(orig.Dir, "home", "state"), []byte("forked"), 0o640); err != nil {
		t.Fatal(err)
	}
	a := cpCall(t, s, "POST", "/sandboxes/"+orig.ID+"/fork", cpKeyA, map[string]any{"count": 2, "timeout": 60})
	var results []struct {
		Sandbox *struct {
			SandboxID       string `json:"sandboxID"`
			EnvdAccessToken string `json:"envdAccessToken"`
		} `json:"sandbox"`
		Error any `json:"error"`
	}
	a.json(t, &results)
	if a.status != 201 || len(results) != 2 {
		t.Fatalf("fork: %d %s", a.status, a.body)
	}
	for _, r := range results {
		if r.Sandbox == nil || r.Error != nil || r.Sandbox.SandboxID == orig.ID || r.Sandbox.EnvdAccessToken == "" ||
			r.Sandbox.EnvdAccessToken == orig.AccessToken {
			t.Fatalf("result %+v", r)
		}
		f, _ := s.Sandbox(r.Sandbox.SandboxID)
		data, err := os.ReadFile(filepath.Join(f.Dir, "home", "state"))
		if err != nil || string(data) != "forked" || f.Metadata["m"] != "1" || f.EndAt.Sub(f.StartedAt) != time.Minute {
			t.Fatalf("fork %+v: %q %v", f, data, err)
		}
	}
	if got, _ := s.Sandbox(orig.ID); got.State != StateRunning {
		t.Fatalf("original %s", got.State)
	}
	// Default count is 1; limits as E2B's.
	a = cpCall(t, s, "POST", "/sandboxes/"+orig.ID+"/fork", cpKeyA, nil)
	if a.json(t, &results); a.status != 201 || len(results) != 1 {
		t.Fatalf("default fork: %d %s", a.status, a.body)
	}
	for body, msg := range map[string]string{`{"count":0}`: "Count must be at least 1", `{"count":101}`: "Count cannot be greater than 100",
		`{"timeout":0}`: "Timeout must be greater than 0"} {
		a := cpCall(t, s, "POST", "/sandboxes/"+orig.ID+"/fork", cpKeyA, body)
		if _, got := a.errorBody(t); a.status != 400 || got != msg {
			t.Errorf("%s: %d %q", body, a.status, got)
		}
	}
	cpCall(t, s, "POST", "/sandboxes/"+orig.ID+"/pause", cpKeyA, nil)
	a = cpCall(t, s, "POST", "/sandboxes/"+orig.ID+"/fork", cpKeyA, nil)
	if _, msg := a.errorBody(t); a.status != 409 || msg != "Sandbox '"+orig.ID+"' is paused and cannot be forked; resume it first" {
		t.Fatalf("fork paused: %d %q", a.status, msg)
	}
}

func TestEnvdRouting(t *testing.T) {
	s := newCPServer(t, Options{})
	sb, _ := s.CreateSandbox(cpKeyA, SandboxOptions{})
	proxyError := func(id string) string {
		return `{"sandboxId":"` + id + `","message":"The sandbox was not found","code":502}`
	}
	for name, h := range map[string]map[string]string{
		"headers": {"E2b-Sandbox-Id": "nosuch", "E2b-Sandbox-Port": "49983"},
		"host":    {"Host": "49983-nosuch.e2b.local"},
	} {
		a := cpCallHeaders(t, s, "GET", "/health", nil, h)
		if a.status != 502 || string(a.body) != proxyError("nosuch") || a.header.Get("Content-Type") != "application/json" {
			t.Errorf("%s: %d %s", name, a.status, a.body)
		}
	}
	// A running sandbox reaches envd (whatever envd answers, it is not the edge's 502), with no API key needed.
	a := cpCallHeaders(t, s, "GET", "/health", nil, map[string]string{"Host": "49983-" + sb.ID + ".e2b.local"})
	if a.status == 502 {
		t.Fatalf("running sandbox got the edge's 502: %s", a.body)
	}
	a = cpCallHeaders(t, s, "GET", "/", nil, map[string]string{"E2b-Sandbox-Id": sb.ID, "E2b-Sandbox-Port": "8080"})
	if a.status != 502 || !strings.Contains(string(a.body), "port is not open") {
		t.Fatalf("other port: %d %s", a.status, a.body)
	}
	s.Vanish(sb.ID)
	a = cpCallHeaders(t, s, "GET", "/health", nil, map[string]string{"E2b-Sandbox-Id": sb.ID})
	if a.status != 502 || string(a.body) != proxyError(sb.ID) {
		t.Fatalf("vanished: %d %s", a.status, a.body)
	}
}

func TestRecorder(t *testing.T) {
	s := newCPServer(t, Options{})
	cpCall(t, s, "POST", "/sandboxes", cpKeyA, map[string]any{"templateID": "base"})
	cpCallHeaders(t, s, "GET", "/v2/sandboxes?metadata=a%3Db&state=running,paused", nil, map[string]string{"X-API-Key": cpKeyA, "User-Agent": "ua/1"})
	cpCallHeaders(t, s, "GET", "/health", nil, map[string]string{"E2b-Sandbox-Id": "zzz"})
	reqs := s.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests", len(reqs))
	}
	if r := reqs[0]; r.Method != "POST" || r.Path != "/sandboxes" || string(r.Body) != `{"templateID":"base"}` || r.Header.Get("X-API-Key") != cpKeyA {
		t.Fatalf("first %+v", r)
	}
	if r := reqs[1]; r.RawQuery != "metadata=a%3Db&state=running,paused" || r.Header.Get("User-Agent") != "ua/1" || r.Body != nil {
		t.Fatalf("second %+v", r)
	}
	if r := reqs[2]; r.Header.Get("E2b-Sandbox-Id") != "zzz" || r.Time.Before(reqs[1].Time) {
		t.Fatalf("third %+v", r)
	}
	s.ResetRequests()
	if len(s.Requests()) != 0 {
		t.Fatal("reset")
	}
}

func TestNoRecordingKeepsNothing(t *testing.T) {
	s := newCPServer(t, Options{NoRecording: true})
	if a := cpCall(t, s, "POST", "/sandboxes", cpKeyA, map[string]any{"templateID": "base"}); a.status != 201 {
		t.Fatalf("create answered %d", a.status)
	}
	if n := len(s.Requests()); n != 0 {
		t.Fatalf("%d requests recorded with NoRecording", n)
	}
}

func TestRecorderClipsFilesBodies(t *testing.T) {
	rc := newRecorder()
	big := bytes.Repeat([]byte("x"), FilesBodyLimit+1000)
	req, _ := http.NewRequest("POST", "http://h/files?path=/a", bytes.NewReader(big))
	rc.record(req)
	got, err := io.ReadAll(req.Body)
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("handler read %d bytes, %v", len(got), err)
	}
	r := rc.requests()[0]
	if len(r.Body) != FilesBodyLimit || !r.Clipped {
		t.Fatalf("recorded %d clipped=%v", len(r.Body), r.Clipped)
	}
	// Other bodies are kept whole, before the handler reads them, and still reach the handler.
	req, _ = http.NewRequest("POST", "http://h/sandboxes", strings.NewReader(`{"a":1}`))
	rc.record(req)
	if string(rc.requests()[1].Body) != `{"a":1}` {
		t.Fatalf("recorded %q before the handler read it", rc.requests()[1].Body)
	}
	if got, _ := io.ReadAll(req.Body); string(got) != `{"a":1}` {
		t.Fatalf("body %q", got)
	}
	// A body of unknown length (a client stream) is recorded as it is read, so that recording never waits for it.
	pr, pw := io.Pipe()
	req, _ = http.NewRequest("POST", "http://h/process.Process/StreamInput", pr)
	req.ContentLength = -1
	rc.record(req) // must not block on the open pipe
	go func() { _, _ = pw.Write([]byte("frame")); _ = pw.Close() }()
	if got, _ := io.ReadAll(req.Body); string(got) != "frame" || string(rc.requests()[2].Body) != "frame" {
		t.Fatalf("stream %q, recorded %q", got, rc.requests()[2].Body)
	}
}

func TestFaults(t *testing.T) {
	s := newCPServer(t, Options{})
	s.FailNext(2, 429)
	for range 2 {
		a := cpCall(t, s, "GET", "/v2/sandboxes", cpKeyA, nil)
		if code, _ := a.errorBody(t); a.status != 429 || code != 429 || a.header.Get("Retry-After") != "1" {
			t.Fatalf("injected: %d %v", a.status, a.header)
		}
	}
	if a := cpCall(t, s, "GET", "/v2/sandboxes", cpKeyA, nil); a.status != 200 {
		t.Fatalf("after: %d", a.status)
	}
	// A create answered by FailNext creates nothing.
	s.FailNext(1, 503)
	if a := cpCall(t, s, "POST", "/sandboxes", cpKeyA, map[string]any{"templateID": "base"}); a.status != 503 || len(s.Sandboxes()) != 0 {
		t.Fatalf("failed create: %d, %d sandboxes", a.status, len(s.Sandboxes()))
	}

	// Refused creates are not performed; other requests are served meanwhile.
	s.SetFaults(Faults{RefuseCreate: 1, RefuseCreateStatus: 504})
	if a := cpCall(t, s, "GET", "/v2/sandboxes", cpKeyA, nil); a.status != 200 {
		t.Fatalf("list while refusing creates: %d", a.status)
	}
	if a := cpCall(t, s, "POST", "/sandboxes", cpKeyA, map[string]any{"templateID": "base"}); a.status != 504 || len(s.Sandboxes()) != 0 {
		t.Fatalf("refused create: %d, %d sandboxes", a.status, len(s.Sandboxes()))
	}
	if a := cpCall(t, s, "POST", "/sandboxes", cpKeyA, map[string]any{"templateID": "base"}); a.status != 201 {
		t.Fatalf("create after refusal: %d", a.status)
	}
	for _, sb := range s.Sandboxes() {
		s.Vanish(sb.ID)
	}

	// The same seed gives the same failures.
	pattern := func() []int {
		s.SetFaults(Faults{FailRate: 0.5, Seed: 42, FailStatus: 502, HTMLBody: true})
		var got []int
		for range 20 {
			a := cpCall(t, s, "GET", "/v2/sandboxes", cpKeyA, nil)
			if a.status == 502 && !strings.Contains(string(a.body), "<title>502 Bad Gateway</title>") {
				t.Fatalf("html body %s", a.body)
			}
			got = append(got, a.status)
		}
		return got
	}
	p1, p2 := pattern(), pattern()
	if !slices.Equal(p1, p2) || !slices.Contains(p1, 502) || !slices.Contains(p1, 200) {
		t.Fatalf("patterns %v %v", p1, p2)
	}

	// A create whose connection is cut after it was performed.
	s.SetFaults(Faults{CutAfterCreate: 1})
	req, _ := http.NewRequest("POST", s.URL()+"/sandboxes", strings.NewReader(`{"templateID":"base"}`))
	req.Header.Set("X-API-Key", cpKeyA)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("cut create answered %d", resp.StatusCode)
	}
	if n := len(s.Sandboxes()); n != 1 {
		t.Fatalf("%d sandboxes after a cut create", n)
	}
	if s.CurrentFaults().CutAfterCreate != 0 {
		t.Fatal("counter not used up")
	}
	s.SetFaults(Faults{FailAfterCreate: 1})
	if a := cpCall(t, s, "POST", "/sandboxes", cpKeyA, map[string]any{"templateID": "base"}); a.status != 502 || len(s.Sandboxes()) != 2 {
		t.Fatalf("fail after create: %d, %d sandboxes", a.status, len(s.Sandboxes()))
	}
	if a := cpCall(t, s, "POST", "/sandboxes", cpKeyA, map[string]any{"templateID": "base"}); a.status != 201 {
		t.Fatalf("next create: %d", a.status)
	}
}

func TestCloseRemovesEverything(t *testing.T) {
	s, err := New(Options{ExpiryInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	sb, _ := s.CreateSandbox(cpKeyA, SandboxOptions{})
	root := s.root
	s.Close()
	s.Close() // idempotent
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Fatalf("root left behind: %v", err)
	}
	if _, err := os.Stat(sb.Dir); !os.IsNotExist(err) {
		t.Fatalf("sandbox dir left behind: %v", err)
	}
	// A caller-owned Dir is kept.
	dir := t.TempDir()
	s, err = New(Options{Dir: dir, ExpiryInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("caller's dir removed: %v", err)
	}
}

func TestHoldCreatesWaitsWithTheSandboxMade(t *testing.T) {
	s := newCPServer(t, Options{APIKeys: []string{cpKeyA}})
	created, release := s.HoldCreates()
	done := make(chan cpAnswer, 1)
	go func() { done <- cpCall(t, s, "POST", "/sandboxes", cpKeyA, map[string]any{"templateID": "base"}) }()
	id := <-created
	if _, ok := s.Sandbox(id); !ok {
		t.Fatalf("held create's sandbox %s does not exist", id)
	}
	select {
	case a := <-done:
		t.Fatalf("held create answered %d before release", a.status)
	default:
	}
	release()
	if a := <-done; a.status != 201 || !strings.Contains(string(a.body), id) {
		t.Fatalf("released create answered %d %s", a.status, a.body)
	}
	// After release creates answer at once again.
	if a := cpCall(t, s, "POST", "/sandboxes", cpKeyA, map[string]any{"templateID": "base"}); a.status != 201 {
		t.Fatalf("create after release answered %d", a.status)
	}
}

// The v2 routes of E2B's current SDKs: create makes a secured sandbox whatever the body says, connect's body is
// optional (300 s by default). V1Only leaves them out.
func TestV2CreateAndConnect(t *testing.T) {
	clk := newTestClock()
	s := newCPServer(t, Options{Now: clk.Now})
	a := cpCall(t, s, "POST", "/v2/sandboxes", cpKeyA, map[string]any{"templateID": "base", "timeout": 60})
	var sb struct {
		SandboxID       string `json:"sandboxID"`
		EnvdAccessToken string `json:"envdAccessToken"`
	}
	a.json(t, &sb)
	if a.status != 201 || sb.EnvdAccessToken == "" {
		t.Fatalf("v2 create: %d %s", a.status, a.body)
	}
	if a := cpCall(t, s, "POST", "/v2/sandboxes/"+sb.SandboxID+"/connect", cpKeyA, nil); a.status != 200 {
		t.Fatalf("v2 connect without a body: %d %s", a.status, a.body)
	}
	if rec, _ := s.Sandbox(sb.SandboxID); !rec.EndAt.Equal(clk.Now().Add(300 * time.Second)) {
		t.Fatalf("v2 connect's default timeout: ends %v", rec.EndAt.Sub(clk.Now()))
	}
	if a := cpCall(t, s, "POST", "/v2/sandboxes/nosuch/connect", cpKeyA, map[string]any{"timeout": 30}); a.status != 404 {
		t.Fatalf("v2 connect to nothing: %d", a.status)
	}

	old := newCPServer(t, Options{V1Only: true})
	if a := cpCall(t, old, "POST", "/v2/sandboxes", cpKeyA, map[string]any{"templateID": "base"}); a.status != 404 {
		t.Fatalf("v2 create on a v1-only E2B: %d", a.status)
	}
	if a := cpCall(t, old, "POST", "/sandboxes", cpKeyA, map[string]any{"templateID": "base"}); a.status != 201 {
		t.Fatalf("v1 create on a v1-only E2B: %d", a.status)
	}
}
