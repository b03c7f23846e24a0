package tools

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
	"github.com/e2b-mcp/e2b-mcp/state"
)

// These tests run sandboxes with a timeout of a few seconds on the emulator's real clock, which applies timeouts
// every 250 ms as E2B does: pausing or killing a sandbox left unused, resuming one on traffic.

const shortTimeout = 5 // seconds

// waitState waits (up to 20 s: the emulator pauses a sandbox within 250 ms of its expiry) for the emulator to
// have the sandbox in st, or gone when st is "".
func waitState(t *testing.T, e *env, id, st string) {
	t.Helper()
	waitfor.Until(t, 20*time.Second, fmt.Sprintf("sandbox %s to be %q (gone when empty)", id, st), func() bool {
		sb, ok := e.emu.Sandbox(id)
		return st == "" && !ok || ok && sb.State == st
	})
}

// TestUsedSandboxOutlivesItsTimeout: a sandbox with a 5 s timeout that is used every 2 s for 30 s keeps running
// with its files; left idle it is paused (not killed) after about its timeout, and the next e2b_exec resumes it,
// says so, and finds its files and the process started before it was paused.
func TestUsedSandboxOutlivesItsTimeout(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, map[string]any{"timeout_seconds": shortTimeout})
		s.ok(t, "e2b_write_file", map[string]any{"sandbox_id": id, "path": "notes.txt", "content": "kept\n"})
		bg := s.ok(t, "e2b_exec", map[string]any{"sandbox_id": id, "background": true,
			"command": "while true; do date +%s%N > /tmp/ticks; sleep 0.2; done"})
		pid := num(bg["pid"])

		// Fifteen uses two seconds apart: 30 s of use, six times the sandbox's timeout.
		for use := 1; use <= 15; use++ {
			time.Sleep(2 * time.Second)
			res := s.ok(t, "e2b_read_file", map[string]any{"sandbox_id": id, "path": "notes.txt"})
			if res["content"] != "kept\n" || res["resumed"] != nil {
				t.Fatalf("at use %d: %v", use, res)
			}
			if sb, _ := e.emu.Sandbox(id); sb.State != e2btest.StateRunning {
				t.Fatalf("at use %d the sandbox is %s", use, sb.State)
			}
		}

		waitState(t, e, id, e2btest.StatePaused)
		list := s.ok(t, "e2b_list_sandboxes", nil)
		info := list["sandboxes"].([]any)[0].(map[string]any)
		if info["state"] != "paused" || info["paused_by"] != state.PausedAtTimeout || info["on_timeout"] != "pause" {
			t.Fatalf("listed %v", info)
		}

		out := s.exec(t, id, "cat notes.txt")
		if out["resumed"] != true || out["stdout"] != "kept\n" {
			t.Fatalf("exec on the paused sandbox: %v", out)
		}
		if p := s.listed(t, id, pid); p["running"] != true {
			t.Fatalf("process %d after the resume: %v", pid, p)
		}
		before := s.exec(t, id, "cat /tmp/ticks")["stdout"]
		time.Sleep(time.Second)
		if after := s.exec(t, id, "cat /tmp/ticks")["stdout"]; after == before {
			t.Fatalf("the background process does not run after the resume (%v)", after)
		}
		list = s.ok(t, "e2b_list_sandboxes", nil)
		info = list["sandboxes"].([]any)[0].(map[string]any)
		if info["state"] != "running" || info["paused_by"] != nil || info["expires_at"] == nil {
			t.Fatalf("listed after the resume %v", info)
		}
	})
}

