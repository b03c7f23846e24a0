package server

import (
	"context"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/e2b-mcp/e2b-mcp/tools"
)

// client is the client making the request of ctx, as tools.Clients knows it: --client-profile where it is set,
// else the one the request's clientInfo names (each request's _meta in protocol 2026-07-28, the session's
// initialize before), else the default.
func (s *Server) client(ctx context.Context) tools.Client { return clientOf(ctx, s.cfg) }

// clientOf is Server.client of a server configured with cfg.
func clientOf(ctx context.Context, cfg Config) tools.Client {
	if cfg.ClientProfile != "" {
		c, _ := tools.ClientNamed(cfg.ClientProfile) // Config.Check refused a name it does not know
		return c
	}
	return tools.ClientFor(clientInfo(ctx).Name)
}

// clientInfo is what the client of ctx says it is.
func clientInfo(ctx context.Context) mcp.Implementation {
	if info := mcpserver.RequestProtocolInfoFromContext(ctx); info != nil && info.ClientInfo != nil {
		return *info.ClientInfo
	}
	if cs, ok := mcpserver.ClientSessionFromContext(ctx).(mcpserver.SessionWithClientInfo); ok {
		return cs.GetClientInfo()
	}
	return mcp.Implementation{}
}

// toolsFor fits the tool list to the client that asks for it (mcp-go's tool filter). A client that hands its
// model only structuredContent (Codex, Copilot CLI) gets the tools whose results may carry images without their
// outputSchema, so that such a result may come without structuredContent and its image reach the model. A client
// whose own cap on a result is below the limit in force (a --result-limit above it) is told the limit in each
// tool's _meta "anthropic/maxResultSizeChars", which Claude Code honours up to 500,000.
func (s *Server) toolsFor(ctx context.Context, list []mcp.Tool) []mcp.Tool {
	return fitTools(ctx, s.cfg, func(name string) bool { return s.tools[name].Images }, list)
}

// fitTools is toolsFor of a server configured with cfg, whose tools that may answer with images are those images
// names.
func fitTools(ctx context.Context, cfg Config, images func(name string) bool, list []mcp.Tool) []mcp.Tool {
	c := clientOf(ctx, cfg)
	limit := cfg.Tools.ResultLimit
	if limit == 0 {
		limit = c.Budget
	}
	raise := c.InlineChars > 0 && limit > c.InlineChars
	if c.Reads != tools.ReadsStructured && !raise {
		return list
	}
	out := make([]mcp.Tool, len(list))
	for i, t := range list {
		if c.Reads == tools.ReadsStructured && images(t.Name) {
			t.RawOutputSchema, t.OutputSchema = nil, mcp.ToolOutputSchema{}
		}
		if raise {
			meta := &mcp.Meta{AdditionalFields: map[string]any{}}
			if t.Meta != nil {
				for k, v := range t.Meta.AdditionalFields {
					meta.AdditionalFields[k] = v
				}
			}
			meta.AdditionalFields[maxResultSizeChars] = min(limit, maxResultSizeCharsCap)
			t.Meta = meta
		}
		out[i] = t
	}
	return out
}

// Claude Code's per-tool cap on a result's characters, and the most it accepts there.
const (
	maxResultSizeChars    = "anthropic/maxResultSizeChars"
	maxResultSizeCharsCap = 500_000
)
