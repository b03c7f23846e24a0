package policy

import "testing"

// Input sent to a running program is judged as a command would be: a rule on commands catches it, and a rule on
// e2b_exec alone does not.
func TestInputIsJudgedAsACommand(t *testing.T) {
	p, err := Parse("p.yaml", []byte(`default_action: allow
rules:
  - id: no-sudo
    when: { command: "*sudo *" }
    then: { decision: deny, reason: no root }
`))
	if err != nil {
		t.Fatal(err)
	}
	if d := p.Evaluate(Call{Tool: toolSendInput, Args: map[string]any{"data": "sudo rm -rf /\n"}}); d.RuleID != "no-sudo" {
		t.Errorf("input: %+v, want rule no-sudo", d)
	}
	if d := p.Evaluate(Call{Tool: toolSendInput, Args: map[string]any{"data": "ada\n"}}); d.RuleID == "no-sudo" {
		t.Errorf("harmless input: %+v", d)
	}
}
