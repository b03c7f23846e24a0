package policy

import (
	"encoding/json"
	"strings"
	"testing"
)

// fuzzCalls exercise every argument extractor, with well-formed and odd arguments.
func fuzzCalls() []Call {
	odd := map[string]any{
		"command": 3.0, "path": []any{"x"}, "action": nil, "template": map[string]any{},
		"count": "2", "timeout_seconds": true, "timeout_ms": json.Number("x"),
		"upload_files": []any{nil, 1.0, map[string]any{"sandbox_path": nil}},
	}
	calls := []Call{
		{Tool: toolExec, Args: map[string]any{"sandbox_id": "s", "command": "git push --force", "timeout_ms": 5000.0}},
		{Tool: toolReadFile, Args: map[string]any{"path": "/home/user/../../etc/passwd"}},
		{Tool: toolWriteFile, Args: map[string]any{"path": "", "content": strings.Repeat("x", 1000)}},
		{Tool: toolCreateSandbox, Args: map[string]any{"template": "base", "timeout_seconds": 3600.0,
			"upload_files": []any{map[string]any{"session_path": "a", "sandbox_path": "/home/user/a"}}}},
		{Tool: toolManageSandbox, Args: map[string]any{"action": "delete", "timeout_seconds": -1.0}},
		{Tool: toolForkSandbox, Args: map[string]any{"count": 1e308}},
		{Tool: toolListSandboxes},
		{Tool: ""},
		{Tool: "\xff"},
	}
	for _, tool := range toolNames() {
		calls = append(calls, Call{Tool: tool, Args: odd})
	}
	return calls
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(DefaultYAML))
	f.Add([]byte(`default_action: deny
rules:
  - id: allow-reads
    when: { targets: [e2b_read_file, e2b_list_sandboxes] }
    then: { decision: allow }
  - id: no-force-push
    when: { target: e2b_exec, command: "git push*--force*" }
    then: { decision: deny, reason: force pushes are not allowed }
  - id: delete-needs-approval
    when: { target: e2b_manage_sandbox, action: delete }
    then: { decision: require_approval, reason: deleting a sandbox needs approval }
  - id: p
    when: { path: ["/etc/**", "**/.env", "/a/[!b]?/**/c"], template: "x*" }
    then: { decision: deny }
  - id: n
    when: { count: {min: 1, max: 3}, target: "e2b_*" }
    then: { decision: allow }
  - id: t
    when: { timeout_seconds: 60 }
    then: { decision: allow }
`))
	f.Add([]byte("default_action: &a deny\nrules: [*a]\n"))
	f.Add([]byte("rules:\n  - {id: x, when: {command: '[z-a\\\\'}, then: {decision: allow}}\n"))
	f.Add([]byte("---\n---\n"))
	f.Add([]byte("default_action: allow\nrules:\n  - {id: r, when: {path: '**'}, then: {decision: deny}}\n"))
	calls := fuzzCalls()
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse("fuzz.yaml", data)
		if err != nil {
			if p != nil {
				t.Fatal("Parse returned a policy and an error")
			}
			if !strings.HasPrefix(err.Error(), "fuzz.yaml") {
				t.Fatalf("error without the file name: %v", err)
			}
			return
		}
		for _, c := range calls {
			d := p.Evaluate(c)
			if !validAction(d.Action) {
				t.Fatalf("Evaluate gave action %q", d.Action)
			}
			if ex := Explain(p, c); !strings.Contains(ex, "decision: "+string(d.Action)) {
				t.Fatalf("Explain disagrees with Evaluate (%s):\n%s", d.Action, ex)
			}
		}
	})
}

func FuzzGlob(f *testing.F) {
	for _, s := range [][2]string{
		{"/etc/**", "/etc/passwd"}, {"**/.env", "a/.env"}, {"[!a-c]x", "dx"}, {`\*`, "*"},
		{"git push*--force*", "git push --force"}, {"/a/**/b/**", "/a/b"}, {"[", ""}, {"**", ""},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pat, s string) {
		for _, mode := range []globMode{globText, globPath} {
			g, err := compileGlob(pat, mode)
			if err != nil {
				continue
			}
			g.match(s)
			// A pattern without metacharacters matches exactly itself.
			if !strings.ContainsAny(pat, `*?[\`) && g.match(s) != (pat == s) {
				t.Fatalf("literal %q (mode %d) vs %q: match=%v", pat, mode, s, g.match(s))
			}
		}
	})
}
