package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/e2b-mcp/e2b-mcp/audit"
	"github.com/e2b-mcp/e2b-mcp/internal/shellquote"
	"github.com/e2b-mcp/e2b-mcp/policy"
	"github.com/e2b-mcp/e2b-mcp/server/pages"
	"github.com/e2b-mcp/e2b-mcp/server/tickets"
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
	// via is how a human answered (policy.ViaPage, policy.ViaCommand, viaClient); "" when nobody has yet.
	via string
}

// viaClient: the human answered the question their client put to them (MCP elicitation).
const viaClient = "client"

// approve applies require_approval. Who approves is the policy's choice (Decision.Approver); left to the server,
// it is the client when the caller is the local user, and an operator when the server authenticates its callers
// over HTTP (bearer tokens or OAuth), since a caller's own client answering for its own calls is no approval.
//
// An answer a human gave outside the chat comes first: an approval (on the approval page, or with `e2b-mcp
// approve ID`) lets the call run once, a denial refuses it once. Otherwise an operator is asked through an
// approval ID. A client that approves and declared the elicitation capability is asked in the call itself (an
// input request in protocol 2026-07-28, an elicitation/create request before it); its decline, or an unticked
// box, refuses the call. When the client cannot ask, answers cancel (Claude Code does so at once in -p mode,
// and so do SDK hosts with no handler) or asking fails, the human is asked outside the chat: the model is given
// the approval page's link and the approval ID to hand on. args are the arguments as sent, which the approval
// is bound to and which the human is shown (uploads planned: where each file lands), never defaults the caller
// did not send.
func (s *Server) approve(ctx context.Context, req mcp.CallToolRequest, caller tools.Caller, args map[string]any,
	dec policy.Decision) verdict {
	binding := policy.BindingFor(caller.Owner, caller.Session, req.Params.Name, args)
	shown := policy.Call{Tool: req.Params.Name, Args: s.tools[req.Params.Name].Shown(args)}
	if v, answered := s.answeredElsewhere(binding); answered {
		return v
	}
	if s.approver(dec) == policy.ApproverOperator {
		return s.askOperator(binding, shown, dec)
	}
	return s.approveByElicitation(ctx, req, binding, shown, dec)
}

