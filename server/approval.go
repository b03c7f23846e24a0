package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/e2b-mcp/e2b-mcp/audit"
	"github.com/e2b-mcp/e2b-mcp/internal/display"
	"github.com/e2b-mcp/e2b-mcp/internal/shellquote"
	"github.com/e2b-mcp/e2b-mcp/policy"
	"github.com/e2b-mcp/e2b-mcp/state"
	"github.com/e2b-mcp/e2b-mcp/tools"
)

// approvalInputID keys the approval question among a call's input requests.
const approvalInputID = "e2b-mcp.approval"

// elicitationTTL bounds how long an approval question stays answerable.
const elicitationTTL = 10 * time.Minute

// verdict is the outcome of require_approval for one call.
type verdict struct {
	proceed bool
	// result answers the call when it does not proceed.
	result *mcp.CallToolResult
	// outcome is the audit outcome when the call ends here; "" while a question to the human is outstanding
	// (the call is recorded once, when it is answered).
	outcome string
}

// approve applies require_approval. Who approves is the policy's choice (Decision.Approver); left to the server,
// it is the client when the caller is the local user, and an operator when the server authenticates its callers
// over HTTP (bearer tokens or OAuth), since a caller's own client answering for its own calls is no approval. A client that approves and declared the
// elicitation capability is asked in the call itself (MCP elicitation: an input request in protocol 2026-07-28,
// which mcp-go turns into an elicitation/create request for older clients). Otherwise the call gets an approval
// ID that an operator approves with `e2b-mcp approve ID`; the next identical call then runs, once. args are the
// arguments as sent, which the approval is bound to; judged is the call as the policy judged it (defaults filled
// in, uploads planned), which is what the human is shown.
func (s *Server) approve(ctx context.Context, req mcp.CallToolRequest, caller tools.Caller, args map[string]any, judged policy.Call, dec policy.Decision) verdict {
	binding := policy.BindingFor(caller.Owner, caller.Session, req.Params.Name, args)
	if s.approver(dec) == policy.ApproverClient && clientCanElicit(ctx) {
		return s.approveByElicitation(req, binding, judged, dec)
	}
	return s.approveByID(binding, judged, dec)
}

// approver resolves who approves a decision: the policy's choice, else the server's default.
func (s *Server) approver(dec policy.Decision) policy.Approver {
	if dec.Approver != policy.ApproverDefault {
		return dec.Approver
	}
	if s.authenticated() && s.cfg.Transport != TransportStdio {
		return policy.ApproverOperator
	}
	return policy.ApproverClient
}

// clientCanElicit reports whether the client can be asked (see clientElicitation).
func clientCanElicit(ctx context.Context) bool {
	return clientElicitation(ctx) != nil
}

func (s *Server) approveByElicitation(req mcp.CallToolRequest, b policy.Binding, judged policy.Call, dec policy.Decision) verdict {
	if answer := mcpserver.ElicitationResponse(req.Params.InputResponses, approvalInputID); answer != nil {
		if err := s.elicit.redeem(req.Params.RequestState, b); errors.Is(err, errNotThisCallsTicket) {
			return verdict{
				result: mcp.NewToolResultError("The approval answer does not belong to this call: it was given for " +
					"other arguments, was already used, or has expired. Call the tool again to be asked anew."),
				outcome: audit.OutcomeDeclined,
			}
		} else if err != nil {
			// Whether the answer was used before is unknown: it is not honoured (it might run the call twice).
			return verdict{result: mcp.NewToolResultError("The approval answer could not be checked, so the call did not run: " +
				err.Error() + ". Call the tool again to be asked anew."), outcome: audit.OutcomeError}
		}
		if approved(answer) {
			return verdict{proceed: true}
		}
		return verdict{result: mcp.NewToolResultError("Declined by the user."), outcome: audit.OutcomeDeclined}
	}
	state, err := s.elicit.issue(b)
	if err != nil {
		return verdict{result: mcp.NewToolResultError("Could not ask for approval: " + err.Error()), outcome: audit.OutcomeError}
	}
	params := mcp.ElicitationParams{
		Message:         approvalMessage(judged, dec),
		RequestedSchema: approvalSchema(),
	}
	return verdict{result: mcpserver.NewInputRequestBuilder(state).Elicit(approvalInputID, params).ToolResult()}
}

