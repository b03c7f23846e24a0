package policy

import (
	"strings"
	"testing"
)

// A download or upload link is decided as strictly as the read or write it grants: rules about e2b_read_file and
// e2b_write_file hold for links without naming them, and rules naming the link tools apply as well.
func TestLinksDecidedAsTheirRead(t *testing.T) {
	p, err := Parse("links.yaml", []byte(`
default_action: allow
rules:
  - id: no-etc
    when: { target: [e2b_read_file, e2b_write_file], path: "/etc/**" }
    then: { decision: deny, reason: system files }
  - id: ask-before-keys
    when: { target: e2b_read_file, path: "**/*.pem" }
    then: { decision: require_approval, reason: keys }
  - id: no-upload-links-to-bin
    when: { target: e2b_upload_url, path: "/home/user/bin/**" }
    then: { decision: deny, reason: no executables from outside }
  - id: links-allowed
    when: { target: [e2b_download_url, e2b_upload_url] }
    then: { decision: allow }
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		tool, path string
		want       Action
		rule       string
	}{
		{"e2b_download_url", "/etc/shadow", Deny, "no-etc"},
		{"e2b_download_url", "../../etc/shadow", Deny, "no-etc"},
		{"e2b_upload_url", "/etc/cron.d/x", Deny, "no-etc"},
		{"e2b_download_url", "certs/server.pem", RequireApproval, "ask-before-keys"},
		{"e2b_upload_url", "certs/server.pem", Allow, "links-allowed"}, // the approval rule is about reads
		{"e2b_upload_url", "bin/tool", Deny, "no-upload-links-to-bin"},
		{"e2b_download_url", "bin/tool", Allow, "links-allowed"},
		{"e2b_download_url", "plot.png", Allow, "links-allowed"},
	} {
		d := p.Evaluate(Call{Tool: tt.tool, Args: args("sandbox_id", "s", "path", tt.path, "expires_in_seconds", 60.0)})
		if d.Action != tt.want || d.Rule() != tt.rule {
			t.Errorf("%s %s: %s by %s, want %s by %s", tt.tool, tt.path, d.Action, d.Rule(), tt.want, tt.rule)
		}
	}
	out := Explain(p, Call{Tool: "e2b_download_url", Args: args("sandbox_id", "s", "path", "/etc/shadow")})
	for _, want := range []string{"grants:   e2b_read_file of the same path, which the policy decides deny (rule no-etc)", "decision: deny", "rule:     no-etc"} {
		if !strings.Contains(out, want) {
			t.Errorf("explain lacks %q:\n%s", want, out)
		}
	}

	// Under a deny-by-default policy a link needs its own allow rule, even where the read is allowed.
	strict, err := Parse("strict.yaml", []byte(`
default_action: deny
rules:
  - id: reads
    when: { target: e2b_read_file }
    then: { decision: allow }
`))
	if err != nil {
		t.Fatal(err)
	}
	if d := strict.Evaluate(Call{Tool: "e2b_download_url", Args: args("sandbox_id", "s", "path", "a.txt")}); d.Action != Deny {
		t.Errorf("a link no rule allows: %s", d.Action)
	}
}
