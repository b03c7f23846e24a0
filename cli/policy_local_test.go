package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// policy explain judges a sync's local_path as serve would: relative to the first --workspace, symlinks
// resolved; policy check refuses a local_path pattern that could never match.
func TestPolicyLocalPath(t *testing.T) {
	e := newEnv(t)
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, "ws", "private"), 0o755)
	os.Symlink("private", filepath.Join(dir, "ws", "alias"))
	rules := filepath.Join(dir, "local.yaml")
	os.WriteFile(rules, []byte(`default_action: allow
rules:
  - id: keep-private
    when: { target: e2b_sync_in, local_path: "`+filepath.ToSlash(dir)+`/ws/private/**" }
    then: { decision: deny, reason: private }
`), 0o600)
	r := e.run(t, "", "policy", "explain", "--workspace", filepath.Join(dir, "ws"), rules, "e2b_sync_in",
		`{"sandbox_id":"x","local_path":"alias"}`)
	if r.code != exitOK || !strings.Contains(r.stdout, "decision: deny") ||
		!strings.Contains(r.stdout, `local_path "`+filepath.ToSlash(dir)+`/ws/private" matches`) {
		t.Errorf("explain of a symlinked local_path: %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte(`default_action: allow
rules:
  - id: r
    when: { target: e2b_sync_in, local_path: "src/**" }
    then: { decision: deny }
`), 0o600)
	if r := e.run(t, "", "policy", "check", bad); r.code != exitFailure || !strings.Contains(r.stderr, "bad.yaml:4") ||
		!strings.Contains(r.stderr, "is relative") {
		t.Errorf("check of a relative local_path pattern: %d %s", r.code, r.stderr)
	}
}
