package tools

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/zalando/go-keyring"

	"github.com/e2b-mcp/e2b-mcp/credentials"
	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/egress"
	"github.com/e2b-mcp/e2b-mcp/lifecycle"
)

// authorization is the Authorization header the emulator's record of a sandbox sets for github.com, "" for none.
func authorization(t *testing.T, emu *e2btest.Server, id string) string {
	t.Helper()
	sb, ok := emu.Sandbox(id)
	if !ok {
		t.Fatalf("sandbox %s is not at the emulator", id)
	}
	if sb.Network == nil {
		return ""
	}
	for _, r := range sb.Network.Rules["github.com"] {
		if v := r.Transform.Headers["Authorization"]; v != "" {
			return v
		}
	}
	return ""
}

// Every path that brings a sandbox alive gives it the owner's credentials as they are at that moment: create,
// resume (after a rotation), a live fork and a fork from a checkpoint (after a removal), adoption. The results
// name the credentials, never their values, and the allow-list is sent along each time.
func TestEgressOnEveryPath(t *testing.T) {
	t.Parallel()
	keyring.MockInit()
	k := credentials.Keyring{}
	add := func(value string) string {
		t.Helper()
		c, err := credentials.AddCredential(k, "alice", credentials.Credential{Name: "gh", Domain: "github.com", Form: credentials.FormGitHub}, value)
		if err != nil {
			t.Fatal(err)
		}
		return c.HeaderValue(value)
	}
	first := add("ghp_first_value_0123456789")
	e := newEnv(t)
	e.deps.Egress = &egress.Policy{Store: k, Limits: egress.Limits{AllowOut: []string{"github.com"}}}
	s := e.connect(t, eras[0], Caller{Owner: "alice", Session: "main"})

	res := s.call(t, "e2b_create_sandbox", map[string]any{"title": "repo"})
	out := mustOK(t, "e2b_create_sandbox", res)
	id := out["sandbox_id"].(string)
	if got := authorization(t, e.emu, id); got != first {
		t.Fatalf("create: Authorization %q", got)
	}
	summary, _ := json.Marshal(out["egress"])
	if string(summary) != `{"allow_out":["github.com"],"credentials":[{"domain":"github.com","name":"gh"}],"internet":false}` {
		t.Fatalf("create's egress: %s", summary)
	}
	if sb, _ := e.emu.Sandbox(id); len(sb.Network.DenyOut) != 1 || sb.Network.AllowOut[0] != "github.com" {
		t.Fatalf("create's limits: %+v", sb.Network)
	}

	// Rotated while paused: the resume brings the new value.
	s.ok(t, "e2b_manage_sandbox", map[string]any{"sandbox_id": id, "action": "pause"})
	second := add("ghp_second_value_987654321")
	res = s.call(t, "e2b_manage_sandbox", map[string]any{"sandbox_id": id, "action": "resume"})
	out = mustOK(t, "e2b_manage_sandbox", res)
	if got := authorization(t, e.emu, id); got != second {
		t.Fatalf("resume: Authorization %q", got)
	}
	if out["egress"] == nil {
		t.Fatalf("resume's result names no egress: %v", out)
	}

	// Removed: a live fork (which E2B starts with the source's rules) and a fork from a checkpoint get none.
	cp := s.ok(t, "e2b_checkpoint_sandbox", map[string]any{"sandbox_id": id})
	if err := credentials.RemoveCredential(k, "alice", "gh"); err != nil {
		t.Fatal(err)
	}
	forks := []string{}
	for _, args := range []map[string]any{{"sandbox_id": id}, {"checkpoint_id": cp["checkpoint_id"]}} {
		out := s.ok(t, "e2b_fork_sandbox", args)
		for _, f := range out["sandboxes"].([]any) {
			forks = append(forks, f.(map[string]any)["sandbox_id"].(string))
		}
		if w, _ := out["warning"].(string); w != "" {
			t.Fatalf("fork warning: %s", w)
		}
	}
	for _, f := range forks {
		if got := authorization(t, e.emu, f); got != "" {
			t.Fatalf("fork %s kept the removed credential: %q", f, got)
		}
		if sb, _ := e.emu.Sandbox(f); sb.Network == nil || len(sb.Network.AllowOut) != 1 {
			t.Fatalf("fork %s lost the allow-list: %+v", f, sb.Network)
		}
	}

	// Adoption: a sandbox of the session the store lacks gets the configuration when it is adopted.
	third := add("ghp_third_value_abcdefabcdef")
	orphan, err := e.emu.CreateSandbox(aliceKey, e2btest.SandboxOptions{Secure: true, Metadata: lifecycle.Metadata("alice", "main", "orphan")})
	if err != nil {
		t.Fatal(err)
	}
	s.ok(t, "e2b_list_sandboxes", map[string]any{})
	if got := authorization(t, e.emu, orphan.ID); got != third {
		t.Fatalf("adopted: Authorization %q", got)
	}

	// No value in any result the model saw.
	for _, v := range []string{"ghp_", first, second, third} {
		if strings.Contains(resultText(res), v) {
			t.Fatalf("a result holds a value: %s", resultText(res))
		}
	}
}

// A failed update of a resumed sandbox's egress is said, not hidden: the model learns that old credentials may
// still be in force.
func TestEgressUpdateFailureIsAWarning(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.deps.Egress = failingSource{}
	s := e.connect(t, eras[0], Caller{Owner: "alice", Session: "main"})
	id := s.createSandboxDirect(t, e)
	out := s.ok(t, "e2b_manage_sandbox", map[string]any{"sandbox_id": id, "action": "resume"})
	if w, _ := out["warning"].(string); !strings.Contains(w, "egress configuration") {
		t.Fatalf("no warning: %v", out)
	}
}

type failingSource struct{}

func (failingSource) Resolve(string, string) (egress.Config, error) {
	return egress.Config{}, credentials.ErrNoCredential
}

// createSandboxDirect makes a sandbox of the session without e2b_create_sandbox (whose egress would fail here)
// and lets a listing adopt it.
func (s *session) createSandboxDirect(t *testing.T, e *env) string {
	t.Helper()
	sb, err := e.emu.CreateSandbox(aliceKey, e2btest.SandboxOptions{Secure: true, Metadata: lifecycle.Metadata(s.caller.Owner, s.caller.Session, "x")})
	if err != nil {
		t.Fatal(err)
	}
	s.ok(t, "e2b_list_sandboxes", map[string]any{})
	return sb.ID
}
