package tests

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// deleteNeedsApproval writes a policy that asks a human before a sandbox is deleted and allows the rest.
func (x *h) deleteNeedsApproval() string {
	x.t.Helper()
	path := x.path("approve-deletes.yaml")
	const doc = `default_action: allow
rules:
  - id: ask-before-delete
    when: { target: e2b_manage_sandbox, action: delete }
    then: { decision: require_approval, reason: deleting destroys the sandbox's work }
`
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		x.t.Fatal(err)
	}
	return path
}

// approveCommand finds the command line a refused call tells the human to run, and the ID in it.
var approveCommand = regexp.MustCompile("`(e2b-mcp approve ([A-Za-z0-9_-]+)[^`]*)`")

// runAsPrinted runs a command line exactly as the server printed it, in a shell, with this build as e2b-mcp.
func (x *h) runAsPrinted(line string) result {
	x.t.Helper()
	cmd := exec.Command("sh", "-c", line)
	cmd.Env = append(x.env(), "PATH="+filepath.Dir(the.bin)+":"+os.Getenv("PATH"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return result{stdout: stdout.String(), stderr: stderr.String(), err: err}
}

// A client without elicitation is told to run `e2b-mcp approve ID`; once a human has, the same call goes through.
func TestApprovalByCommand(t *testing.T) {
	t.Parallel()
	x := newH(t)
	owner := x.owner("approve")
	x.login(owner)
	args := x.serveArgs(owner, "approve", "--policy", x.deleteNeedsApproval())
	s := x.startStdio(clientOpts{}, args...)
	id := create(t, s.Client, map[string]any{"title": "to delete"})
	del := map[string]any{"sandbox_id": id, "action": "delete"}

	msg := fails(t, s.Client, "e2b_manage_sandbox", del)
	m := approveCommand.FindStringSubmatch(msg)
	if m == nil {
		t.Fatalf("the refused delete does not say how to approve it: %q", msg)
	}
	if !strings.Contains(msg, "ask-before-delete") {
		t.Errorf("the approval message does not name the rule: %q", msg)
	}
	if _, found := the.emu.Sandbox(id); !found {
		t.Fatal("the sandbox was deleted before anyone approved")
	}

	// Another call (a pause) is not covered by the approval of the delete; nor is a delete of another sandbox.
	other := create(t, s.Client, map[string]any{"title": "not approved"})
	if msg := fails(t, s.Client, "e2b_manage_sandbox", map[string]any{"sandbox_id": other, "action": "delete"}); !approveCommand.MatchString(msg) {
		t.Errorf("delete of another sandbox: %q", msg)
	}

	// The state directory is not the default one: the command as printed must find the request all the same.
	if !strings.Contains(m[1], "--state-dir") {
		t.Errorf("the hint %q does not name the server's state directory", m[0])
	}
	r := x.runAsPrinted(m[1])
	if r.err != nil || !strings.Contains(r.stdout, "Approved "+m[2]) {
		t.Errorf("the approve command as printed did not approve %s:\n%s", m[2], r)
	}
	if r := x.run(nil, "approve", "nosuchapproval", "--state-dir", x.path("state")); r.err == nil {
		t.Errorf("approving an unknown ID succeeded:\n%s", r)
	}

	if out := ok(t, s.Client, "e2b_manage_sandbox", del); out["success"] != true {
		t.Fatalf("delete after approval: %v", out)
	}
	if _, found := the.emu.Sandbox(id); found {
		t.Fatal("the sandbox still exists after the approved delete")
	}
	if _, found := the.emu.Sandbox(other); !found {
		t.Fatal("the approval of one delete deleted another sandbox")
	}
	// An approval is good for one call only.
	if msg := fails(t, s.Client, "e2b_manage_sandbox", map[string]any{"sandbox_id": other, "action": "delete"}); !approveCommand.MatchString(msg) {
		t.Errorf("a second delete after one approval: %q", msg)
	}
}

// yesNo answers elicitations: accepting fills in the requested form with consent, declining refuses.
type yesNo struct {
	accept bool
	asked  atomic.Int32
}

func (y *yesNo) Elicit(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	y.asked.Add(1)
	if !y.accept {
		return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionDecline}}, nil
	}
	content := map[string]any{}
	if schema, isMap := req.Params.RequestedSchema.(map[string]any); isMap {
		props, _ := schema["properties"].(map[string]any)
		for name, p := range props {
			prop, _ := p.(map[string]any)
			switch prop["type"] {
			case "boolean":
				content[name] = true
			case "string":
				content[name] = "yes"
				if enum, _ := prop["enum"].([]any); len(enum) > 0 {
					content[name] = enum[0]
					for _, e := range enum {
						if s, _ := e.(string); strings.Contains(strings.ToLower(s), "approve") || strings.EqualFold(s, "yes") {
							content[name] = s
						}
					}
				}
			}
		}
	}
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept, Content: content}}, nil
}

// A client with elicitation is asked in the call itself, in both protocol eras: accepting lets the delete go
// through, declining leaves the sandbox alone.
func TestApprovalByElicitation(t *testing.T) {
	t.Parallel()
	for _, version := range []string{mcp.ProtocolVersion20260728, mcp.LATEST_LEGACY_PROTOCOL_VERSION} {
		t.Run(version, func(t *testing.T) {
			x := newH(t)
			owner := x.owner("elicit")
			x.login(owner)
			policy := x.deleteNeedsApproval()

			no := &yesNo{}
			s := x.startStdio(clientOpts{version: version, elicitation: no}, x.serveArgs(owner, "elicit", "--policy", policy)...)
			id := create(t, s.Client, map[string]any{"title": "keep me"})
			msg := fails(t, s.Client, "e2b_manage_sandbox", map[string]any{"sandbox_id": id, "action": "delete"})
			if no.asked.Load() != 1 {
				t.Fatalf("the human was asked %d times, want once", no.asked.Load())
			}
			if !strings.Contains(strings.ToLower(msg), "declined") {
				t.Errorf("declined delete: %q", msg)
			}
			if _, found := the.emu.Sandbox(id); !found {
				t.Fatal("a declined delete deleted the sandbox")
			}
			s.Close()

			yes := &yesNo{accept: true}
			s = x.startStdio(clientOpts{version: version, elicitation: yes}, x.serveArgs(owner, "elicit", "--policy", policy)...)
			if out := ok(t, s.Client, "e2b_manage_sandbox", map[string]any{"sandbox_id": id, "action": "delete"}); out["success"] != true {
				t.Fatalf("accepted delete: %v", out)
			}
			if yes.asked.Load() != 1 {
				t.Errorf("the human was asked %d times, want once", yes.asked.Load())
			}
			if _, found := the.emu.Sandbox(id); found {
				t.Fatal("an accepted delete left the sandbox")
			}
		})
	}
}
