package policy

import "fmt"

// DefaultYAML is the built-in policy, in force when no policy file is given: every
// sandbox tool is allowed, and the two calls that destroy work for good ask a human.
const DefaultYAML = `# e2b-mcp built-in policy (used when no --policy file is given).
default_action: allow
rules:
  - id: delete-sandbox-needs-approval
    when: { target: e2b_manage_sandbox, action: delete }
    then: { decision: require_approval, reason: deleting a sandbox destroys its files and processes }
  - id: delete-checkpoint-needs-approval
    when: { target: e2b_delete_checkpoint }
    then: { decision: require_approval, reason: a deleted checkpoint cannot be restored }
  - id: allow-sandbox-tools
    when: { target: "e2b_*" }
    then: { decision: allow }
`

// DefaultName is the name the built-in policy carries in messages.
const DefaultName = "built-in policy"

// Default returns the built-in policy, parsed from DefaultYAML.
func Default() *Policy {
	p, err := Parse(DefaultName, []byte(DefaultYAML))
	if err != nil {
		// DefaultYAML is a constant covered by tests; failing here is a build defect.
		panic(fmt.Sprintf("policy: built-in policy does not parse: %v", err))
	}
	return p
}
