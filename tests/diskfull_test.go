package tests

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/internal/smalldisk"
)

// With the state directory on a disk that fills up: calls the audit log cannot record (tool calls and resource
// reads) are refused with a clear message that names the local disk (nothing is blamed on E2B), no partial line is
// left in the log, every call that ran is in it, and the server recovers by itself when space returns.
func TestFullDiskRefusesCallsItCannotAudit(t *testing.T) {
	t.Parallel()
	x := newH(t)
	owner := x.owner("disk")
	x.login(owner)
	stateDir := x.path("state")
	smalldisk.Mount(t, stateDir, 2<<20)

	s := x.startStdio(clientOpts{}, x.serveArgs(owner, "full")...)
	id := create(t, s.Client, map[string]any{"title": "disk"})
	ok(t, s.Client, "e2b_exec", map[string]any{"sandbox_id": id, "command": "echo before"})
	ran := 2

	filler := smalldisk.Fill(t, stateDir)
	refused := ""
	for range 50 {
		res := call(t, s.Client, "e2b_list_sandboxes", map[string]any{})
		msg := text(res)
		if res.IsError && strings.Contains(msg, "audit log") {
			refused = msg
			break
		}
		ran++
		if strings.Contains(msg, "E2B could not be reached") {
			t.Errorf("a full local disk was blamed on E2B: %s", msg)
		}
	}
	if refused == "" {
		t.Fatal("no call was refused on a full disk")
	}
	for _, want := range []string{"no space left on device", "server's disk", "nothing was done"} {
		if !strings.Contains(refused, want) {
			t.Errorf("refusal %q lacks %q", refused, want)
		}
	}
	if strings.Contains(refused, stateDir) {
		t.Errorf("the refusal shows the caller the server's paths: %q", refused)
	}
	// A refused exec does not run.
	if msg := fails(t, s.Client, "e2b_exec", map[string]any{"sandbox_id": id, "command": "touch /home/user/ran"}); !strings.Contains(msg, "audit log") {
		t.Fatalf("exec on a full disk: %q", msg)
	}
	// So is a resource read, which the audit log could not record either.
	var read mcp.ReadResourceRequest
	read.Params.URI = "e2b://sandbox/" + id + "/home/user/"
	if _, err := s.Client.ReadResource(t.Context(), read); err == nil || !strings.Contains(err.Error(), "audit log") ||
		!strings.Contains(err.Error(), "no space left on device") || strings.Contains(err.Error(), stateDir) {
		t.Fatalf("a resource read on a full disk: %v", err)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	ok(t, s.Client, "e2b_exec", map[string]any{"sandbox_id": id, "command": "test ! -e /home/user/ran && echo after"})
	ran++

	raw, err := os.ReadFile(filepath.Join(stateDir, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSuffix(raw, []byte("\n")), []byte("\n"))
	for i, line := range lines {
		if !json.Valid(line) {
			t.Fatalf("audit line %d is not a whole entry: %q", i+1, line)
		}
	}
	// Each call that ran has its started record and its outcome record, joined as one entry by e2b-mcp audit.
	if len(lines) != 2*ran {
		t.Fatalf("the audit log holds %d lines, %d calls ran (two lines each)", len(lines), ran)
	}
	entries := x.auditEntriesIn(stateDir)
	if len(entries) != ran {
		t.Fatalf("e2b-mcp audit shows %d calls, %d ran", len(entries), ran)
	}
	for _, e := range entries {
		if e["outcome"] != "ok" {
			t.Errorf("entry %v: want only the calls that ran, each ok", e)
		}
	}
	if leaks := the.scan(nil, stateDir); len(leaks) > 0 {
		t.Errorf("secrets in the state directory: %v", leaks)
	}
}
