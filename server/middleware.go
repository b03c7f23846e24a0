package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/e2b-mcp/e2b-mcp/audit"
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

// governTools puts every tool call through the call pipeline (see govern). The arguments are decoded once, for
// the policy, the audit and the tool (see callArgs).
func (s *Server) governTools(next mcpserver.ToolHandlerFunc) mcpserver.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		tool := req.Params.Name
		args, decoded := callArgs(req)
		if decoded != nil {
			ctx = tools.WithDecodedArgs(ctx, decoded)
		}
		return govern(ctx, s, governed[*mcp.CallToolResult]{
			answers: toolAnswers,
			name:    tool,
			args:    args,
			judged: func() (policy.Call, error) {
				if err := s.shapes[tool].check(args, "", 0); err != nil {
					return policy.Call{}, err
				}
				return policy.Call{Tool: tool, Args: s.shapes[tool].judged(args)}, nil
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
			text = "Could not check the sandbox before asking for approval: " + err.Error()
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
func (s *Server) runTool(ctx context.Context, next mcpserver.ToolHandlerFunc, req mcp.CallToolRequest, caller tools.Caller,
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

// callArgs decodes the call's arguments, once: view is how the policy and the audit see them (numbers as
// float64), decoded the same values as json.Decoder.UseNumber leaves them, which the tools bind without parsing
// the JSON again (see tools.WithDecodedArgs). Both are nil when the arguments are not a JSON object (the tool
// then refuses the call itself); decoded is also nil when the arguments did not come as JSON.
//
// A call read from the wire comes decoded already: mcp-go keeps its JSON in RawArguments and decodes it with
// encoding/json into Arguments. When that map holds no number it is exactly what UseNumber decoding gives, so it
// serves as both forms and the arguments are not parsed again at all (an e2b_write_file of 1 MiB spares a pass
// over the megabyte); a number needs its literal (3 and 3.0 bind differently to an integer), hence the decode.
// The map is shared by the policy, the audit and the tool, so none of them may change it.
func callArgs(req mcp.CallToolRequest) (view, decoded map[string]any) {
	if m, ok := req.Params.Arguments.(map[string]any); ok && len(req.Params.RawArguments) > 0 && !holdsNumber(m, 0) {
		return m, m
	}
	var raw []byte
	switch {
	case len(req.Params.RawArguments) > 0:
		raw = req.Params.RawArguments
	case req.Params.Arguments == nil:
		return nil, nil
	default:
		if m, ok := req.Params.Arguments.(map[string]any); ok {
			return m, nil
		}
		var err error
		if raw, err = json.Marshal(req.Params.Arguments); err != nil {
			return nil, nil
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&decoded); err != nil {
		return nil, nil
	}
	v, ok := numbersAsFloats(decoded)
	if !ok {
		return nil, nil
	}
	view, _ = v.(map[string]any)
	return view, decoded
}

// holdsNumber reports whether v holds a number (float64, as encoding/json decodes one into any) at any depth; past
// maxSchemaDepth it answers true, which only costs the decode.
func holdsNumber(v any, depth int) bool {
	if depth > maxSchemaDepth {
		return true
	}
	switch x := v.(type) {
	case float64:
		return true
	case map[string]any:
		for _, e := range x {
			if holdsNumber(e, depth+1) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if holdsNumber(e, depth+1) {
				return true
			}
		}
	}
	return false
}

// numbersAsFloats is v with every json.Number as the float64 that decoding without UseNumber gives; objects and
// arrays are copied, other values shared. ok is false for a number beyond float64, which such decoding refuses.
func numbersAsFloats(v any) (_ any, ok bool) {
	switch x := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		return f, err == nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if out[k], ok = numbersAsFloats(e); !ok {
				return nil, false
			}
		}
		return out, true
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			if out[i], ok = numbersAsFloats(e); !ok {
				return nil, false
			}
		}
		return out, true
	}
	return v, true
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
