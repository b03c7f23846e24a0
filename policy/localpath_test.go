package policy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A local_path rule judges the directory a sync reads or writes: a deny or an approval also catches a directory
// that holds what it names (a sync of a parent takes its children), an allow only the directories it names.
func TestLocalPathCondition(t *testing.T) {
	home := filepath.ToSlash(t.TempDir())
	t.Setenv("HOME", home)
	p, err := testTools.Parse("p.yaml", []byte(`default_action: deny
rules:
  - id: keep-ssh
    when: { target: [e2b_sync_in, e2b_sync_out], local_path: ["~/.ssh/**", "**/secrets/**"] }
    then: { decision: deny, reason: private }
  - id: ask-outside-src
    when: { target: e2b_sync_out, local_path: "/srv/**" }
    then: { decision: require_approval, reason: shared }
  - id: projects
    when: { target: [e2b_sync_in, e2b_sync_out], local_path: "~/src/**" }
    then: { decision: allow }
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		tool, local string
		want        Action
		rule        string
	}{
		{toolSyncIn, home + "/src/app", Allow, "projects"},
		{toolSyncIn, home + "/src", Allow, "projects"}, // "**" spans zero directories
		{toolSyncIn, home + "/.ssh", Deny, "keep-ssh"},
		{toolSyncIn, home + "/.ssh/keys", Deny, "keep-ssh"},
		{toolSyncIn, home, Deny, "keep-ssh"}, // holds ~/.ssh
		{toolSyncIn, "/", Deny, "keep-ssh"},
		{toolSyncIn, home + "/src/app/secrets/prod", Deny, "keep-ssh"},
		{toolSyncOut, "/srv", RequireApproval, "ask-outside-src"},
		// An allowed directory does not make its parent allowed: the parent falls to the default.
		{toolSyncIn, home + "/srcs", Deny, "default"},
		{toolSyncIn, "", Deny, "default"},
	} {
		args := map[string]any{"sandbox_id": "s"}
		if c.local != "" {
			args["local_path"] = c.local
		}
		d := p.Evaluate(Call{Tool: c.tool, Args: args})
		if d.Action != c.want || d.Rule() != c.rule {
			t.Errorf("%s local_path %q: %s by %q, want %s by %q", c.tool, c.local, d.Action, d.Rule(), c.want, c.rule)
		}
	}
	ex := Explain(p, Call{Tool: toolSyncIn, Args: map[string]any{"sandbox_id": "s", "local_path": home}})
	if want := `local_path "` + home + `" holds what "~/.ssh/**" names`; !strings.Contains(ex, want) {
		t.Errorf("explain does not say why a parent is denied (%s):\n%s", want, ex)
	}
}

func TestLocalPathPatternsChecked(t *testing.T) {
	t.Setenv("HOME", filepath.ToSlash(t.TempDir()))
	for pat, want := range map[string]string{
		"src/**":        "is relative",
		"/a/../b":       "not a clean path",
		"~/x/":          "not a clean path",
		"/a/[":          "bad local_path pattern",
		"~someone/x/**": "is relative",
	} {
		_, err := testTools.Parse("p.yaml", []byte(`default_action: allow
rules:
  - id: r
    when: { target: e2b_sync_in, local_path: "`+pat+`" }
    then: { decision: deny }
`))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("pattern %q: %v, want an error saying %q", pat, err, want)
		}
	}
	_, err := testTools.Parse("p.yaml", []byte(`default_action: allow
rules:
  - id: r
    when: { target: e2b_exec, local_path: "/x/**" }
    then: { decision: deny }
`))
	if err == nil || !strings.Contains(err.Error(), `condition "local_path" can never match`) {
		t.Errorf("local_path on a tool without one: %v", err)
	}
}

// A home directory whose name holds glob characters is matched as written.
func TestLocalPathHomeIsLiteral(t *testing.T) {
	home := filepath.Join(t.TempDir(), "a[b]*")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	p, err := testTools.Parse("p.yaml", []byte(`default_action: allow
rules:
  - id: r
    when: { target: e2b_sync_in, local_path: "~/private" }
    then: { decision: deny }
`))
	if err != nil {
		t.Fatal(err)
	}
	for local, want := range map[string]Action{home + "/private": Deny, filepath.Dir(home) + "/ab*/private": Allow} {
		if got := p.Evaluate(Call{Tool: toolSyncIn, Args: map[string]any{"local_path": local}}).Action; got != want {
			t.Errorf("%s: %s, want %s", local, got, want)
		}
	}
}
