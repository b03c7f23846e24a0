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

// TestAnnotationsTruthful pins the hints that matter to clients deciding what to confirm with the human.
func TestAnnotationsTruthful(t *testing.T) {
	type h struct{ readOnly, destructive, idempotent, openWorld bool }
	want := map[string]h{
		"e2b_create_sandbox":     {false, false, false, true},
		"e2b_exec":               {false, true, false, true},
		"e2b_read_file":          {true, false, true, true},
		"e2b_write_file":         {false, true, false, true},
		"e2b_list_sandboxes":     {true, false, true, true},
		"e2b_manage_sandbox":     {false, true, false, true},
		"e2b_checkpoint_sandbox": {false, false, false, true},
		"e2b_list_checkpoints":   {true, false, true, false},
		"e2b_fork_sandbox":       {false, false, false, true},
		"e2b_delete_checkpoint":  {false, true, true, true},
		// It changes only the server's record, the same way each time, and asks nothing of E2B.
		"e2b_set_checkpoint_policy": {false, false, true, false},
		// A download link reads; an upload link lets someone replace a file. Each call signs a new link.
		"e2b_download_url": {true, false, false, true},
		"e2b_upload_url":   {false, true, false, true},
		// A preview link shows what a port serves; each call signs a new link.
		"e2b_get_url":        {true, false, false, true},
		"e2b_list_processes": {true, false, true, true},
		"e2b_read_output":    {true, false, true, true},
		// Input to a running program does whatever the program does with it, as a command would.
		"e2b_send_input": {false, true, false, true},
		// Stopping kills a process tree; stopping one already gone changes nothing more.
		"e2b_stop_process": {false, true, true, true},
		// Code does whatever it does, as a command would; a context's restart or removal loses its state.
		"e2b_run_code":     {false, true, false, true},
		"e2b_code_context": {false, true, false, true},
		// A sync in replaces the sandbox's copy of the tree; sending the same tree again changes nothing more.
		"e2b_sync_in": {false, true, true, true},
		// A sync out may write into the local tree (apply), and a second apply finds its base changed.
		"e2b_sync_out": {false, true, false, true},
	}
	all := All(Deps{})
	if len(all) != len(want) {
		t.Errorf("%d tools, %d with pinned hints: pin the hints of every tool", len(all), len(want))
	}
	for _, st := range all {
		a := st.Tool.Annotations
		got := h{*a.ReadOnlyHint, *a.DestructiveHint, *a.IdempotentHint, *a.OpenWorldHint}
		if got != want[st.Tool.Name] {
			t.Errorf("%s: hints %+v, want %+v", st.Tool.Name, got, want[st.Tool.Name])
		}
	}
}

// TestDefaultsFollowConfig: the schema defaults and descriptions say what the server will actually do.
func TestDefaultsFollowConfig(t *testing.T) {
	all := All(Deps{Config: Config{DefaultTemplate: "python-3", DefaultTimeoutSeconds: 120}})
	raw := string(all[0].Tool.RawInputSchema)
	wantContains(t, raw, `"default":"python-3"`, `"default":120`)
	wantContains(t, all[0].Tool.Description, `template "python-3"`, "timeout_seconds 120")
}
