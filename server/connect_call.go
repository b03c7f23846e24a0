package server

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/policy"
	"github.com/e2b-mcp/e2b-mcp/server/pages"
	"github.com/e2b-mcp/e2b-mcp/server/tickets"
	"github.com/e2b-mcp/e2b-mcp/state"
	"github.com/e2b-mcp/e2b-mcp/tools"
)

// connectInputID keys the connect page's URL elicitation among a call's input requests.
const connectInputID = "e2b-mcp.connect"

// keyProbe is the tools' ClientSource: it notes in the call's context that the owner has no key, so that the
// middleware can send the member to the connect page and carry on with the call afterwards.
type keyProbe struct{ tools.ClientSource }

type noKeyKey struct{}

func (p keyProbe) Client(ctx context.Context, owner string) (*e2b.Client, error) {
	c, err := p.ClientSource.Client(ctx, owner)
	if errors.Is(err, tools.ErrNoAPIKey) {
		if hit, ok := ctx.Value(noKeyKey{}).(*atomic.Bool); ok {
			hit.Store(true)
		}
	}
	return c, err
}

// runNoting runs the tool and reports whether it found no key for its owner.
func runNoting(ctx context.Context, next mcpserver.ToolHandlerFunc,
	req mcp.CallToolRequest) (res *mcp.CallToolResult, noKey bool, err error) {
	hit := new(atomic.Bool)
	res, err = next(context.WithValue(ctx, noKeyKey{}, hit), req)
	return res, hit.Load(), err
}

// connect is the answer to a call that found no key for its owner. A client that can open URLs (URL-mode
// elicitation) is asked to open a connect link through an input request (which mcp-go turns into an
// elicitation/create request for clients before protocol 2026-07-28); the answer comes with the repeated call,
// which waits for the key and then runs (see resumeConnect). Any other client, or a member who declines, gets an
// answer naming the link. Without a connect page the tool's own answer stands. A result of type input_required is the
// request to the client; the call is not over.
func (s *Server) connect(ctx context.Context, req mcp.CallToolRequest, caller tools.Caller, args map[string]any,
	res *mcp.CallToolResult, err error) (*mcp.CallToolResult, error) {
	if s.pages.connect == nil {
		return res, err
	}
	link, expires, lerr := s.pages.connectLink(caller.Owner)
	if lerr != nil {
		s.log.Warn("no connect link", "owner", caller.Owner, "error", lerr)
		return res, err
	}
	if caps := clientElicitation(ctx); caps == nil || caps.URL == nil {
		return s.connectionRequired(caller.Owner, link, expires), nil
	}
	state, err := s.pages.connectTickets.Issue(policy.BindingFor(caller.Owner, caller.Session, req.Params.Name, args))
	if err != nil {
		return s.connectionRequired(caller.Owner, link, expires), nil
	}
	msg := fmt.Sprintf("e2b-mcp needs your E2B API key to run %s. Open this page to connect your E2B account "+
		"(the link works once, for %s); your assistant carries on once you have.", req.Params.Name, s.minutesLeft(expires))
	return mcpserver.NewInputRequestBuilder(state).Elicit(connectInputID, mcp.ElicitationParams{
		Mode: mcp.ElicitationModeURL, Message: msg, ElicitationID: pages.RandomID(), URL: link,
	}).ToolResult(), nil
}

// resumeConnect handles the repeated call that answers connect's input request: with the member's consent, it
// waits (as long as the link lives) for the key, then the call runs. handled is false when the call answers no connect
// request.
func (s *Server) resumeConnect(ctx context.Context, req mcp.CallToolRequest, caller tools.Caller,
	args map[string]any) (res *mcp.CallToolResult, handled bool) {
	answer := mcpserver.ElicitationResponse(req.Params.InputResponses, connectInputID)
	if answer == nil || s.pages.connect == nil {
		return nil, false
	}
	binding := policy.BindingFor(caller.Owner, caller.Session, req.Params.Name, args)
	if err := s.pages.connectTickets.Redeem(req.Params.RequestState, binding); errors.Is(err, tickets.ErrNotThisCalls) {
		return mcp.NewToolResultError("The answer to the connect request does not belong to this call. " +
			"Call the tool again."), true
	} else if err != nil {
		return mcp.NewToolResultError("The answer to the connect request could not be checked: " + state.PublicText(err) +
			". Call the tool again."), true
	}
	accepted := answer.Action == mcp.ElicitationResponseActionAccept
	if accepted && s.pages.connect.WaitForKey(ctx, caller.Owner, pages.ConnectLinkTTL) {
		return nil, false // the key is there: run the call
	}
	link, expires, err := s.pages.connectLink(caller.Owner)
	if err != nil {
		return mcp.NewToolResultError(tools.ConnectionRequired(caller.Owner)), true
	}
	return s.connectionRequired(caller.Owner, link, expires), true
}

// connectionRequired is the ConnectionRequired answer that names the connect page (and, to the local user of a
// stdio server, `e2b-mcp auth login`).
func (s *Server) connectionRequired(owner, link string, expires time.Time) *mcp.CallToolResult {
	alternative := ""
	if s.cfg.Transport == TransportStdio {
		alternative = ", or run `e2b-mcp auth login` in a terminal"
	}
	return mcp.NewToolResultError(fmt.Sprintf("No E2B API key is connected for %s. Open %s in a browser to connect "+
		"your E2B account (the link works once, for %s)%s, then call this tool again.",
		owner, link, s.minutesLeft(expires), alternative))
}

// minutesLeft says how long a link that expires then still works, to the nearest minute: "15 minutes".
func (s *Server) minutesLeft(expires time.Time) string {
	if m := int(expires.Sub(s.cfg.Now()).Round(time.Minute) / time.Minute); m != 1 {
		return fmt.Sprintf("%d minutes", m)
	}
	return "1 minute"
}

// clientElicitation is the elicitation capability the client declared (per request in protocol 2026-07-28 and
// later, at initialize before that), nil when it cannot be asked. Before 2026-07-28 the transport must also be
// able to carry the server's elicitation/create request (mcp-go's SSE transport cannot).
func clientElicitation(ctx context.Context) *mcp.ElicitationCapability {
	if info := mcpserver.RequestProtocolInfoFromContext(ctx); info != nil && info.Modern {
		if info.ClientCapabilities == nil {
			return nil
		}
		return info.ClientCapabilities.Elicitation
	}
	cs := mcpserver.ClientSessionFromContext(ctx)
	withInfo, declared := cs.(mcpserver.SessionWithClientInfo)
	if _, canAsk := cs.(mcpserver.SessionWithElicitation); !declared || !canAsk {
		return nil
	}
	return withInfo.GetClientCapabilities().Elicitation
}
