package server

import (
	"context"
	"errors"
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

// governResources puts every resource read through the call pipeline (see govern). A resource read of a sandbox
// file is a read of that file, so the policy judges it exactly as an e2b_read_file of the same sandbox and path (a
// rule keeping the model out of /etc keeps resource reads out too); its argument check is that the URI names a
// sandbox. require_approval refuses the read: a resource read cannot wait for a human, e2b_read_file can.
func (s *Server) governResources(next mcpserver.ResourceHandlerFunc) mcpserver.ResourceHandlerFunc {
	return func(ctx context.Context, req mcp.ReadResourceRequest) ([]mcp.ResourceContents, error) {
		ctx = tools.WithClient(ctx, s.client(ctx))
		id, p, targetErr := tools.ResourceTarget(req)
		return govern(ctx, s, governed[[]mcp.ResourceContents]{
			answers: resourceAnswers,
			name:    resourceRead,
			args:    map[string]any{"uri": req.Params.URI, "sandbox_id": id, "path": p},
			judged: func() (policy.Call, error) {
				return tools.ResourceCall(id, p), targetErr
			},
			approve: func(_ context.Context, _ tools.Caller, dec policy.Decision) (string, *reply[[]mcp.ResourceContents]) {
				r := resourceAnswers.refusal(audit.OutcomeDeclined, fmt.Sprintf("Reading %s needs a human's approval "+
					"(policy rule '%s': %s); read it with e2b_read_file, which can ask for it.", p, dec.Rule(), dec.Reason))
				return "", &r
			},
			run: func(ctx context.Context, _ tools.Caller) ([]mcp.ResourceContents, error) { return next(ctx, req) },
		})
	}
}

// resourceAnswers: a resource read answers with contents, or with an error for a refusal or a failure.
var resourceAnswers = answers[[]mcp.ResourceContents]{
	refuse:  func(text string) ([]mcp.ResourceContents, error) { return nil, errors.New(text) },
	failure: func([]mcp.ResourceContents) (string, bool) { return "", false },
}

// listSandboxFiles adds to resources/list the workspace of each of the caller's sandboxes, so that a client can
// browse their files from there (a directory reads as the URIs of its entries).
func (s *Server) listSandboxFiles(ctx context.Context, _ any, _ *mcp.ListResourcesRequest,
	result *mcp.ListResourcesResult) {
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
