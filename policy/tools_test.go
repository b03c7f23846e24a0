package policy

import (
	"slices"
	"testing"
)

// testToolList, the catalogue the tests are written against, is generated from the tools (tools_gen_test.go).
var testTools = mustTools(testToolList)

func mustTools(list []Tool) Tools {
	ts, err := NewTools(list)
	if err != nil {
		panic(err)
	}
	return ts
}

func toolNames() []string { return testTools.Names() }

// Parse, Default and NewHolder against the test catalogue.
func Parse(name string, data []byte) (*Policy, error) { return testTools.Parse(name, data) }
func Default() *Policy                                { return testTools.Default() }
func NewHolder(path string) (*Holder, error)          { return testTools.NewHolder(path) }

// A tool the catalogue gains is governed by every condition on the arguments it declares, with no edit to the
// policy: a path rule catches a new tool's path, and a rule naming it parses.
func TestNewToolIsGoverned(t *testing.T) {
	ts := mustTools(append(slices.Clone(testToolList), Tool{Name: "e2b_preview_url", Args: map[Arg]string{ArgPath: "file"}}))
	p, err := ts.Parse("p.yaml", []byte(`default_action: allow
rules:
  - id: no-etc
    when: { path: "/etc/**" }
    then: { decision: deny, reason: no }
  - id: previews-ask
    when: { target: e2b_preview_url }
    then: { decision: require_approval, reason: ask }
`))
	if err != nil {
		t.Fatal(err)
	}
	if d := p.Evaluate(Call{Tool: "e2b_preview_url", Args: map[string]any{"file": "../../etc/shadow"}}); d.RuleID != "no-etc" {
		t.Errorf("new tool's path: %+v, want rule no-etc", d)
	}
	if d := p.Evaluate(Call{Tool: "e2b_preview_url", Args: map[string]any{"file": "app.html"}}); d.RuleID != "previews-ask" {
		t.Errorf("new tool: %+v, want rule previews-ask", d)
	}
	if _, err := testTools.Parse("p.yaml", []byte("default_action: allow\nrules:\n  - id: x\n    when: { target: e2b_preview_url }\n    then: { decision: allow }\n")); err == nil {
		t.Error("a rule on a tool not in the catalogue parsed")
	}
}

func TestNewToolsRefusesBadCatalogues(t *testing.T) {
	for name, list := range map[string][]Tool{
		"no name":        {{}},
		"twice":          {{Name: "a"}, {Name: "a"}},
		"unknown kind":   {{Name: "a", Args: map[Arg]string{"colour": "c"}}},
		"action no enum": {{Name: "a", Args: map[Arg]string{ArgAction: "action"}}},
		"grants unknown": {{Name: "a", Grants: "b"}},
	} {
		if _, err := NewTools(list); err == nil {
			t.Errorf("%s: NewTools accepted %+v", name, list)
		}
	}
}
