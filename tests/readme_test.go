package tests

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/e2b-mcp/e2b-mcp/egress"
	"github.com/e2b-mcp/e2b-mcp/policy"
	"github.com/e2b-mcp/e2b-mcp/tools"
)

var update = flag.Bool("update", false, "rewrite the generated parts of the documentation and the bundle's manifest")

// The documents whose text these tests check against the code.
const (
	readmePath        = "../README.md"
	policyDocPath     = "../docs/policy.md"
	egressDocPath     = "../docs/egress-credentials.md"
	teamServerDocPath = "../docs/team-server.md"
)

// generated checks (or with -update rewrites) the text between <!-- NAME:begin --> and <!-- NAME:end --> in the
// document at path.
func generated(t *testing.T, path, name, want string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	begin, end := "<!-- "+name+":begin -->\n", "<!-- "+name+":end -->"
	doc := string(data)
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the markers %q and %q", path, strings.TrimSpace(begin), end)
	}
	got := doc[i+len(begin) : j]
	if got == want {
		return
	}
	if *update {
		doc = doc[:i+len(begin)] + want + doc[j:]
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote the %s section of %s", name, path)
		return
	}
	t.Errorf("%s's %s section is stale; regenerate it with\n\tgo test ./tests -run '^%s$' -update\n--- it has:\n%s\n--- want:\n%s",
		path, name, t.Name(), got, want)
}

// The tool table in README.md is generated from the tool definitions themselves.
func TestReadmeTools(t *testing.T) {
	generated(t, readmePath, "tools", tools.MarkdownTable(tools.All(tools.Deps{})))
}

// The built-in policy shown in docs/policy.md is policy.DefaultYAML itself.
func TestPolicyDocBuiltin(t *testing.T) {
	generated(t, policyDocPath, "policy", fmt.Sprintf("```yaml\n%s```\n", policy.DefaultYAML))
}

var yamlBlock = regexp.MustCompile("(?s)```yaml\n(.*?)```")

// egressFileExample marks the yaml blocks that are egress files rather than policies.
const egressFileExample = "# --egress-file"

// Every yaml block of the documentation is a valid policy, or, marked as one, a valid egress file, so a reader can
// copy them; docs/policy.md holds the built-in policy and at least one example, docs/egress-credentials.md an
// egress file.
func TestDocYAMLExamplesParse(t *testing.T) {
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

// docs/policy.md's table of conditions names, for each condition on an argument, exactly the tools the policy
// applies it to: the tools whose definitions give that argument to the policy.
func TestPolicyDocConditionTools(t *testing.T) {
	data, err := os.ReadFile(policyDocPath)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string][]policy.Arg{
		"command":         {policy.ArgCommand},
		"path":            {policy.ArgPath, policy.ArgUploads},
		"action":          {policy.ArgAction},
		"template":        {policy.ArgTemplate},
		"count":           {policy.ArgCount},
		"timeout_seconds": {policy.ArgTimeoutSeconds, policy.ArgTimeoutMillis},
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\|.*\\| ([^|]*) \\|$")
	toolName := regexp.MustCompile("`(e2b_[a-z_]+)`")
	catalogue := tools.PolicyTools()
	seen := 0
	for _, m := range row.FindAllStringSubmatch(string(data), -1) {
		want, ok := kinds[m[1]]
		if !ok {
			continue
		}
		seen++
		var got []string
		for _, n := range toolName.FindAllStringSubmatch(m[2], -1) {
			got = append(got, n[1])
		}
		slices.Sort(got)
		expected := slices.Sorted(slices.Values(catalogue.With(want...)))
		if !slices.Equal(got, expected) {
			t.Errorf("docs/policy.md: condition %s applies to %v, the tools give it to %v", m[1], got, expected)
		}
	}
	if seen != len(kinds) {
		t.Errorf("docs/policy.md's table of conditions has %d of the %d conditions on arguments", seen, len(kinds))
	}
}
