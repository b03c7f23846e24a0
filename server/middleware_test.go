package server

import (
	"context"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/audit"
	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
)

const denyCreatePolicy = `default_action: allow
rules:
  - id: no-new-sandboxes
    when: { target: e2b_create_sandbox }
    then: { decision: deny, reason: this session may not create sandboxes }
  - id: no-force-push
    when: { target: e2b_exec, command: "*git push*--force*" }
    then: { decision: deny, reason: force pushes are not allowed }
`

// A denied call answers with the rule and reason, reaches neither the tool nor E2B, and is audited.
func TestPolicyDenyReachesNoE2B(t *testing.T) {
	for _, version := range eras {
		t.Run(version, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{policy: denyCreatePolicy})
			c := connect(t, f.srv, version, nil)
			mark := len(f.emu.Requests())

			msg := mustFail(t, c, "e2b_create_sandbox", map[string]any{"title": "nope", "template": "base"})
			want := "Denied by policy rule 'no-new-sandboxes': this session may not create sandboxes"
			if msg != want {
				t.Errorf("denied create: %q, want %q", msg, want)
			}
			msg = mustFail(t, c, "e2b_exec", map[string]any{"sandbox_id": "abc", "command": "git push origin --force"})
			if !strings.HasPrefix(msg, "Denied by policy rule 'no-force-push'") {
				t.Errorf("denied exec: %q", msg)
			}
			if reqs := f.emu.Requests()[mark:]; len(reqs) != 0 {
				t.Errorf("denied calls reached E2B: %d requests, first %s %s", len(reqs), reqs[0].Method, reqs[0].Path)
			}
			if n := len(f.emu.Sandboxes()); n != 0 {
				t.Errorf("the emulator has %d sandboxes after a denied create", n)
			}

			entries := f.auditEntries(t)
			if len(entries) != 2 {
				t.Fatalf("audit has %d entries, want 2: %+v", len(entries), entries)
			}
			e := entries[0]
			if e.Tool != "e2b_create_sandbox" || e.Decision != "deny" || e.Rule != "no-new-sandboxes" ||
				e.Outcome != audit.OutcomeDenied || e.Owner != "alice" || e.Session != "s1" || e.Args["title"] != "nope" {
				t.Errorf("audit entry of the denied create: %+v", e)
			}
			if e := entries[1]; e.SandboxID != "abc" || e.Rule != "no-force-push" || e.Outcome != audit.OutcomeDenied {
				t.Errorf("audit entry of the denied exec: %+v", e)
			}
		})
	}
}

// Every call is audited with its decision, rule, outcome, sandbox and duration; the lease is renewed by use.
func TestAuditEntryPerCall(t *testing.T) {
	for _, version := range eras {
		t.Run(version, func(t *testing.T) {
			now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
			clock := func() time.Time { return now }
			f := newFixture(t, fixtureOpts{mutate: func(c *Config, _ *e2btest.Server) {
				c.Now = clock
				c.Lease = time.Hour
			}})
			c := connect(t, f.srv, version, nil)

			id := createSandbox(t, c)
			mustOK(t, c, "e2b_list_sandboxes", map[string]any{})
			mustFail(t, c, "e2b_manage_sandbox", map[string]any{"sandbox_id": "nosuchsandbox", "action": "pause"})
			mustOK(t, c, "e2b_manage_sandbox", map[string]any{"sandbox_id": id, "action": "pause"})

			entries := f.auditEntries(t)
			type row struct{ tool, outcome, sandbox, decision, rule string }
			var got []row
			for _, e := range entries {
				got = append(got, row{e.Tool, e.Outcome, e.SandboxID, e.Decision, e.Rule})
				if !e.Time.Equal(now) || e.DurationMS != 0 || e.Owner != "alice" || e.Session != "s1" {
					t.Errorf("entry %+v: want time %v, duration 0, alice/s1", e, now)
				}
			}
			want := []row{
				{"e2b_create_sandbox", "ok", "", "allow", "allow-sandbox-tools"},
				{"e2b_list_sandboxes", "ok", "", "allow", "allow-sandbox-tools"},
				{"e2b_manage_sandbox", "error", "nosuchsandbox", "allow", "allow-sandbox-tools"},
				{"e2b_manage_sandbox", "ok", id, "allow", "allow-sandbox-tools"},
			}
			if !slices.Equal(got, want) {
				t.Errorf("audit rows\n got %v\nwant %v", got, want)
			}
			if entries[2].Error == "" || !strings.Contains(entries[2].Error, "nosuchsandbox") {
				t.Errorf("failed call's audit error: %q", entries[2].Error)
			}

			sessions, err := f.srv.Store().Sessions()
			if err != nil {
				t.Fatal(err)
			}
			if len(sessions) != 1 || sessions[0].Owner != "alice" || sessions[0].Name != "s1" ||
				!sessions[0].LeaseExpires.Equal(now.Add(time.Hour)) {
				t.Errorf("sessions after calls: %+v; want alice/s1 leased until %v", sessions, now.Add(time.Hour))
			}
		})
	}
}

