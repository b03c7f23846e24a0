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

var update = flag.Bool("update", false, "rewrite the generated parts of README.md and the bundle's manifest")

const readmePath = "../README.md"

// generated checks (or with -update rewrites) the text between <!-- NAME:begin --> and <!-- NAME:end --> in
// README.md.
func generated(t *testing.T, name, want string) {
	t.Helper()
	data, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	begin, end := "<!-- "+name+":begin -->\n", "<!-- "+name+":end -->"
	doc := string(data)
	i, j := strings.Index(doc, begin), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("README.md lacks the markers %q and %q", strings.TrimSpace(begin), end)
	}
	got := doc[i+len(begin) : j]
	if got == want {
		return
	}
	if *update {
		doc = doc[:i+len(begin)] + want + doc[j:]
		if err := os.WriteFile(readmePath, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote the %s section of README.md", name)
		return
	}
	t.Errorf("README.md's %s section is stale; regenerate it with\n\tgo test ./tests -run %s -update\n--- README has:\n%s\n--- want:\n%s",
		name, t.Name(), got, want)
}

// The tool table in README.md is generated from the tool definitions themselves.
func TestReadmeTools(t *testing.T) {
	generated(t, "tools", tools.MarkdownTable(tools.All(tools.Deps{})))
}

// The built-in policy shown in README.md is policy.DefaultYAML itself.
func TestReadmePolicy(t *testing.T) {
	generated(t, "policy", fmt.Sprintf("```yaml\n%s```\n", policy.DefaultYAML))
}

var yamlBlock = regexp.MustCompile("(?s)```yaml\n(.*?)```")

// egressFileExample marks the README's yaml blocks that are egress files rather than policies.
const egressFileExample = "# --egress-file"

// Every policy example in README.md is a valid policy, and every egress file example a valid egress file, so a
// reader can copy them.
func TestReadmePolicyExamplesParse(t *testing.T) {
	data, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	blocks := yamlBlock.FindAllStringSubmatch(string(data), -1)
	if len(blocks) < 2 {
		t.Fatalf("README.md has %d yaml blocks; want the built-in policy and at least one example", len(blocks))
	}
	for i, b := range blocks {
		if strings.HasPrefix(b[1], egressFileExample) {
			path := filepath.Join(t.TempDir(), fmt.Sprintf("egress-%d.yaml", i+1))
			if err := os.WriteFile(path, []byte(b[1]), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := egress.LoadScopes(path); err != nil {
				t.Errorf("README yaml block %d: %v", i+1, err)
			}
			continue
		}
		if _, err := tools.PolicyTools().Parse(fmt.Sprintf("README yaml block %d", i+1), []byte(b[1])); err != nil {
			t.Errorf("%v", err)
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

// The README's table of conditions names, for each condition on an argument, exactly the tools the policy applies it
// to: the tools whose definitions give that argument to the policy.
func TestReadmeConditionTools(t *testing.T) {
	data, err := os.ReadFile(readmePath)
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
			t.Errorf("README.md: condition %s applies to %v, the tools give it to %v", m[1], got, expected)
		}
	}
	if seen != len(kinds) {
		t.Errorf("README.md's table of conditions has %d of the %d conditions on arguments", seen, len(kinds))
	}
}
