package policy

import (
	"slices"
	"testing"
)

// The tools policy tests are written against: the catalogue the tools package describes (TestCatalogueIsTools
// keeps the two the same), named here because policy cannot import the package above it.
const (
	toolCreateSandbox    = "e2b_create_sandbox"
	toolExec             = "e2b_exec"
	toolReadFile         = "e2b_read_file"
	toolWriteFile        = "e2b_write_file"
	toolListSandboxes    = "e2b_list_sandboxes"
	toolManageSandbox    = "e2b_manage_sandbox"
	toolCheckpoint       = "e2b_checkpoint_sandbox"
	toolListCheckpoints  = "e2b_list_checkpoints"
	toolForkSandbox      = "e2b_fork_sandbox"
	toolDeleteCheckpoint = "e2b_delete_checkpoint"
	toolCheckpointPolicy = "e2b_set_checkpoint_policy"
	toolDownloadURL      = "e2b_download_url"
	toolUploadURL        = "e2b_upload_url"
	toolGetURL           = "e2b_get_url"
	toolListProcesses    = "e2b_list_processes"
	toolReadOutput       = "e2b_read_output"
	toolSendInput        = "e2b_send_input"
	toolStopProcess      = "e2b_stop_process"
	toolRunCode          = "e2b_run_code"
	toolCodeContext      = "e2b_code_context"
	toolSyncIn           = "e2b_sync_in"
	toolSyncOut          = "e2b_sync_out"
)

var testToolList = []Tool{
	{Name: toolCreateSandbox, Args: map[Arg]string{ArgTemplate: "template", ArgTimeoutSeconds: "timeout_seconds", ArgUploads: "upload_files"}},
	{Name: toolExec, Args: map[Arg]string{ArgCommand: "command", ArgTimeoutMillis: "timeout_ms"}},
	{Name: toolReadFile, Args: map[Arg]string{ArgPath: "path"}},
	{Name: toolWriteFile, Args: map[Arg]string{ArgPath: "path"}},
	{Name: toolListSandboxes},
	{Name: toolManageSandbox, Args: map[Arg]string{ArgAction: "action", ArgTimeoutSeconds: "timeout_seconds"},
		Actions: []string{"pause", "resume", "delete"}},
	{Name: toolCheckpoint},
	{Name: toolListCheckpoints},
	{Name: toolForkSandbox, Args: map[Arg]string{ArgCount: "count"}},
	{Name: toolDeleteCheckpoint},
	{Name: toolCheckpointPolicy},
	{Name: toolDownloadURL, Args: map[Arg]string{ArgPath: "path"}, Grants: toolReadFile},
	{Name: toolUploadURL, Args: map[Arg]string{ArgPath: "path"}, Grants: toolWriteFile},
	{Name: toolGetURL},
	{Name: toolListProcesses},
	{Name: toolReadOutput},
	{Name: toolSendInput, Args: map[Arg]string{ArgCommand: "data"}},
	{Name: toolStopProcess},
	{Name: toolRunCode, Args: map[Arg]string{ArgCommand: "code", ArgTimeoutMillis: "timeout_ms"}},
	{Name: toolCodeContext, Args: map[Arg]string{ArgAction: "action"}, Actions: []string{"create", "list", "restart", "remove"}},
	{Name: toolSyncIn, Args: map[Arg]string{ArgPath: "remote_path"}},
	{Name: toolSyncOut, Args: map[Arg]string{ArgPath: "remote_path", ArgAction: "action"}, Actions: []string{"patch", "apply"}},
}

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
