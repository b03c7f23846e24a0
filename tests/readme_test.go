package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/e2b-mcp/e2b-mcp/egress"
	"github.com/e2b-mcp/e2b-mcp/tools"
)

// The documents whose text these tests check against the code.
const (
	readmePath        = "../README.md"
	policyDocPath     = "../docs/policy.md"
	egressDocPath     = "../docs/egress-credentials.md"
	teamServerDocPath = "../docs/team-server.md"
)

// The generated parts of README.md (the table of tools) and docs/policy.md (the built-in policy, the tools each
// condition applies to) are written by make generate and checked by scripts/generate's test.

var yamlBlock = regexp.MustCompile("(?s)```yaml\n(.*?)```")

// egressFileExample marks the yaml blocks that are egress files rather than policies.
const egressFileExample = "# --egress-file"

// Every yaml block of the documentation is a valid policy, or, marked as one, a valid egress file, so a reader can
// copy them; docs/policy.md holds the built-in policy and at least one example, docs/egress-credentials.md an
// egress file.
func TestDocYAMLExamplesParse(t *testing.T) {
	t.Parallel()
	want := map[string]int{policyDocPath: 2, egressDocPath: 1}
	docs, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range append([]string{readmePath}, docs...) {
		data, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		blocks := yamlBlock.FindAllStringSubmatch(string(data), -1)
		if len(blocks) < want[doc] {
			t.Errorf("%s has %d yaml blocks; want at least %d", doc, len(blocks), want[doc])
		}
		for i, b := range blocks {
			where := fmt.Sprintf("%s yaml block %d", doc, i+1)
			if strings.HasPrefix(b[1], egressFileExample) {
				path := filepath.Join(t.TempDir(), fmt.Sprintf("egress-%d.yaml", i+1))
				if err := os.WriteFile(path, []byte(b[1]), 0o600); err != nil {
					t.Fatal(err)
				}
				if _, err := egress.LoadScopes(path); err != nil {
					t.Errorf("%s: %v", where, err)
				}
				continue
			}
			if _, err := tools.PolicyTools().Parse(where, []byte(b[1])); err != nil {
				t.Errorf("%v", err)
			}
		}
	}
}

var jsonBlock = regexp.MustCompile("(?s)```json\n(.*?)```")

// The configuration snippets in README.md and examples/claude-config.json are valid JSON, and the example starts
// the server the way the README says.
func TestReadmeAndExampleConfigs(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	blocks := jsonBlock.FindAllStringSubmatch(string(data), -1)
	if len(blocks) < 3 {
		t.Fatalf("README.md has %d json blocks; want the Claude Desktop, Cursor and VS Code configurations", len(blocks))
	}
	for i, b := range blocks {
		var v any
		if err := json.Unmarshal([]byte(b[1]), &v); err != nil {
			t.Errorf("README json block %d: %v", i+1, err)
		}
	}

	raw, err := os.ReadFile("../examples/claude-config.json")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		MCPServers map[string]struct {
			Command string   `json:"command"`
			Args    []string `json:"args"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatalf("examples/claude-config.json: %v", err)
	}
	e, found := cfg.MCPServers["e2b"]
	if !found || e.Command != "e2b-mcp" || len(e.Args) == 0 || e.Args[0] != "serve" {
		t.Errorf("examples/claude-config.json does not start `e2b-mcp serve`: %+v", cfg)
	}
	if !strings.Contains(string(data), strings.TrimSpace(string(raw))) {
		t.Errorf("README.md does not show examples/claude-config.json as it is")
	}
}