// TestKilledAtTimeout: with on_timeout kill (per call, or serve's --on-timeout kill) an idle sandbox is gone after
// its timeout and the model is told it was killed at its timeout.
func TestKilledAtTimeout(t *testing.T) {
	t.Parallel()
	for name, tt := range map[string]struct {
		args      map[string]any
		configure func(*Config)
	}{
		"argument": {map[string]any{"timeout_seconds": shortTimeout, "on_timeout": "kill"}, func(*Config) {}},
		"server":   {map[string]any{"timeout_seconds": shortTimeout}, func(c *Config) { c.OnTimeout = "kill" }},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, tt.configure)
			s := e.connect(t, eras[0], Caller{Owner: "alice", Session: "main"})
			created := s.ok(t, "e2b_create_sandbox", tt.args)
			id := created["sandbox_id"].(string)
			if created["on_timeout"] != "kill" {
				t.Fatalf("create: %v", created)
			}
			waitState(t, e, id, "")
			got := s.fail(t, "e2b_exec", map[string]any{"sandbox_id": id, "command": "true"})
			wantContains(t, got, "Sandbox '"+id+"' is gone (killed by E2B at its timeout", "as on_timeout kill asks")
			info := s.ok(t, "e2b_list_sandboxes", nil)["sandboxes"].([]any)[0].(map[string]any)
			if info["state"] != "gone" || !strings.Contains(info["gone_reason"].(string), "killed by E2B at its timeout") {
				t.Fatalf("listed %v", info)
			}
		})
	}
}

// TestLongCommandKeepsItsSandbox: `sleep 20` in a sandbox with a 5 s timeout finishes with its output: the command
// extends the sandbox while it runs.
func TestLongCommandKeepsItsSandbox(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, e *env, s *session) {
		id := s.createSandbox(t, map[string]any{"timeout_seconds": shortTimeout})
		out := s.ok(t, "e2b_exec", map[string]any{"sandbox_id": id, "command": "sleep 20; echo finished", "timeout_ms": 60000})
		if out["success"] != true || out["stdout"] != "finished\n" || out["resumed"] != nil {
			t.Fatalf("sleep 20: %v", out)
		}
	})
}

// TestExtensionsThrottled: calls in quick succession extend a sandbox once per tenth of its timeout, with E2B's
// connect (which never shortens the expiry), not once per call. The server's clock is the test's, so how long the
// calls take on a loaded machine does not matter: the create counts as an extension, calls at its instant and up
// to just short of a tenth of the timeout later make no connect, and one a tenth later makes one.
func TestExtensionsThrottled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var mu sync.Mutex
	now := time.Now()
	e.deps.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	s := e.connect(t, eras[0], Caller{Owner: "alice", Session: "main"})
	id := s.createSandbox(t, map[string]any{"timeout_seconds": 20})
	e.emu.ResetRequests()
	connects := func() (n int) {
		for _, r := range e.emu.Requests() {
			switch {
			case r.Path == "/v2/sandboxes/"+id+"/connect":
				n++
				if string(r.Body) != `{"timeout":20}` {
					t.Errorf("connect body %s", r.Body)
				}
			case strings.HasSuffix(r.Path, "/timeout"):
				t.Errorf("a POST %s: it can shorten the expiry", r.Path)
			}
		}
		return n
	}
	for range 10 {
		s.exec(t, id, "true")
	}
	advance(throttleInterval(20) - time.Millisecond)
	s.exec(t, id, "true")
	if n := connects(); n != 0 {
		t.Fatalf("%d connects for calls within a tenth of the timeout of the create, want none", n)
	}
	advance(time.Millisecond)
	before := time.Now()
	s.exec(t, id, "true")
	after := time.Now()
	if n := connects(); n != 1 {
		t.Fatalf("%d connects once a tenth of the timeout passed, want 1", n)
	}
	// The record's expiry is on the server's clock, E2B's on the real one at the connect.
	sb, _ := e.emu.Sandbox(id)
	rec := recordState(t, e, id)
	mu.Lock()
	want := now.Add(20 * time.Second).UTC()
	mu.Unlock()
	if !rec.ExpiresAt.Equal(want) || sb.EndAt.Before(before.Add(19*time.Second)) || sb.EndAt.After(after.Add(21*time.Second)) {
		t.Fatalf("recorded expiry %v (want %v), E2B's %v (want 20 s after the connect)", rec.ExpiresAt, want, sb.EndAt)
	}
}

