package server

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/e2b-mcp/e2b-mcp/audit"
	"github.com/e2b-mcp/e2b-mcp/internal/jsonrpc"
	"github.com/e2b-mcp/e2b-mcp/policy"
	"github.com/e2b-mcp/e2b-mcp/state"
	"github.com/e2b-mcp/e2b-mcp/tools"
)

// identityKey carries the caller an HTTP request authenticated as (owner from the bearer token, session from
// the X-E2B-MCP-Session header).
type identityKey struct{}

func withIdentity(ctx context.Context, c tools.Caller) context.Context {
	return context.WithValue(ctx, identityKey{}, c)
}

func identityFrom(ctx context.Context) (tools.Caller, bool) {
	c, ok := ctx.Value(identityKey{}).(tools.Caller)
	return c, ok
}

// ownerOf is the owner of an HTTP request's authenticated caller, for the transports' protocol sessions.
func ownerOf(ctx context.Context) (string, bool) {
	c, ok := identityFrom(ctx)
	return c.Owner, ok
}

// callerFor is who makes the call: the HTTP identity, or over stdio (and in-process) the configured owner and
// session. With bearer tokens configured a call without an authenticated identity is refused outright.
func (s *Server) callerFor(ctx context.Context) (tools.Caller, error) {
	if c, ok := identityFrom(ctx); ok {
		return c, nil
	}
	if s.authenticated() && s.cfg.Transport != TransportStdio {
		return tools.Caller{}, errors.New("the call carries no authenticated caller")
	}
	return tools.Caller{Owner: s.cfg.Owner, Session: s.cfg.Session}, nil
}

// governTools puts every tool call through the call pipeline (see govern). The policy and the audit read the
// arguments as mcp-go decoded them, and the tool binds its own from their JSON (see callArgs).
func (s *Server) governTools(next mcpserver.ToolHandlerFunc) mcpserver.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		req = jsonrpc.RestoreArguments(ctx, req) // a front took them, before anything reads them
		ctx = tools.WithClient(ctx, s.client(ctx))
		tool := req.Params.Name
		args := callArgs(req)
		return govern(ctx, s, governed[*mcp.CallToolResult]{
			answers: toolAnswers,
			name:    tool,
			args:    args,
			judged: func() (policy.Call, error) {
				if err := s.tools[tool].Check(req.Params.Arguments); err != nil {
					return policy.Call{}, err
				}
				return policy.Call{Tool: tool, Args: s.tools[tool].Judged(args)}, nil
			},
			approve: func(ctx context.Context, caller tools.Caller, dec policy.Decision) (string, *reply[*mcp.CallToolResult]) {
				return s.approveTool(ctx, req, caller, args, dec)
			},
			run: func(ctx context.Context, caller tools.Caller) (*mcp.CallToolResult, error) {
				return s.runTool(ctx, next, req, caller, args)
			},
		})
	}
}

// toolAnswers: a tool answers with a result, isError for a refusal or a failure.
var toolAnswers = answers[*mcp.CallToolResult]{
	refuse: func(text string) (*mcp.CallToolResult, error) { return mcp.NewToolResultError(text), nil },
	failure: func(res *mcp.CallToolResult) (string, bool) {
		switch {
		case res == nil:
			return "", true
		case !res.IsError:
			return "", false // the text of an answer that is no failure is not needed, and may be long
		}
		return resultText(res), true
	},
	asksClient: func(res *mcp.CallToolResult) bool { return res != nil && res.ResultType == mcp.ResultTypeInputRequired },
}

// approveTool applies require_approval to a tool call (see approve). A human is asked only about a call that can
// run: not about a sandbox or checkpoint the caller does not have (which also keeps made-up IDs out of the
// approval queue).
func (s *Server) approveTool(ctx context.Context, req mcp.CallToolRequest, caller tools.Caller, args map[string]any,
	dec policy.Decision) (via string, stop *reply[*mcp.CallToolResult]) {
	if text, unknown, err := tools.UnknownTarget(s.store, caller, args); unknown || err != nil {
		if err != nil {
			text = "Could not check the sandbox before asking for approval: " + state.PublicText(err)
		}
		r := toolAnswers.refusal(audit.OutcomeError, text)
		return "", &r
	}
	v := s.approve(ctx, req, caller, args, dec)
	if v.proceed {
		return v.via, nil
	}
	return v.via, &reply[*mcp.CallToolResult]{res: v.result, outcome: v.outcome}
}

// runTool runs a tool call, or answers the repeated call of one that was sent to the connect page; a call that
// finds no key for its owner sends the member there (see connect).
func (s *Server) runTool(ctx context.Context, next mcpserver.ToolHandlerFunc, req mcp.CallToolRequest,
	caller tools.Caller,
	args map[string]any) (*mcp.CallToolResult, error) {
	if res, handled := s.resumeConnect(ctx, req, caller, args); handled {
		return res, nil
	}
	res, noKey, err := runNoting(ctx, next, req)
	if noKey {
		return s.connect(ctx, req, caller, args, res, err)
	}
	return res, err
}

