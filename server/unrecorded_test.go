package server

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// breakingApprover approves a call, but first makes the audit log unwritable: the call's room in the log is
// reserved by then, and its started record is not yet written.
type breakingApprover struct {
	t      *testing.T
	active string // the audit log's active file
}

func (b breakingApprover) Elicit(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	// A directory where the active file was: opening it for the started record fails.
	if err := os.Rename(b.active, b.active+".aside"); err != nil {
		b.t.Error(err)
	}
	if err := os.Mkdir(b.active, 0o700); err != nil {
		b.t.Error(err)
	}
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept,
		Content: map[string]any{"approve": true}}}, nil
}

// A call whose started record cannot be written does not run, even with its room in the log reserved and its
// approval given: it is refused, naming the audit log, and the sandbox it would have deleted is still there.
func TestCallWhoseStartedRecordFailsDoesNotRun(t *testing.T) {
	f := newFixture(t, fixtureOpts{policy: approvalPolicy})
	active := filepath.Join(f.dir, "audit.jsonl")
	// In this era the approval is asked within the call, after its room is reserved (in the later one, the
	// approved call is a new request, which reserves anew).
	c := connect(t, f.srv, mcp.ProtocolVersion20251125, breakingApprover{t: t, active: active})
	id := createSandbox(t, c)

	res := callTool(t, c, "e2b_manage_sandbox", map[string]any{"sandbox_id": id, "action": "delete"})
	msg := resultText(res)
	if !sandboxExists(f, id) {
		t.Fatalf("the delete whose started record could not be written ran: the sandbox is gone, and it answered %q", msg)
	}
	if !res.IsError || !strings.Contains(msg, "audit log cannot record this call") || !strings.Contains(msg, "nothing was done") {
		t.Errorf("the refusal does not say the audit log cannot record the call: %q", msg)
	}

	// With the log writable again, the log holds the create and no trace of a delete that ran.
	if err := os.Remove(active); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(active+".aside", active); err != nil {
		t.Fatal(err)
	}
	for _, e := range f.auditEntries(t) {
		if e.Tool == "e2b_manage_sandbox" && e.Outcome == "ok" {
			t.Errorf("the audit log records the refused delete as run: %+v", e)
		}
	}
}
