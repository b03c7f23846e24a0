package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// listed is what a client sees of the tools, in both protocol eras.
func listed(t *testing.T, era string) []mcp.Tool {
	t.Helper()
	e := &env{deps: Deps{}}
	s := e.connect(t, era, Caller{Owner: "alice", Session: "main"})
	res, err := s.c.ListTools(context.Background(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return res.Tools
}

// snapshotDir holds one snapshot per tool of its name, description, schemas and annotations as clients receive
// them, which make generate writes from the definitions (scripts/generate): a change to the contract is always
// deliberate, and shows in review as the diff of one tool's file.
const snapshotDir = "testdata/tools"

// TestToolsGolden checks what clients list of each tool, in both protocol eras, against its snapshot, and that
// every snapshot is a tool's.
func TestToolsGolden(t *testing.T) {
	t.Parallel()
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			listedNames := map[string]bool{}
			for _, tool := range listed(t, era) {
				listedNames[tool.Name] = true
				got, err := json.MarshalIndent(tool, "", "  ")
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, '\n')
				path := filepath.Join(snapshotDir, tool.Name+".json")
				want, err := os.ReadFile(path)
				if err != nil {
					t.Errorf("%v: run make generate", err)
					continue
				}
				if !bytes.Equal(want, got) {
					t.Errorf("%s lists differently from %s; if the change is intended, run make generate\n%s",
						tool.Name, path, firstDiff(string(want), string(got)))
				}
			}
			files, err := os.ReadDir(snapshotDir)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range files {
				if name, ok := strings.CutSuffix(f.Name(), ".json"); !ok || !listedNames[name] {
					t.Errorf("%s is no listed tool's snapshot: run make generate", filepath.Join(snapshotDir, f.Name()))
				}
			}
		})
	}
}

// firstDiff names the first line where got and want part.
func firstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := range max(len(w), len(g)) {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return fmt.Sprintf("line %d:\n  want: %s\n  got:  %s", i+1, wl, gl)
		}
	}
	return ""
}

// TestInventory checks what every tool must have: the fixed name, a description, object input and output
// schemas, and all four annotation hints set explicitly.
func TestInventory(t *testing.T) {
	t.Parallel()
	for _, era := range eras {
		t.Run(era, func(t *testing.T) {
			tools := listed(t, era)
			var names []string
			for _, tool := range tools {
				names = append(names, tool.Name)
				if len(strings.TrimSpace(tool.Description)) < 40 {
					t.Errorf("%s: description %q is too thin for a model to use", tool.Name, tool.Description)
				}
				for what, schema := range map[string]any{"input": tool.InputSchema, "output": tool.OutputSchema} {
					raw, _ := json.Marshal(schema)
					var s struct {
						Type       string          `json:"type"`
						Properties json.RawMessage `json:"properties"`
					}
					if err := json.Unmarshal(raw, &s); err != nil || s.Type != "object" || s.Properties == nil {
						t.Errorf("%s: %s schema is not an object schema with properties: %s", tool.Name, what, raw)
					}
					if bytes.Contains(raw, []byte(`"$ref"`)) || bytes.Contains(raw, []byte(`"$defs"`)) {
						t.Errorf("%s: %s schema has references: %s", tool.Name, what, raw)
					}
				}
				a := tool.Annotations
				for hint, v := range map[string]*bool{"readOnlyHint": a.ReadOnlyHint, "destructiveHint": a.DestructiveHint,
					"idempotentHint": a.IdempotentHint, "openWorldHint": a.OpenWorldHint} {
					if v == nil {
						t.Errorf("%s: %s is not set", tool.Name, hint)
					}
				}
				if a.ReadOnlyHint != nil && *a.ReadOnlyHint && a.DestructiveHint != nil && *a.DestructiveHint {
					t.Errorf("%s: read-only and destructive at once", tool.Name)
				}
			}
			// mcp-go lists tools sorted by name, once each; All keeps the contract's order, which the generated
			// README table and bundle manifest pin.
			if want := slices.Sorted(slices.Values(Names())); !slices.Equal(names, want) {
				t.Fatalf("tools listed are %v, All has %v", names, want)
			}
		})
	}
}

// TestDefaultsFollowConfig: the schema defaults and descriptions say what the server will actually do.
func TestDefaultsFollowConfig(t *testing.T) {
	t.Parallel()
	all := All(Deps{Config: Config{DefaultTemplate: "python-3", DefaultTimeoutSeconds: 120}})
	raw := string(all[0].Tool.RawInputSchema)
	wantContains(t, raw, `"default":"python-3"`, `"default":120`)
	wantContains(t, all[0].Tool.Description, `template "python-3"`, "timeout_seconds 120")
}
