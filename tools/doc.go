// Package tools holds e2b-mcp's MCP tools: one file per tool (or small group) with its test beside it, each tool
// defined once (define.go: its name, description, hints, argument and result types, defaults and handler), and All
// (tools.go), the one explicit list of every tool. Handlers are methods on small structs holding their dependencies
// (Deps); each is given the caller (owner and session) and its decoded arguments, and checks that the sandbox it
// names is one of the caller's session before anything reaches E2B. The server's pipeline (lease, policy,
// approval, audit) runs around them.
package tools