// maxLeaseCache bounds the memory of recent lease renewals (HTTP callers may name any number of sessions).
const maxLeaseCache = 4096

// leaseCache remembers when each session's lease was last renewed by this process.
type leaseCache struct {
	mu   sync.Mutex
	last map[tools.Caller]time.Time
}

// renewLease renews the caller's session lease. A renewal is a durable write to the state store, so within a
// tenth of the lease (at most a minute) of the last one it is skipped: the lease is never more than that short
// of its full length, and a burst of calls costs one write. Only a session the store refuses to create
// (state.ErrTooManySessions) is an error: any other failure is logged, and the next call tries again.
func (s *Server) renewLease(c tools.Caller) error {
	now := s.cfg.Now()
	every := min(time.Minute, s.cfg.Lease/10)
	s.leases.mu.Lock()
	if last, ok := s.leases.last[c]; ok && !now.Before(last) && now.Sub(last) < every {
		s.leases.mu.Unlock()
		return nil
	}
	if len(s.leases.last) >= maxLeaseCache {
		for k, t := range s.leases.last {
			if now.Sub(t) >= every || now.Before(t) {
				delete(s.leases.last, k)
			}
		}
		if len(s.leases.last) >= maxLeaseCache {
			clear(s.leases.last)
		}
	}
	s.leases.last[c] = now
	s.leases.mu.Unlock()

	if _, err := s.store.TouchSession(c.Owner, c.Session, s.cfg.Lease); err != nil {
		// The call itself may still work (the store could be busy for a moment); the next call tries again.
		s.leases.mu.Lock()
		delete(s.leases.last, c)
		s.leases.mu.Unlock()
		if errors.Is(err, state.ErrTooManySessions) {
			return err
		}
		s.log.Warn("renewing the session lease", "owner", c.Owner, "session", c.Session, "error", err)
	}
	return nil
}

// holdLease keeps the caller's session live while a call of it runs, and returns the function that ends the
// hold when the call does. The session is in use all that time, so its lease is renewed every half lease while the
// call lasts and once more when it ends: the lease counts from the end of the session's last call, and a call
// longer than the lease does not see its own session lapse (and its sandboxes swept) under it. A call shorter than
// a tenth of the lease costs no second write (see renewLease).
func (s *Server) holdLease(c tools.Caller) (release func()) {
	every := max(s.cfg.Lease/2, 10*time.Millisecond)
	var mu sync.Mutex
	ended := false
	var timer *time.Timer
	mu.Lock() // the first renewal waits until timer is set
	timer = time.AfterFunc(every, func() {
		_ = s.renewLease(c) // the session exists: only its creation can be refused
		mu.Lock()
		defer mu.Unlock()
		if !ended {
			timer.Reset(every)
		}
	})
	mu.Unlock()
	return func() {
		mu.Lock()
		ended = true
		mu.Unlock()
		timer.Stop()
		_ = s.renewLease(c)
	}
}

// localCause names what went wrong on this machine's disk (the system's words, such as "no space left on device")
// without the server's paths, which are the operator's business, not the caller's.
func localCause(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	return "a local failure; the server's log has the details"
}

// record completes and writes a call's audit entry (its outcome record if it started); failure is the text of a
// failed call. The call was let start only after Reserve kept room for its records, so a failure here is rare (a
// disk that failed otherwise); it is logged, and the log holds no partial line.
func (s *Server) record(call *audit.Call, e audit.Entry, outcome, failure string) {
	e.Outcome = outcome
	e.DurationMS = s.cfg.Now().Sub(e.Time).Milliseconds()
	e.Error = failure
	s.metrics.observeCall(e.Tool, e.Decision, e.Outcome, s.cfg.Now().Sub(e.Time))
	if rerr := call.Finish(e); rerr != nil {
		s.log.Error("writing the audit log", "tool", e.Tool, "error", rerr)
	}
}

// callArgs are the call's arguments as the policy and the audit see them (numbers as float64), nil when they are
// not a JSON object (the tool then refuses the call itself). A call read from the wire comes decoded already:
// mcp-go keeps its JSON in RawArguments, from which the tool binds its typed arguments, and decodes it with
// encoding/json into Arguments, which serves here as it is, so the server parses no argument twice (an
// e2b_write_file of 1 MiB is one pass over the megabyte by this server's code). The map is shared by the policy,
// the audit and the tool's request, so none of them may change it.
func callArgs(req mcp.CallToolRequest) map[string]any {
	switch a := req.Params.Arguments.(type) {
	case nil:
		return nil
	case map[string]any:
		return a
	}
	// An in-process caller's arguments as JSON or as a struct: as the client's encoding of them would decode.
	raw, err := json.Marshal(req.Params.Arguments)
	if err != nil {
		return nil
	}
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	return m
}

func stringArg(args map[string]any, name string) string {
	v, _ := args[name].(string)
	return v
}

// resultText joins a result's text contents.
func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := mcp.AsTextContent(c); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }
