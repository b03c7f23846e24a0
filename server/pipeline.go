package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/e2b-mcp/e2b-mcp/audit"
	"github.com/e2b-mcp/e2b-mcp/internal/display"
	"github.com/e2b-mcp/e2b-mcp/policy"
	"github.com/e2b-mcp/e2b-mcp/state"
	"github.com/e2b-mcp/e2b-mcp/tools"
)

// decisionInvalid is the audit decision of a request refused by the argument check, before the policy saw it: its
// arguments are not what the tool's input schema allows (tools.Tool.Check), or its URI names no sandbox.
const decisionInvalid = "invalid_arguments"

// governed is one request as the call pipeline sees it, a tool call or a resource read: its name and arguments,
// the call the policy judges, and its transport's parts (how it is approved, how it runs, how it is answered).
// Who makes it, the pipeline finds out itself.
type governed[R any] struct {
	answers[R]
	// name is the request's name in the audit log and the metrics: the tool's, or resourceRead.
	name string
	// args are the arguments as the audit log records them; nil when they are not a JSON object.
	args map[string]any
	// judged is the call the policy decides on, or the argument check's refusal of arguments the request does not
	// take (the policy never sees those, and the tool never runs with them).
	judged func() (policy.Call, error)
	// approve applies require_approval: it returns how a human answered ("" when none did) and the reply that
	// ends the request, nil when it may run.
	approve func(ctx context.Context, caller tools.Caller, dec policy.Decision) (via string, stop *reply[R])
	// run does the request.
	run func(ctx context.Context, caller tools.Caller) (R, error)
}

// answers is how a transport answers: a tool call with a result (isError for a refusal), a resource read with
// contents or an error.
type answers[R any] struct {
	refuse func(text string) (R, error)
	// failure reports whether an answer that came without a Go error is a failure, and its text for the audit log.
	failure func(R) (text string, failed bool)
	// asksClient reports an answer that puts a question to the client: the request is not over, and is recorded
	// when the client calls again with the answer. Nil when the transport cannot ask.
	asksClient func(R) bool
}

// reply is how a governed request ends: the transport's answer, and the outcome the audit log records for it
// ("" for one it does not record: see govern).
type reply[R any] struct {
	res     R
	err     error
	outcome string
}

// refusal ends a request with text, under the audit outcome given.
func (a answers[R]) refusal(outcome, text string) reply[R] {
	res, err := a.refuse(text)
	return reply[R]{res: res, err: err, outcome: outcome}
}

// govern takes a request through the steps every tool call and every resource read take, in this order, so that
// the two are governed alike:
//
//  1. caller: who makes the request (refused without an authenticated caller where one is needed); the request
//     ends when the client's protocol session does.
//  2. audit reservation: a request the audit log could not record does not run, and nothing is done for it (not
//     even the lease renewal, a write to the state store). Room for its records is held from here on.
//  3. lease: the caller's session is renewed (refused when it would be one live session too many for its owner)
//     and held while the request runs.
//  4. argument check: arguments the tool's input schema refuses are refused (tools.Tool.Check).
//  5. policy: deny refuses.
//  6. approval: require_approval asks a human, or refuses a request that cannot wait for one.
//  7. the request runs, once its started record is written and synced. What it reads of its owner's secret store
//     (the E2B key; a create's egress credentials) is read beside that sync (see readEarly).
//
// Whatever ends a request from step 4 on is recorded in the audit log, in the room step 2 kept for it; an answer
// that asks the client a question is recorded when the client calls again with the answer. Refusals of steps 1
// to 3 are not, and nothing ran for them: step 1's has no caller to record, step 2's no room, and step 3's would
// let a caller who names a new session on every call write to the server's disk without end, which that bound is
// there to stop. Denied and declined requests never run, so never reach E2B.
func govern[R any](ctx context.Context, s *Server, g governed[R]) (R, error) {
	start := s.cfg.Now()
	ctx, done := s.sessions.Track(ctx)
	defer done()
	caller, err := s.callerFor(ctx)
	if err != nil {
		return g.refuse("Refused: " + err.Error())
	}
	call, err := s.audit.Reserve()
	if err != nil {
		return g.refuse(s.unrecordable(g.name, err))
	}
	defer call.Release() // the room of a request that ends unrecorded (or in a panic); nothing once recorded
	ctx = tools.WithCaller(ctx, caller)
	if err := s.renewLease(caller); errors.Is(err, state.ErrTooManySessions) {
		return g.refuse(fmt.Sprintf("Refused: session '%s' would be new, and this owner already has %d live "+
			"sessions, the most one owner may have. Use one of them (the %s header names it), or wait for one's "+
			"lease to run out; nothing was done.", display.Prefix(caller.Session, maxEcho),
			state.DefaultMaxLiveSessions, SessionHeader))
	}
	defer s.holdLease(caller)()

	entry := audit.Entry{Time: start, Owner: caller.Owner, Session: caller.Session, Tool: g.name, Args: g.args,
		SandboxID: stringArg(g.args, "sandbox_id")}
	r := g.decideAndRun(ctx, s, caller, call, &entry)
	if r.outcome != "" {
		failure := ""
		if r.outcome == audit.OutcomeError {
			failure = g.failureText(r)
		}
		s.record(call, entry, r.outcome, failure)
	}
	return r.res, r.err
}

