package server

import (
	"context"
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/e2b-mcp/e2b-mcp/audit"
	"github.com/e2b-mcp/e2b-mcp/policy"
	"github.com/e2b-mcp/e2b-mcp/state"
	"github.com/e2b-mcp/e2b-mcp/tools"
)

// resourceRead is the audit log's name for a read of a sandbox file as an MCP resource.
const resourceRead = "resources/read"

// governRead is the middleware around resource reads, the counterpart of governCall: a resource read of a
// sandbox file is a read of that file, so it is decided by the policy exactly as an e2b_read_file of the same
// sandbox and path (a rule keeping the model out of /etc keeps resource reads out too), and recorded in the audit
// log. require_approval refuses the read: a resource read cannot wait for a human, e2b_read_file can.
func (s *Server) governRead(next mcpserver.ResourceHandlerFunc) mcpserver.ResourceHandlerFunc {
	return func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		start := s.cfg.Now()
		caller, err := s.callerFor(ctx)
		if err != nil {
			return nil, fmt.Errorf("Refused: %w", err)
		}
		ctx = tools.WithCaller(ctx, caller)
		s.renewLease(caller)
		id, p, err := tools.ResourceTarget(req)
		entry := audit.Entry{Time: start, Owner: caller.Owner, Session: caller.Session, Tool: resourceRead,
			Args: map[string]any{"uri": req.Params.URI, "sandbox_id": id, "path": p}, SandboxID: id}
		if err != nil {
			s.record(entry, audit.OutcomeError, nil, err)
			return nil, err
		}
		dec := s.policies.Current().Evaluate(tools.ResourceCall(id, p))
		entry.Decision, entry.Rule = string(dec.Action), dec.Rule()
		switch dec.Action {
		case policy.Allow:
		case policy.RequireApproval:
			err := fmt.Errorf("Reading %s needs a human's approval (policy rule '%s': %s); read it with e2b_read_file, "+
				"which can ask for it.", p, dec.Rule(), dec.Reason)
			s.record(entry, audit.OutcomeDeclined, nil, err)
			return nil, err
		default:
			err := fmt.Errorf("Denied by policy rule '%s': %s", dec.Rule(), dec.Reason)
			s.record(entry, audit.OutcomeDenied, nil, nil)
			return nil, err
		}
		contents, err := next(ctx, req)
		outcome := audit.OutcomeOK
		if err != nil {
			outcome = audit.OutcomeError
		}
		s.record(entry, outcome, nil, err)
		return contents, err
	}
}

// listSandboxFiles adds to resources/list the workspace of each of the caller's sandboxes, so that a client can
// browse their files from there (a directory reads as the URIs of its entries).
func (s *Server) listSandboxFiles(ctx context.Context, _ any, _ *mcp.ListResourcesRequest, result *mcp.ListResourcesResult) {
	caller, err := s.callerFor(ctx)
	if err != nil || result == nil {
		return
	}
	recs, err := s.store.SessionSandboxes(caller.Owner, caller.Session)
	if err != nil {
		s.log.Warn("listing sandbox resources", "owner", caller.Owner, "session", caller.Session, "error", err)
		return
	}
	for _, r := range recs {
		if r.State == state.StateGone {
			continue
		}
		name := r.ID
		if r.Title != "" {
			name = r.Title + " (" + r.ID + ")"
		}
		result.Resources = append(result.Resources, mcp.NewResource(tools.SandboxFileURI(r.ID, tools.WorkspacePath+"/"),
			"workspace of "+name,
			mcp.WithResourceDescription("The files of sandbox "+r.ID+" ("+r.State+"), from "+tools.WorkspacePath),
			mcp.WithMIMEType("text/uri-list")))
	}
}
