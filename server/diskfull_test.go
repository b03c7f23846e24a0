package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/e2b-mcp/e2b-mcp/audit"
	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/internal/smalldisk"
)

// With the state directory on a disk that fills up, a call the audit log cannot record (a tool call or a resource
// read) is refused before it runs, with a message that names the server's disk and shows none of its paths; the
// calls that ran are each in the log, and the server takes calls again by itself once space returns.
func TestFullDiskRefusesCallsTheAuditLogCannotRecord(t *testing.T) {
	disk := filepath.Join(t.TempDir(), "disk")
	smalldisk.Mount(t, disk, 2<<20)
	f := newFixture(t, fixtureOpts{mutate: func(cfg *Config, _ *e2btest.Server) { cfg.StateDir = disk }})
	f.dir = disk
	c := connect(t, f.srv, eras[0], nil)
	id := createSandbox(t, c)
	ran := 1

	filler := smalldisk.Fill(t, disk)
	refused := ""
	for range 50 {
		res := callTool(t, c, "e2b_list_sandboxes", map[string]any{})
		if res.IsError && strings.Contains(resultText(res), "audit log") {
			refused = resultText(res)
			break
		}
		ran++
	}
	if refused == "" {
		t.Fatal("no call was refused on a full disk")
	}
	for _, want := range []string{"no space left on device", "server's disk", "nothing was done"} {
		if !strings.Contains(refused, want) {
			t.Errorf("refusal %q lacks %q", refused, want)
		}
	}
	if strings.Contains(refused, disk) {
		t.Errorf("the refusal shows the caller the server's paths: %q", refused)
	}
	if msg := mustFail(t, c, "e2b_exec", map[string]any{"sandbox_id": id, "command": "touch ran-unrecorded"}); !strings.Contains(msg, "audit log") {
		t.Fatalf("exec on a full disk: %q", msg)
	}
	// A resource read is a call like any other: refused alike, with the same words.
	if _, err := readResource(t, c, "e2b://sandbox/"+id+"/home/user/"); err == nil || !strings.Contains(err.Error(), "audit log") ||
		!strings.Contains(err.Error(), "no space left on device") || strings.Contains(err.Error(), disk) {
		t.Fatalf("a resource read on a full disk: %v", err)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	res := mustOK(t, c, "e2b_exec", map[string]any{"sandbox_id": id, "command": "test ! -e ran-unrecorded && echo after"})
	if res["stdout"] != "after\n" {
		t.Fatalf("exec after space returned: %v (a refused exec ran)", res)
	}
	ran++
	entries := f.auditEntries(t)
	if len(entries) != ran {
		t.Fatalf("the audit log holds %d entries, %d calls ran", len(entries), ran)
	}
	for _, e := range entries {
		if e.Outcome != audit.OutcomeOK {
			t.Errorf("entry %+v: want only the calls that ran, each ok", e)
		}
	}
}