// Argument names the schema does not declare are refused before the policy: Go's JSON decoding would bind
// {"Command": ...} to the command field case-insensitively, slipping past a rule on "command".
func TestUndeclaredArgumentNamesRefused(t *testing.T) {
	f := newFixture(t, fixtureOpts{policy: denyCreatePolicy})
	c := connect(t, f.srv, eras[0], nil)
	mark := len(f.emu.Requests())
	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"e2b_exec", map[string]any{"sandbox_id": "abc", "Command": "git push --force"}, "Unknown parameter: Command"},
		{"e2b_list_sandboxes", map[string]any{"owner": "bob"}, "Unknown parameter: owner"},
		{"e2b_create_sandbox", map[string]any{"upload_files": []any{map[string]any{"session_path": "a", "Sandbox_Path": "/etc/x"}}},
			"Unknown parameter: upload_files[0].Sandbox_Path"},
	} {
		msg := mustFail(t, c, tc.tool, tc.args)
		if !strings.HasPrefix(msg, tc.want) {
			t.Errorf("%s %v: %q, want %q", tc.tool, tc.args, msg, tc.want)
		}
	}
	if reqs := f.emu.Requests()[mark:]; len(reqs) != 0 {
		t.Errorf("refused calls reached E2B: %d requests", len(reqs))
	}
	for _, e := range f.auditEntries(t) {
		if e.Decision != decisionInvalid || e.Outcome != audit.OutcomeError {
			t.Errorf("audit entry %+v: want decision %s, outcome error", e, decisionInvalid)
		}
	}
	// Declared names still pass, including the keys of an object-valued parameter.
	mustOK(t, c, "e2b_list_sandboxes", map[string]any{})
	msg := mustFail(t, c, "e2b_create_sandbox", map[string]any{"env_vars": map[string]any{"AnyName": "x"}})
	if !strings.HasPrefix(msg, "Denied by policy rule 'no-new-sandboxes'") {
		t.Errorf("create with env_vars: %q, want the policy's denial", msg)
	}
}

// The stdio session's lease starts afresh when the server starts, before the first orphan sweep.
func TestRunRenewsStdioLease(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	f := newFixture(t, fixtureOpts{mutate: func(c *Config, _ *e2btest.Server) {
		c.Now = func() time.Time { return now }
		c.Lease = 2 * time.Hour
	}})
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // Run returns at once; the lease is renewed before serving starts
	if err := f.srv.Run(ctx, strings.NewReader(""), io.Discard); err != nil {
		t.Fatal(err)
	}
	sessions, err := f.srv.Store().Sessions()
	if err != nil {
		t.Fatal(err)
	}
	if len(sessions) != 1 || !sessions[0].LeaseExpires.Equal(now.Add(2*time.Hour)) {
		t.Fatalf("sessions %+v", sessions)
	}
}
