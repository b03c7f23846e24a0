package policy_test

import (
	"reflect"
	"testing"

	"github.com/e2b-mcp/e2b-mcp/policy"
	"github.com/e2b-mcp/e2b-mcp/tools"
)

// The policy's tests are written against the catalogue the tools describe, which make generate writes out for
// them (tools_gen_test.go): what it wrote means the catalogue tools.PolicyTools gives.
func TestCatalogueIsTools(t *testing.T) {
	got := tools.PolicyTools()
	want, err := policy.NewTools(policy.TestToolList)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the tools describe themselves to the policy as\n%+v\nthe policy's tests as\n%+v\nrun make generate", got, want)
	}
}

// The built-in policy parses against the tools' own catalogue, so every tool it names exists.
func TestDefaultParsesAgainstTools(t *testing.T) {
	if _, err := tools.PolicyTools().Parse(policy.DefaultName, []byte(policy.DefaultYAML)); err != nil {
		t.Fatal(err)
	}
}
