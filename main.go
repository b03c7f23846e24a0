// Command e2b-mcp is an MCP server that gives AI assistants control of E2B cloud sandboxes.
package main

import (
	"context"
	"os"

	"github.com/e2b-mcp/e2b-mcp/cli"
)

func main() {
	os.Exit(cli.Main(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
