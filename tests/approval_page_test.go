package tests

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/internal/browsertest"
)

// claudeCodeLike answers every elicitation with cancel at once, as Claude Code does in -p mode (and SDK hosts
// with no handler), without showing the question to anyone.
type claudeCodeLike struct{}

func (claudeCodeLike) Elicit(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionCancel}}, nil
}

// claudeCodeInline is the most Claude Code keeps of a result inline: a longer one the model cannot read whole.
const claudeCodeInline = 50000

var approvalPageLink = regexp.MustCompile(`http://127\.0\.0\.1:[0-9]+/approve/[0-9a-z]{10}\.[A-Za-z0-9_-]+`)

// approvalAnswer reads a refused call's answer as the model does: it must fit inline and name the approval ID
// (with the command that approves it) and the approval page.
func approvalAnswer(t *testing.T, res *mcp.CallToolResult) (id, link string) {
	t.Helper()
	msg := text(res)
	if !res.IsError || len(msg) > claudeCodeInline {
		t.Fatalf("want a short refusal, got isError=%v, %d characters: %.300q", res.IsError, len(msg), msg)
	}
	m := approveCommand.FindStringSubmatch(msg)
	link = approvalPageLink.FindString(msg)
	if m == nil || link == "" || !strings.Contains(msg, "approval "+m[2]) {
		t.Fatalf("the answer does not name the approval ID and page: %q", msg)
	}
	return m[2], link
}

// pressOnPage does what the user does with the link: opens it in a browser, reads the call, presses choice.
func pressOnPage(t *testing.T, link, choice string, shows ...string) string {
	t.Helper()
	browser := browsertest.New(t)
	status, page := browser.Get(link)
	csrf := browsertest.CSRF(page)
	if status != http.StatusOK || csrf == "" {
		t.Fatalf("the approval page answered %d with no form:\n%s", status, page)
	}
	for _, want := range shows {
		if !strings.Contains(page, want) {
			t.Errorf("the approval page does not show %q:\n%s", want, page)
		}
	}
	u, _ := url.Parse(link)
	status, answer := browser.PostForm(link, u.Scheme+"://"+u.Host, url.Values{"csrf": {csrf}, "choice": {choice}})
	if status != http.StatusOK {
		t.Fatalf("pressing %s answered %d:\n%s", choice, status, answer)
	}
	return answer
}

// A client that behaves as Claude Code does (cancel at once, 50,000 characters inline) gets, for a delete under
// the built-in policy, an answer naming the approval ID and the approval page; after Approve on the page the
// repeated call deletes the sandbox, once; after Deny it is refused and the sandbox stays.
func TestApprovalPageForClaudeCodeLikeClient(t *testing.T) {
	t.Parallel()
	for _, version := range []string{mcp.ProtocolVersion20260728, mcp.LATEST_LEGACY_PROTOCOL_VERSION} {
		t.Run(version, func(t *testing.T) {
			x := newH(t)
			owner := x.owner("page")
			x.login(owner)
			s := x.startStdio(clientOpts{version: version, elicitation: claudeCodeLike{}}, x.serveArgs(owner, "page")...)

			sb := create(t, s.Client, map[string]any{"title": "to delete"})
			del := map[string]any{"sandbox_id": sb, "action": "delete"}
			id, link := approvalAnswer(t, call(t, s.Client, "e2b_manage_sandbox", del))
			if _, found := the.emu.Sandbox(sb); !found {
				t.Fatal("the sandbox was deleted before anyone approved")
			}
			if !strings.Contains(pressOnPage(t, link, "approve", "e2b_manage_sandbox", sb, id), "Approved") {
				t.Fatal("the page did not say the call was approved")
			}
			if out := ok(t, s.Client, "e2b_manage_sandbox", del); out["success"] != true {
				t.Fatalf("the approved delete: %v", out)
			}
			if _, found := the.emu.Sandbox(sb); found {
				t.Fatal("the approved delete left the sandbox")
			}
			if msg := fails(t, s.Client, "e2b_manage_sandbox", del); !strings.HasPrefix(msg, "Sandbox '"+sb+"' not found") {
				t.Errorf("the delete repeated after its approval was used: %q", msg)
			}

			kept := create(t, s.Client, map[string]any{"title": "to keep"})
			delKept := map[string]any{"sandbox_id": kept, "action": "delete"}
			_, link = approvalAnswer(t, call(t, s.Client, "e2b_manage_sandbox", delKept))
			pressOnPage(t, link, "deny")
			if msg := fails(t, s.Client, "e2b_manage_sandbox", delKept); !strings.Contains(msg, "denied this call on the approval page") {
				t.Errorf("the denied delete: %q", msg)
			}
			if _, found := the.emu.Sandbox(kept); !found {
				t.Fatal("a denied delete deleted the sandbox")
			}
		})
	}
}