// unrecordable is the refusal of a request the audit log cannot record, err saying why.
func (s *Server) unrecordable(name string, err error) string {
	s.log.Error("refusing a call the audit log cannot record", "tool", name, "error", err)
	return "Refused: the server's audit log cannot record this call (" + localCause(err) +
		" on the server's disk), and no call runs unrecorded. Call again once the server's operator has freed " +
		"space; nothing was done."
}

// decideAndRun is steps 4 to 7 of govern; it notes the policy's decision and the approval in entry, and writes
// the call's started record before it runs: a request whose started record cannot be written does not run.
func (g governed[R]) decideAndRun(ctx context.Context, s *Server, caller tools.Caller, call *audit.Call,
	entry *audit.Entry) reply[R] {
	judged, err := g.judged()
	if err != nil {
		entry.Decision = decisionInvalid
		return g.refusal(audit.OutcomeError, err.Error())
	}
	dec := s.policies.Current().Evaluate(judged)
	entry.Decision, entry.Rule = string(dec.Action), dec.Rule()
	switch dec.Action {
	case policy.Allow:
	case policy.RequireApproval:
		via, stop := g.approve(ctx, caller, dec)
		entry.Approval = via
		if stop != nil {
			return *stop
		}
	default: // deny, and anything a newer policy package might add that this server does not know
		return g.refusal(audit.OutcomeDenied, fmt.Sprintf("Denied by policy rule '%s': %s", dec.Rule(), dec.Reason))
	}
	ctx, early := s.readEarly(ctx, entry.Tool, caller) // beside the started record's sync
	err = call.Start(*entry)
	early()
	if errors.Is(err, audit.ErrNotRotated) {
		s.log.Error("the audit log could not rotate; the call is recorded", "tool", entry.Tool, "error", err)
	} else if err != nil {
		return g.refusal("", s.unrecordable(entry.Tool, err)) // it did not run: nothing to record
	}
	ctx, moved := audit.WithTransfers(tools.WithJudged(ctx, judged.Args))
	res, err := g.run(ctx, caller)
	entry.Transfer = moved.Total()
	if g.asksClient != nil && g.asksClient(res) {
		return reply[R]{res: res, outcome: audit.OutcomeInputRequired}
	}
	if _, failed := g.failure(res); err != nil || failed {
		return reply[R]{res: res, err: err, outcome: audit.OutcomeError}
	}
	return reply[R]{res: res, outcome: audit.OutcomeOK}
}

// failureText is what the audit log says of a failed request: its error, or its answer's text (clipped).
func (a answers[R]) failureText(r reply[R]) string {
	if r.err != nil {
		return r.err.Error()
	}
	if text, failed := a.failure(r.res); failed {
		return clip(text, 500)
	}
	return ""
}
