package tools

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/e2b/emulator"
	"github.com/e2b-mcp/e2b-mcp/lifecycle"
	"github.com/e2b-mcp/e2b-mcp/state"
)

func TestListSandboxes(t *testing.T) {
	t.Parallel()
	forEachEra(t, func(t *testing.T, e *env, s *session) {
		list := s.ok(t, "e2b_list_sandboxes", nil)
		if num(list["count"]) != 0 || len(list["sandboxes"].([]any)) != 0 {
			t.Fatalf("empty list: %v", list)
		}
		a := s.createSandbox(t, map[string]any{"title": "alpha", "timeout_seconds": 900})
		b := s.createSandbox(t, map[string]any{"title": "beta"})
		s.exec(t, a, "true")
		s.ok(t, "e2b_manage_sandbox", map[string]any{"sandbox_id": b, "action": "pause"})
		// One made by this session that the store never heard of (a crash before recording) is adopted.
		adopted, err := e.emu.CreateSandbox(aliceKey, e2btest.SandboxOptions{Secure: true, Metadata: lifecycle.Metadata("alice", "main", "orphan")})
		if err != nil {
			t.Fatal(err)
		}
		// One of another session is not shown.
		if _, err := e.emu.CreateSandbox(aliceKey, e2btest.SandboxOptions{Metadata: lifecycle.Metadata("alice", "elsewhere", "x")}); err != nil {
			t.Fatal(err)
		}

		list = s.ok(t, "e2b_list_sandboxes", nil)
		if num(list["count"]) != 3 || list["warning"] != nil {
			t.Fatalf("list: %v", list)
		}
		byID := map[string]map[string]any{}
		for _, x := range list["sandboxes"].([]any) {
			m := x.(map[string]any)
			byID[m["sandbox_id"].(string)] = m
		}
		if got := byID[a]; got["title"] != "alpha" || got["state"] != "running" || num(got["steps"]) != 1 ||
			num(got["timeout_seconds"]) != 900 || got["template"] != "base" {
			t.Errorf("alpha: %v", got)
		}
		if created, err := time.Parse(time.RFC3339, byID[a]["created"].(string)); err != nil || time.Since(created) > time.Hour {
			t.Errorf("created %v (%v)", byID[a]["created"], err)
		}
		if got := byID[b]; got["state"] != "paused" {
			t.Errorf("beta: %v", got)
		}
		if got := byID[adopted.ID]; got["title"] != "orphan" {
			t.Errorf("adopted: %v", got)
		}

		e.emu.Vanish(a)
		list = s.ok(t, "e2b_list_sandboxes", nil)
		for _, x := range list["sandboxes"].([]any) {
			m := x.(map[string]any)
			if m["sandbox_id"] == a && (m["state"] != "gone" || m["gone_reason"] == nil) {
				t.Fatalf("vanished sandbox listed as %v", m)
			}
		}
	})
}

// TestListWhenE2BUnreachable: the store's view is still listed, with a warning.
func TestListWhenE2BUnreachable(t *testing.T) {
	t.Parallel()
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			e := newEnv(t)
			s := e.connect(t, era, Caller{Owner: "alice", Session: "main"})
			id := s.createSandbox(t, map[string]any{"title": "kept"})
			offline := e.deps
			offline.Clients = keyedClients{url: "http://127.0.0.1:1", keys: map[string]string{"alice": aliceKey}}
			s2 := connectDeps(t, offline, era, Caller{Owner: "alice", Session: "main"})
			list := s2.ok(t, "e2b_list_sandboxes", nil)
			if num(list["count"]) != 1 || list["sandboxes"].([]any)[0].(map[string]any)["sandbox_id"] != id {
				t.Fatalf("list: %v", list)
			}
			wantContains(t, list["warning"].(string), "E2B could not be reached", "E2B API error (", "last known state")
			if strings.Contains(list["warning"].(string), aliceKey) {
				t.Fatal("the key leaked into the warning")
			}
		})
	}
}

// BenchmarkListSandboxes1000 is e2b_list_sandboxes through an MCP client for a session of 1,000 sandboxes, all
// running and recorded, so that the reconcile inside it lists them at E2B (ten pages), finds every one known and
// writes nothing. The emulator's work is in the figures too: it runs in this process.
func BenchmarkListSandboxes1000(b *testing.B) {
	const n = 1000
	emu, err := emulator.New(emulator.Options{APIKeys: []string{aliceKey}, ExpiryInterval: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(emu.Close)
	st, err := state.Open(b.TempDir(), state.Options{Keys: state.StaticKeySource(bytes.Repeat([]byte{7}, 32))})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	call := Caller{Owner: "alice", Session: "main"}
	// Made at the emulator and recorded directly, as the create tool would leave them, which is far quicker.
	for i := range n {
		title := fmt.Sprintf("sandbox %d", i)
		sb, err := emu.CreateSandbox(aliceKey, emulator.SandboxOptions{
			Secure: true, Timeout: time.Hour, Metadata: lifecycle.Metadata(call.Owner, call.Session, title),
		})
		if err != nil {
			b.Fatal(err)
		}
		if err := st.PutSandbox(state.SandboxRecord{
			ID: sb.ID, Owner: call.Owner, Session: call.Session, Title: title, Template: sb.TemplateID,
			EnvdVersion: sb.EnvdVersion, AccessToken: sb.AccessToken, State: state.StateRunning,
			Created: sb.StartedAt, TimeoutSeconds: 3600,
		}); err != nil {
			b.Fatal(err)
		}
	}
	s := connectDeps(b, Deps{
		Clients: keyedClients{url: emu.URL(), keys: map[string]string{call.Owner: aliceKey}},
		Store:   st,
	}, eras[0], call)

	res := s.ok(b, "e2b_list_sandboxes", nil)
	if num(res["count"]) != n || res["warning"] != nil {
		b.Fatalf("listed %v sandboxes (warning %v), want %d", res["count"], res["warning"], n)
	}
	for _, x := range res["sandboxes"].([]any) {
		if got := x.(map[string]any)["state"]; got != state.StateRunning {
			b.Fatalf("a sandbox is listed %v after reconcile: %v", got, x)
		}
	}

	b.ReportAllocs()
	for b.Loop() {
		if res := s.call(b, "e2b_list_sandboxes", nil); res.IsError {
			b.Fatal(resultText(res))
		}
	}
}
