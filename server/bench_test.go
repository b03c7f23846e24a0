package server

import (
	"context"
	"log/slog"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
)

// BenchmarkGovernedCall measures what the middleware adds to every tool call (caller, lease renewal, argument
// check, policy, audit record) around a tool that does nothing, through an in-process client.
func BenchmarkGovernedCall(b *testing.B) {
	for _, version := range eras {
		b.Run(version, func(b *testing.B) {
			f := newFixture(b, fixtureOpts{mutate: func(c *Config, _ *e2btest.Server) {
				c.Logger = slog.New(slog.DiscardHandler)
			}})
			f.srv.MCP().AddTool(mcp.NewTool("bench_noop"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText("ok"), nil
			})
			c := connect(b, f.srv, version, nil)
			var req mcp.CallToolRequest
			req.Params.Name = "bench_noop"
			req.Params.Arguments = map[string]any{"sandbox_id": "abc", "command": "true"}
			for b.Loop() {
				res, err := c.CallTool(b.Context(), req)
				if err != nil || res.IsError {
					b.Fatal(err, res)
				}
			}
		})
	}
}
