package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/audit"
	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
)

// syncFixture is a server with a workspace root of its own, holding a project directory of two files.
func syncFixture(t *testing.T, policy string) (f *fixture, project string) {
	t.Helper()
	root := t.TempDir()
	project = filepath.Join(root, "project")
	if err := os.MkdirAll(project, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"a.txt": strings.Repeat("contents-of-a\n", 100), "b.txt": "b\n"} {
		if err := os.WriteFile(filepath.Join(project, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f = newFixture(t, fixtureOpts{policy: policy, mutate: func(c *Config, _ *e2btest.Server) {
		c.Tools.Workspaces = []string{root}
		c.Tools.PatchDir = t.TempDir()
	}})
	return f, project
}

// lastEntry is the audit log's last entry of a tool.
func lastEntry(t *testing.T, f *fixture, tool string) audit.Entry {
	t.Helper()
	entries := f.auditEntries(t)
	for i := len(entries) - 1; i >= 0; i-- {
		if entries[i].Tool == tool {
			return entries[i]
		}
	}
	t.Fatalf("no %s in the audit log", tool)
	return audit.Entry{}
}

// The audit log says how much a sync moved each way, and nothing of what.
func TestSyncTransferInTheAuditLog(t *testing.T) {
	f, project := syncFixture(t, "")
	c := connect(t, f.srv, mcp.ProtocolVersion20251125, nil)
	id := createSandbox(t, c)
	in := mustOK(t, c, "e2b_sync_in", map[string]any{"sandbox_id": id, "local_path": project})
	got := lastEntry(t, f, "e2b_sync_in").Transfer
	if got == nil || got.FilesIn != 2 || float64(got.BytesIn) < in["bytes_sent"].(float64) || got.FilesOut != 0 {
		t.Fatalf("sync in recorded %+v, want 2 files in and at least the %v bytes sent", got, in["bytes_sent"])
	}
	mustOK(t, c, "e2b_exec", map[string]any{"sandbox_id": id, "command": "echo changed-in-the-sandbox >> " +
		in["remote_path"].(string) + "/b.txt"})
	mustOK(t, c, "e2b_sync_out", map[string]any{"sandbox_id": id, "remote_path": in["remote_path"],
		"local_path": project})
	got = lastEntry(t, f, "e2b_sync_out").Transfer
	if got == nil || got.FilesOut != 1 || got.BytesOut < int64(len("b\nchanged-in-the-sandbox\n")) || got.FilesIn != 0 {
		t.Fatalf("sync out recorded %+v, want 1 file out with its bytes", got)
	}
	raw, err := os.ReadFile(filepath.Join(f.dir, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, content := range []string{"contents-of-a", "changed-in-the-sandbox"} {
		if strings.Contains(strings.ReplaceAll(string(raw), `echo changed-in-the-sandbox`, ""), content) {
			t.Errorf("the audit log holds file contents (%q)", content)
		}
	}
}
