package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/server/synclink"
)

// A team server cannot resolve the user's paths, so the directory its policy judges must be one that does not
// depend on where the command is run: a relative local_path (or ~, the server's home to the policy) gets no
// link, and the link of an absolute one carries it, for the command line to hold its DIR to.
func TestSyncLinkBindsAnAbsoluteLocalPath(t *testing.T) {
	x := newSyncLinkFixture(t, e2btest.Options{})
	for _, tool := range []string{"e2b_sync_in", "e2b_sync_out"} {
		for _, local := range []string{".", "project", "../../.ssh", "~/project", `project\sub`} {
			text := mustFail(t, x.c, tool, map[string]any{"sandbox_id": x.id, "local_path": local,
				"remote_path": "/home/user/project"})
			if !strings.Contains(text, "absolute path") {
				t.Errorf("%s with local_path %q: %s", tool, local, text)
			}
		}
	}
	for _, local := range []string{`C:\Users\me\project`, "c:/Users/me/project", `\\host\share\project`} {
		mustOK(t, x.c, "e2b_sync_in", map[string]any{"sandbox_id": x.id, "local_path": local,
			"remote_path": "/home/user/project"})
	}

	_, ticket := x.link(t)
	status, _, text := x.step(t, http.MethodPost, "begin", ticket, "alice", nil, nil)
	var begun synclink.Begun
	if status != http.StatusOK || json.Unmarshal([]byte(text), &begun) != nil {
		t.Fatalf("begin: %d %s", status, text)
	}
	if begun.Link.Local != "/home/me/project" {
		t.Errorf("the link binds the local directory %q, want the call's /home/me/project", begun.Link.Local)
	}
}