// Bounds of what the approval question shows: each deciding field (its head and tail, with the size of what is
// between), and the other arguments together.
const (
	decidingFieldBytes = 4000
	otherArgsBytes     = 2000
)

// approvalMessage is the question put to the human: the deciding fields first, each escaped and shown so that
// padding cannot hide its tail, then the other arguments (secrets redacted, clipped).
func approvalMessage(c policy.Call, dec policy.Decision) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Policy rule '%s' asks for your approval: %s\n\nTool: %s\n", dec.Rule(), dec.Reason, c.Tool)
	for _, f := range policy.DecidingFields(c) {
		fmt.Fprintf(&b, "%s: %s\n", f.Name, display.Readable(f.Value, decidingFieldBytes))
	}
	if other := policy.OtherArgs(c); len(other) > 0 {
		fmt.Fprintf(&b, "Other arguments: %s\n", display.Escape(displayArgs(other, otherArgsBytes)))
	}
	b.WriteString("\nAllow this call?")
	return b.String()
}

// approvalSchema is the form shown to the human: one checkbox, ticked, so that accepting the form approves.
func approvalSchema() map[string]any {
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			"approve": map[string]any{
				"type":        "boolean",
				"title":       "Approve this call",
				"description": "Untick (or decline) to refuse.",
				"default":     true,
			},
		},
	}
}

// approved reads the human's answer: accept approves unless the form's box was explicitly unticked.
func approved(r *mcp.ElicitationResult) bool {
	if r.Action != mcp.ElicitationResponseActionAccept {
		return false
	}
	if content, ok := r.Content.(map[string]any); ok {
		if v, present := content["approve"]; present {
			b, isBool := v.(bool)
			return isBool && b
		}
	}
	return true
}

func (s *Server) approveByID(b policy.Binding, judged policy.Call, dec policy.Decision) verdict {
	ok, err := s.approvals.Consume(b)
	if err != nil {
		return verdict{result: mcp.NewToolResultError("Could not check approvals: " + err.Error()), outcome: audit.OutcomeError}
	}
	if ok {
		return verdict{proceed: true}
	}
	p, err := s.approvals.Request(b, judged)
	if err != nil {
		return verdict{result: mcp.NewToolResultError("Could not record the approval request: " + err.Error()), outcome: audit.OutcomeError}
	}
	return verdict{
		result: mcp.NewToolResultError(fmt.Sprintf("Approval needed (rule '%s': %s). Ask the human to run "+
			"`%s` in a terminal (`%s` shows the whole call first), then call this tool again with the same arguments.",
			dec.Rule(), dec.Reason, s.approveCommand(p.ID), s.approveCommand("show "+p.ID))),
		outcome: audit.OutcomeApprovalPending,
	}
}

// approveCommand is the `e2b-mcp approve` command line that reaches this server's approvals: it names the shared
// database (without its password) or the state directory unless it is the one the command uses by default.
func (s *Server) approveCommand(args string) string {
	cmd := "e2b-mcp approve " + args
	switch {
	case s.cfg.Store != "":
		cmd += " --store " + shellquote.Quote(state.URLWithoutPassword(s.cfg.Store))
	case s.cfg.StateDir != s.cfg.DefaultStateDir:
		cmd += " --state-dir " + shellquote.Quote(s.cfg.StateDir)
	}
	return cmd
}

// displayArgs shows arguments to a human: secrets redacted, long values clipped, at most n bytes.
func displayArgs(args map[string]any, n int) string {
	if args == nil {
		args = map[string]any{}
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(audit.Redact(args)); err != nil {
		return "(arguments cannot be shown)"
	}
	return clip(strings.TrimSpace(b.String()), n)
}
