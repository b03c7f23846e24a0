package emulator

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestCreateRefusesWhatTheSDKDoesNotSend: a create body with a field E2B's SDKs do not send (or one of theirs the
// emulator does not emulate, or secure on the v2 route) is refused by name, so that a client's mistake fails its
// tests instead of being ignored.
func TestCreateRefusesWhatTheSDKDoesNotSend(t *testing.T) {
	s := newCPServer(t, Options{})
	for _, tt := range []struct {
		path  string
		body  map[string]any
		field string
	}{
		{"/v2/sandboxes", map[string]any{"templateID": "base", "onTimeout": "pause"}, `"onTimeout"`},
		{"/v2/sandboxes", map[string]any{"templateID": "base", "secure": true}, `"secure"`},
		{"/sandboxes", map[string]any{"templateID": "base", "lifecycle": map[string]any{"onTimeout": "pause"}}, `"lifecycle"`},
		{"/v2/sandboxes", map[string]any{"templateID": "base", "autoPause": true, "autoResume": map[string]any{"enabled": true, "policy": "any"}}, `"policy"`},
		{"/v2/sandboxes", map[string]any{"templateID": "base", "mcp": map[string]any{}}, `"mcp"`},
	} {
		a := cpCall(t, s, "POST", tt.path, cpKeyA, tt.body)
		want := "Error when parsing request: request body has an error: doesn't match schema: property " + tt.field + " is unsupported"
		if code, msg := a.errorBody(t); a.status != 400 || code != 400 || msg != want {
			t.Errorf("%s %v: %d %q, want 400 %q", tt.path, tt.body, a.status, msg, want)
		}
	}
	if len(s.Sandboxes()) != 0 {
		t.Fatalf("a refused create made a sandbox: %v", s.Sandboxes())
	}
	// The pause, timeout and connect bodies are held to theirs too.
	sb, err := s.CreateSandbox(cpKeyA, SandboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for path, body := range map[string]any{
		"/sandboxes/" + sb.ID + "/pause":      map[string]any{"memory": true, "timeout": 5},
		"/sandboxes/" + sb.ID + "/timeout":    map[string]any{"timeout": 5, "extend": true},
		"/v2/sandboxes/" + sb.ID + "/connect": map[string]any{"timeout": 5, "autoResume": true},
	} {
		if a := cpCall(t, s, "POST", path, cpKeyA, body); a.status != 400 || !strings.Contains(string(a.body), "is unsupported") {
			t.Errorf("%s %v: %d %s", path, body, a.status, a.body)
		}
	}
}

// TestCreateLifecycle: the lifecycle fields are checked as E2B checks them and answered back in GET
// /sandboxes/{id} as lifecycle {onTimeout, autoResume}.
func TestCreateLifecycle(t *testing.T) {
	s := newCPServer(t, Options{})
	for _, tt := range []struct {
		body       map[string]any
		onTimeout  string
		autoResume bool
	}{
		{map[string]any{}, "kill", false},
		{map[string]any{"autoPause": false}, "kill", false},
		{map[string]any{"autoPause": true}, "pause", false},
		{map[string]any{"autoPause": true, "autoResume": map[string]any{"enabled": true}}, "pause", true},
		{map[string]any{"autoPause": true, "autoPauseMemory": false, "autoResume": map[string]any{"enabled": false}}, "pause", false},
	} {
		tt.body["templateID"] = "base"
		a := cpCall(t, s, "POST", "/v2/sandboxes", cpKeyA, tt.body)
		if a.status != http.StatusCreated {
			t.Fatalf("%v: %d %s", tt.body, a.status, a.body)
		}
		var created struct{ SandboxID string }
		a.json(t, &created)
		var d struct {
			Lifecycle struct {
				AutoResume *bool   `json:"autoResume"`
				OnTimeout  *string `json:"onTimeout"`
			} `json:"lifecycle"`
		}
		cpCall(t, s, "GET", "/sandboxes/"+created.SandboxID, cpKeyA, nil).json(t, &d)
		if d.Lifecycle.OnTimeout == nil || *d.Lifecycle.OnTimeout != tt.onTimeout || d.Lifecycle.AutoResume == nil || *d.Lifecycle.AutoResume != tt.autoResume {
			t.Errorf("%v: lifecycle %+v", tt.body, d.Lifecycle)
		}
	}
	for _, tt := range []struct {
		body map[string]any
		msg  string
	}{
		{map[string]any{"autoPauseMemory": false}, "autoPauseMemory=false only applies when autoPause is true."},
		{map[string]any{"autoPause": true, "autoPauseMemory": false, "autoResume": map[string]any{"enabled": true}},
			"autoPauseMemory=false takes a filesystem-only snapshot, which cannot be auto-resumed by traffic and must be resumed explicitly."},
		{map[string]any{"autoResume": map[string]any{"enabled": true}}, "autoResume only applies when autoPause is true."},
	} {
		tt.body["templateID"] = "base"
		if code, msg := cpCall(t, s, "POST", "/v2/sandboxes", cpKeyA, tt.body).errorBody(t); code != 400 || msg != tt.msg {
			t.Errorf("%v: %d %q, want 400 %q", tt.body, code, msg, tt.msg)
		}
	}
}

// TestAutoResumeOnTraffic: a sandbox created with autoPause and autoResume is paused at its timeout and resumed,
// for its create's timeout, by the next request for its envd; without autoResume the edge answers 502 and it
// stays paused.
func TestAutoResumeOnTraffic(t *testing.T) {
	clk := newTestClock()
	s := newCPServer(t, Options{Now: clk.Now})
	wakes, err := s.CreateSandbox(cpKeyA, SandboxOptions{Timeout: 5 * time.Second, AutoPause: true, AutoResume: true})
	if err != nil {
		t.Fatal(err)
	}
	sleeps, err := s.CreateSandbox(cpKeyA, SandboxOptions{Timeout: 5 * time.Second, AutoPause: true})
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(6 * time.Second)
	if got := s.Expire(); len(got) != 2 {
		t.Fatalf("expired %v", got)
	}
	health := func(id string) int {
		return cpCallHeaders(t, s, "GET", "/health", nil, map[string]string{"E2b-Sandbox-Id": id, "E2b-Sandbox-Port": "49983"}).status
	}
	if got := health(sleeps.ID); got != http.StatusBadGateway {
		t.Fatalf("paused sandbox without autoResume: envd answered %d", got)
	}
	if sb, _ := s.Sandbox(sleeps.ID); sb.State != StatePaused {
		t.Fatalf("without autoResume: %s", sb.State)
	}
	if got := health(wakes.ID); got >= 300 {
		t.Fatalf("paused sandbox with autoResume: envd answered %d", got)
	}
	sb, _ := s.Sandbox(wakes.ID)
	if sb.State != StateRunning || !sb.EndAt.Equal(clk.Now().Add(5*time.Second)) {
		t.Fatalf("with autoResume: %s until %v (now %v)", sb.State, sb.EndAt, clk.Now())
	}
}

// TestRunningTimeAsBilled: a team's running time counts each run from create or resume to pause, kill or timeout,
// killed sandboxes' included, and the runs going on up to now; another team's sandboxes are not its.
func TestRunningTimeAsBilled(t *testing.T) {
	clk := newTestClock()
	s := newCPServer(t, Options{Now: clk.Now})
	a, err := s.CreateSandbox(cpKeyA, SandboxOptions{Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateSandbox(cpKeyA, SandboxOptions{Timeout: 10 * time.Second, AutoPause: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateSandbox(cpKeyB, SandboxOptions{Timeout: time.Hour}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(20 * time.Second) // a: 20 s; b: 10 s, to its timeout, though not yet expired
	if got := s.RunningTime(cpKeyA); got != 30*time.Second {
		t.Fatalf("after 20 s: %v, want 30s", got)
	}
	s.Expire() // b paused at its timeout
	if a := cpCall(t, s, "POST", "/sandboxes/"+a.ID+"/pause", cpKeyA, nil); a.status != http.StatusNoContent {
		t.Fatalf("pause: %d %s", a.status, a.body)
	}
	clk.Advance(time.Minute) // nothing runs
	if a := cpCall(t, s, "POST", "/sandboxes/"+a.ID+"/connect", cpKeyA, map[string]any{"timeout": 600}); a.status >= 300 {
		t.Fatalf("resume: %d %s", a.status, a.body)
	}
	clk.Advance(5 * time.Second)
	if a := cpCall(t, s, "DELETE", "/sandboxes/"+a.ID, cpKeyA, nil); a.status != http.StatusNoContent {
		t.Fatalf("kill: %d %s", a.status, a.body)
	}
	clk.Advance(time.Minute)
	if got := s.RunningTime(cpKeyA); got != 35*time.Second {
		t.Fatalf("after a pause, a resume and a kill: %v, want 35s", got)
	}
	if got := s.RunningTime(cpKeyB); got != 145*time.Second {
		t.Fatalf("the other team's: %v, want 2m25s", got)
	}
}
