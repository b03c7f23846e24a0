package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// policy check validates a limits section, and policy explain says which limit a call would meet, for the owner
// named.
func TestPolicyLimitsCheckAndExplain(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(good, []byte("default_action: allow\nlimits:\n  default: {running_sandboxes: 3, forks_per_sandbox: 2, max_timeout_seconds: 600, templates: [base]}\n"+
		"  owners:\n    alice: {running_sandboxes: 8, templates: unlimited, sandbox_hours_per_day: 1.5}\nrules: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("default_action: allow\nlimits:\n  default: {running_sandboxes: 0}\nrules: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := e.run(t, "", "policy", "check", good); r.code != exitOK || !strings.Contains(r.stdout, "ok") {
		t.Fatalf("policy check of good limits: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := e.run(t, "", "policy", "check", bad); r.code == exitOK ||
		!strings.Contains(r.stderr, "bad.yaml:3: limits.default.running_sandboxes must be a whole number from 1") {
		t.Fatalf("policy check of a zero cap: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{good, "e2b_create_sandbox", `{"template":"desktop"}`},
			[]string{"limits:   running_sandboxes 3; forks_per_sandbox 2; max_timeout_seconds 600; templates base",
				`refused: template "desktop" is not one of the templates allowed (base)`,
				"counts against running_sandboxes 3"}},
		{[]string{"--owner", "alice", good, "e2b_create_sandbox", `{"template":"desktop","timeout_seconds":600}`},
			[]string{"limits:   running_sandboxes 8; forks_per_sandbox 2; max_timeout_seconds 600; sandbox_hours_per_day 1.5\n",
				"counts against running_sandboxes 8",
				"counts against sandbox_hours_per_day 1.5 (the owner's running time today, UTC"}},
		{[]string{good, "e2b_fork_sandbox", `{"sandbox_id":"x"}`},
			[]string{"counts against running_sandboxes 3", "counts against forks_per_sandbox 2"}},
		{[]string{good, "e2b_manage_sandbox", `{"sandbox_id":"x","action":"resume","timeout_seconds":3600}`},
			[]string{"refused: timeout_seconds 3600 is above the longest allowed, 600"}},
	} {
		r := e.run(t, "", append([]string{"policy", "explain"}, tc.args...)...)
		for _, w := range tc.want {
			if r.code != exitOK || !strings.Contains(r.stdout, w) {
				t.Errorf("policy explain %s: exit %d, want %q in\n%s%s", strings.Join(tc.args, " "), r.code, w, r.stdout, r.stderr)
			}
		}
		if tc.args[0] == "--owner" && strings.Contains(r.stdout, "refused") {
			t.Errorf("alice may use any template:\n%s", r.stdout)
		}
	}
	if r := e.run(t, "", "policy", "explain", good, "e2b_exec", `{"sandbox_id":"x","command":"ls"}`); strings.Contains(r.stdout, "limits:") {
		t.Errorf("e2b_exec meets no limit, yet:\n%s", r.stdout)
	}
}
