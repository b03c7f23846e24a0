//go:build unix

package server

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// openedProbe makes dir's .gitignore a FIFO and returns a channel closed once something opens it to read it,
// which the first step of a sync in or out does: the walk reads every directory's .gitignore.
func openedProbe(t *testing.T, dir string) <-chan struct{} {
	t.Helper()
	fifo := filepath.Join(dir, ".gitignore")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	opened := make(chan struct{})
	go func() {
		if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil { // blocks until a reader opens it
			close(opened)
			w.Close()
		}
	}()
	t.Cleanup(func() { // lets the writer go when nothing read it
		if r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			waitfor.Recv(t, opened, 10*time.Second, "the probe's writer to end")
			r.Close()
		}
	})
	return opened
}

// A sync the policy denies for its local directory reads nothing of that directory and sends nothing to E2B.
func TestDeniedSyncReadsNothingAndReachesNoSandbox(t *testing.T) {
	f, project := syncFixture(t, `default_action: allow
rules:
  - id: not-this-project
    when: { target: [e2b_sync_in, e2b_sync_out], local_path: "**/project" }
    then: { decision: deny, reason: this directory stays home }
`)
	denied := openedProbe(t, project)
	allowed := filepath.Join(filepath.Dir(project), "other")
	if err := os.Mkdir(allowed, 0o755); err != nil {
		t.Fatal(err)
	}
	read := openedProbe(t, allowed)
	c := connect(t, f.srv, mcp.ProtocolVersion20251125, nil)
	id := createSandbox(t, c)
	f.emu.ResetRequests()
	for _, call := range []struct {
		tool string
		args map[string]any
	}{
		{"e2b_sync_in", map[string]any{"sandbox_id": id, "local_path": project}},
		{"e2b_sync_in", map[string]any{"sandbox_id": id, "local_path": "other/../project"}},
		{"e2b_sync_out", map[string]any{"sandbox_id": id, "remote_path": "project", "local_path": project}},
		{"e2b_sync_out", map[string]any{"sandbox_id": id, "remote_path": "project", "local_path": project,
			"apply": true}},
	} {
		if text := mustFail(t, c, call.tool, call.args); !strings.Contains(text, "Denied by policy rule 'not-this-project'") {
			t.Errorf("%s %v: %s", call.tool, call.args, text)
		}
	}
	if reqs := f.emu.Requests(); len(reqs) > 0 {
		t.Errorf("denied syncs reached E2B: %d requests, the first %s %s%s", len(reqs), reqs[0].Method, reqs[0].Host,
			reqs[0].Path)
	}
	// The probe sees a read: an allowed sync of the other directory opens its .gitignore.
	mustOK(t, c, "e2b_sync_in", map[string]any{"sandbox_id": id, "local_path": allowed})
	waitfor.Recv(t, read, 10*time.Second, "the allowed sync to open its .gitignore")
	select {
	case <-denied:
		t.Fatal("a denied sync opened the project's .gitignore")
	default:
	}
}

// swapThenApprove changes the file system while a human is asked about a call, then approves it: the window
// between the policy's judgment of a call and its run.
type swapThenApprove struct{ swap func() }

func (a swapThenApprove) Elicit(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	a.swap()
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{
		Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{"approve": true}}}, nil
}

// A symlink repointed after the policy judged a sync's local_path (here while a human approves it) is refused: the
// sync reads only the directory the policy and the human saw.
func TestSyncRefusesALocalPathChangedSinceJudged(t *testing.T) {
	f, project := syncFixture(t, `default_action: allow
rules:
  - id: keep-private
    when: { target: e2b_sync_in, local_path: "**/private" }
    then: { decision: deny }
  - id: ask
    when: { target: e2b_sync_in }
    then: { decision: require_approval, reason: syncs are approved }
`)
	private := filepath.Join(filepath.Dir(project), "private")
	if err := os.Mkdir(private, 0o755); err != nil {
		t.Fatal(err)
	}
	read := openedProbe(t, private)
	link := filepath.Join(filepath.Dir(project), "link")
	if err := os.Symlink("project", link); err != nil {
		t.Fatal(err)
	}
	swap := func() {
		if err := os.Remove(link); err != nil {
			t.Error(err)
		}
		if err := os.Symlink("private", link); err != nil {
			t.Error(err)
		}
	}
	c := connect(t, f.srv, mcp.ProtocolVersion20251125, swapThenApprove{swap: swap})
	id := createSandbox(t, c)
	text := mustFail(t, c, "e2b_sync_in", map[string]any{"sandbox_id": id, "local_path": "link"})
	if !strings.Contains(text, "a symlink changed in between") {
		t.Errorf("a sync whose local_path was repointed after the policy judged it: %s", text)
	}
	select {
	case <-read:
		t.Fatal("the sync read the directory the symlink was repointed to")
	default:
	}
}