// TestLifecycleRefused: an E2B that refuses the lifecycle fields still gets a sandbox made: without autoResume
// first, then without autoPause, and the result says that it is killed at its timeout.
func TestLifecycleRefused(t *testing.T) {
	t.Parallel()
	e := newEnvWith(t, e2btest.Options{NoLifecycle: true})
	s := e.connect(t, eras[0], Caller{Owner: "alice", Session: "main"})
	res := s.ok(t, "e2b_create_sandbox", nil)
	if res["on_timeout"] != "kill" {
		t.Fatalf("create: %v", res)
	}
	wantContains(t, res["warning"].(string), `E2B refused autoResume (`, `property "autoResume" is unsupported`,
		`E2B refused autoPause (`, "killed, with its files and processes, when its timeout runs out")
	var creates int
	for _, r := range e.emu.Requests() {
		if r.Path == "/v2/sandboxes" && r.Method == "POST" {
			creates++
		}
	}
	if creates != 3 || len(e.emu.Sandboxes()) != 1 {
		t.Fatalf("%d creates made %d sandboxes", creates, len(e.emu.Sandboxes()))
	}
	if rec := recordState(t, e, res["sandbox_id"].(string)); rec.OnTimeout != "kill" {
		t.Fatalf("record %+v", rec)
	}
}

// TestPausedAtTimeoutResumedWithinTheThrottle: a sandbox E2B paused at its timeout is resumed by the next call,
// even when the keep-alive extended it so recently that a running sandbox would not be extended again. The
// server's clock stands still here, so every extension is recent to it; the emulator's runs, and pauses the
// sandbox at its timeout.
func TestPausedAtTimeoutResumedWithinTheThrottle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	frozen := time.Now()
	e.deps.Now = func() time.Time { return frozen }
	s := e.connect(t, eras[0], Caller{Owner: "alice", Session: "main"})
	id := s.createSandbox(t, map[string]any{"timeout_seconds": shortTimeout})
	s.exec(t, id, "echo extended > /tmp/mark") // extends it: the throttle now holds for as long as the clock stands
	waitState(t, e, id, e2btest.StatePaused)
	info := s.ok(t, "e2b_list_sandboxes", nil)["sandboxes"].([]any)[0].(map[string]any)
	if info["state"] != "paused" || info["paused_by"] != state.PausedAtTimeout {
		t.Fatalf("listed %v; want paused at its timeout", info)
	}
	res := s.call(t, "e2b_exec", map[string]any{"sandbox_id": id, "command": "cat /tmp/mark"})
	if res.IsError {
		t.Fatalf("the call after E2B paused the sandbox, within the throttle of its last extension: %s", resultText(res))
	}
	if out := mustOK(t, "e2b_exec", res); out["resumed"] != true || out["stdout"] != "extended\n" {
		t.Fatalf("the call after E2B paused the sandbox: %v; want it resumed first", out)
	}
}

// TestExtendNeverShortensTheRecordedExpiry: a connect with a shorter timeout than the time a sandbox has left
// leaves E2B's expiry as it is, and the server records and shows that expiry, not the shorter one it asked for.
func TestExtendNeverShortensTheRecordedExpiry(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.connect(t, eras[0], Caller{Owner: "alice", Session: "main"})
	id := s.createSandbox(t, map[string]any{"timeout_seconds": 3600})
	s.ok(t, "e2b_manage_sandbox", map[string]any{"sandbox_id": id, "action": "resume", "timeout_seconds": 60})
	sb, _ := e.emu.Sandbox(id)
	if left := time.Until(sb.EndAt); left < 50*time.Minute {
		t.Fatalf("E2B's expiry is %v away after a connect of 60 s; the emulator shortened it", left)
	}
	rec := recordState(t, e, id)
	if d := rec.ExpiresAt.Sub(sb.EndAt); d < -time.Second || d > time.Second {
		t.Fatalf("recorded expiry %v, E2B's %v: the record took the shorter timeout asked for", rec.ExpiresAt, sb.EndAt)
	}
	info := s.ok(t, "e2b_list_sandboxes", nil)["sandboxes"].([]any)[0].(map[string]any)
	shown, err := time.Parse(time.RFC3339, info["expires_at"].(string))
	if err != nil || shown.Sub(sb.EndAt) < -time.Second || shown.Sub(sb.EndAt) > time.Second {
		t.Fatalf("listed expires_at %v (%v), E2B's %v", info["expires_at"], err, sb.EndAt)
	}
}
