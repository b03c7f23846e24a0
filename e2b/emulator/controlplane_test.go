package emulator

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/clocktest"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

const (
	cpKeyA = "e2b_00000000000000000000000000000000000000aa"
	cpKeyB = "e2b_00000000000000000000000000000000000000bb"
)

// newTestClock is a settable clock for Options.Now.
func newTestClock() *clocktest.Clock {
	return clocktest.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
}

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
	timeout := map[string]any{"timeout": 30}
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"GET", "/sandboxes/" + sb.ID, nil},
		{"DELETE", "/sandboxes/" + sb.ID, nil},
		{"POST", "/sandboxes/" + sb.ID + "/pause", map[string]any{"memory": true}},
		{"POST", "/sandboxes/" + sb.ID + "/connect", timeout},
		{"POST", "/sandboxes/" + sb.ID + "/timeout", timeout},
		{"POST", "/sandboxes/" + sb.ID + "/snapshots", map[string]any{}},
		{"POST", "/sandboxes/" + sb.ID + "/fork", timeout},
	} {
		a := cpCall(t, s, c.method, c.path, cpKeyB, c.body)
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
	waitfor.Until(t, 10*time.Second, "the ticker to expire the sandbox", func() bool {
		_, ok := s.Sandbox(sb.ID)
		return !ok
	})
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
