package server

import (
	"context"
	"log/slog"
	"strings"
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

// BenchmarkWriteFile1MiB is an e2b_write_file of 1 MiB through an in-process MCP client, the whole chain: the
// client's encoding, mcp-go's parsing, the middleware (argument check, policy, audit), the tool's argument
// binding and the upload to the emulator's envd.
var benchLines = 1 << 20

func BenchmarkWriteFile1MiB(b *testing.B) {
	f := newFixture(b, fixtureOpts{mutate: func(c *Config, _ *e2btest.Server) {
		c.Logger = slog.New(slog.DiscardHandler)
	}})
	c := connect(b, f.srv, eras[0], nil)
	id := createSandbox(b, c)
	line := strings.Repeat("0123456789abcdef", 4) + "\n"
	content := strings.Repeat(line, benchLines/len(line))
	var req mcp.CallToolRequest
	req.Params.Name = "e2b_write_file"
	req.Params.Arguments = map[string]any{"sandbox_id": id, "path": "/home/user/big.txt", "content": content}
	b.SetBytes(int64(len(content)))
	for b.Loop() {
		res, err := c.CallTool(b.Context(), req)
		if err != nil || res.IsError {
			b.Fatal(err, res)
		}
	}
}