// approveByElicitation asks the client's user in the chat, or reads their answer to the question (see approve).
func (s *Server) approveByElicitation(ctx context.Context, req mcp.CallToolRequest, binding policy.Binding,
	shown policy.Call, dec policy.Decision) verdict {
	if answer := mcpserver.ElicitationResponse(req.Params.InputResponses, approvalInputID); answer != nil {
		if err := s.elicit.Redeem(req.Params.RequestState, binding); errors.Is(err, tickets.ErrNotThisCalls) {
			return verdict{
				result: mcp.NewToolResultError("The approval answer does not belong to this call: it was given for " +
					"other arguments, was already used, or has expired. Call the tool again to be asked anew."),
				outcome: audit.OutcomeDeclined,
			}
		} else if err != nil {
			// Whether the answer was used before is unknown: it is not honoured (it might run the call twice).
			return verdict{result: mcp.NewToolResultError("The approval answer could not be checked, so the call did not run: " +
				state.PublicText(err) + ". Call the tool again to be asked anew."), outcome: audit.OutcomeError}
		}
		return s.fromAnswer(answer, binding, shown, dec)
	}
	if !clientCanElicit(ctx) {
		return s.askOutside(binding, shown, dec, "the client cannot put questions to them")
	}
	params := mcp.ElicitationParams{Message: approvalMessage(shown, dec), RequestedSchema: approvalSchema()}
	if info := mcpserver.RequestProtocolInfoFromContext(ctx); info != nil && info.Modern {
		requestState, err := s.elicit.Issue(binding)
		if err != nil {
			return verdict{result: mcp.NewToolResultError("Could not ask for approval: " + state.PublicText(err)),
				outcome: audit.OutcomeError}
		}
		return verdict{result: mcpserver.NewInputRequestBuilder(requestState).Elicit(approvalInputID, params).ToolResult()}
	}
	// Before 2026-07-28 the question is a request to the client, made here rather than by mcp-go's bridge for
	// input requests, so that a failure to ask is this call's to handle, not an error that ends it.
	askCtx, cancel := context.WithTimeout(ctx, elicitationTTL)
	defer cancel()
	answer, err := mcpserver.ServerFromContext(ctx).RequestElicitation(askCtx, mcp.ElicitationRequest{
		Request: mcp.Request{Method: string(mcp.MethodElicitationCreate)}, Params: params})
	switch {
	case ctx.Err() != nil:
		return verdict{result: mcp.NewToolResultError("The call was cancelled while waiting for approval; it did not run."),
			outcome: audit.OutcomeError}
	case err != nil:
		s.log.Info("asking for approval through the client failed", "tool", req.Params.Name, "error", err)
		return s.askOutside(binding, shown, dec, "asking through the client failed")
	}
	return s.fromAnswer(answer, binding, shown, dec)
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

// fromAnswer reads the human's answer to the question in the chat: accept (with the box ticked) approves, an
// unticked box refuses, decline refuses too (see declined), and cancel, which says nothing of the call (Claude
// Code in -p mode sends it without showing the question), falls back to asking outside the chat.
func (s *Server) fromAnswer(answer *mcp.ElicitationResult, b policy.Binding, shown policy.Call,
	dec policy.Decision) verdict {
	switch {
	case approved(answer):
		return verdict{proceed: true, via: viaClient}
	case answer.Action == mcp.ElicitationResponseActionAccept:
		return verdict{result: mcp.NewToolResultError("Declined by the user."),
			outcome: audit.OutcomeDeclined, via: viaClient}
	case answer.Action == mcp.ElicitationResponseActionDecline:
		return s.declined(b, shown, dec)
	}
	return s.askOutside(b, shown, dec, "the client answered the question with cancel")
}

// declined refuses a call whose question the client declined. A client may decline without showing the
// question to anyone (Codex's `codex exec` and Copilot CLI without a terminal answer decline at once), and then
// no human ever refused: so the refusal also records an approval request, as askOutside does, and names its
// route outside the chat, worded for a user who was never asked. Approved there, the same call runs once.
func (s *Server) declined(b policy.Binding, shown policy.Call, dec policy.Decision) verdict {
	refused := verdict{outcome: audit.OutcomeDeclined, via: viaClient}
	p, _, ok := s.request(b, shown)
	if !ok {
		refused.result = mcp.NewToolResultError("Declined by the user.")
		return refused
	}
	refused.result = mcp.NewToolResultError(fmt.Sprintf("The client declined the approval of this call (rule '%s': %s), "+
		"so it did not run. If the user saw the question and declined, do not make this call again unless they ask "+
		"for it. Some clients decline without asking anyone (Codex CLI and Copilot CLI when they run without a "+
		"terminal): if the user was never asked, %s", dec.Rule(), dec.Reason, s.routeOutside(p)))
	return refused
}

// answeredElsewhere consumes the answer a human gave to this call's approval request outside the chat, if any.
func (s *Server) answeredElsewhere(b policy.Binding) (verdict, bool) {
	p, found, err := s.approvals.Consume(b)
	switch {
	case err != nil:
		return verdict{result: mcp.NewToolResultError("Could not check approvals: " + state.PublicText(err)),
			outcome: audit.OutcomeError}, true
	case !found:
		return verdict{}, false
	case p.Approved:
		return verdict{proceed: true, via: p.Via}, true
	}
	who := "The user denied this call on the approval page"
	if p.Via == policy.ViaCommand {
		who = "The operator denied this call (`e2b-mcp approve deny " + p.ID + "`)"
	}
	return verdict{result: mcp.NewToolResultError(who + "; it did not run. Do not make it again unless " +
		"the user asks for it."),
		outcome: audit.OutcomeDeclined, via: p.Via}, true
}

// askOperator records the request and names its ID, for an operator to approve with `e2b-mcp approve ID`.
func (s *Server) askOperator(b policy.Binding, shown policy.Call, dec policy.Decision) verdict {
	p, v, ok := s.request(b, shown)
	if !ok {
		return v
	}
	return approvalPending(fmt.Sprintf("Approval needed (rule '%s': %s). Ask the human to run "+
		"`%s` in a terminal (`%s` shows the whole call first), then call this tool again with the same arguments.",
		dec.Rule(), dec.Reason, s.approveCommand(p.ID), s.approveCommand("show "+p.ID)))
}

// askOutside records the request and gives the model what the user needs to answer it outside the chat: the
// approval page's link and the approval ID. why says why the user was not asked in the chat.
func (s *Server) askOutside(b policy.Binding, shown policy.Call, dec policy.Decision, why string) verdict {
	p, v, ok := s.request(b, shown)
	if !ok {
		return v
	}
	return approvalPending(fmt.Sprintf("Approval needed (rule '%s': %s), and the user was not asked in the chat: %s. %s",
		dec.Rule(), dec.Reason, why, capitalize(s.routeOutside(p))))
}

// routeOutside tells the model how the user answers approval request p outside the chat (the approval page's
// link where there is one, and the `e2b-mcp approve` command), and to call again afterwards.
func (s *Server) routeOutside(p policy.Pending) string {
	command := fmt.Sprintf("`%s` in a terminal (`%s` shows the whole call first)", s.approveCommand(p.ID),
		s.approveCommand("show "+p.ID))
	link := s.pages.approvalLink(p.ID)
	if link == "" {
		who := "the user"
		if !s.pages.approval.Offered() {
			who = "an operator of this server"
		}
		return fmt.Sprintf("ask %s to run %s, then call this tool again with the same arguments.", who, command)
	}
	return fmt.Sprintf("give the user this link to the approval page of approval %s, where they see the whole call "+
		"and press Approve or Deny: %s (it works once, until %s). Or they run %s. Then call this tool again "+
		"with the same arguments.", p.ID, link, pages.ExpiryText(p.Expires), command)
}

// capitalize makes the first letter of s (ASCII) upper case.
func capitalize(s string) string {
	if s == "" || s[0] < 'a' || s[0] > 'z' {
		return s
	}
	return string(s[0]-'a'+'A') + s[1:]
}

// request records that the call waits for a human (reusing a waiting request for the same call); ok is false,
// with the verdict to answer, when it could not be recorded.
func (s *Server) request(b policy.Binding, shown policy.Call) (p policy.Pending, v verdict, ok bool) {
	p, err := s.approvals.Request(b, shown)
	if err != nil {
		return p, verdict{result: mcp.NewToolResultError("Could not record the approval request: " + state.PublicText(err)),
			outcome: audit.OutcomeError}, false
	}
	return p, verdict{}, true
}

func approvalPending(text string) verdict {
	return verdict{result: mcp.NewToolResultError(text), outcome: audit.OutcomeApprovalPending}
}

// Bounds of what the approval question shows of each value: a deciding field, and any other argument (its head
// and tail, with the size of what is between).
const (
	decidingFieldBytes = 4000
	otherArgBytes      = 2000
)

// approvalMessage is the question put to the human: the deciding fields first, then every other argument, each
// as the human must judge it (see argFields).
func approvalMessage(c policy.Call, dec policy.Decision) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Policy rule '%s' asks for your approval: %s\n\nTool: %s\n", dec.Rule(), dec.Reason, c.Tool)
	for _, f := range decidingFields(c, decidingFieldBytes) {
		fmt.Fprintf(&b, "%s: %s\n", f.Name, f.Value)
	}
	for _, f := range argFields(policy.OtherArgs(c), otherArgBytes) {
		fmt.Fprintf(&b, "%s: %s\n", f.Name, f.Value)
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
