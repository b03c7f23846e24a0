package policy

import (
	_ "embed"
	"fmt"
)

// DefaultYAML is the built-in policy, in force when no policy file is given: every
// sandbox tool is allowed, and the two calls that destroy work for good ask a human.
//
//go:embed default.yaml
var DefaultYAML string

// DefaultName is the name the built-in policy carries in messages.
const DefaultName = "built-in policy"

// Default returns the built-in policy, parsed from DefaultYAML.
func (ts Tools) Default() *Policy {
	p, err := ts.Parse(DefaultName, []byte(DefaultYAML))
	if err != nil {
		// DefaultYAML is fixed at build time and covered by tests against the tools' catalogue; failing here is a
		// build defect.
		panic(fmt.Sprintf("policy: built-in policy does not parse: %v", err))
	}
	return p
}
