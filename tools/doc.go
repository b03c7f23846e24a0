// Package tools holds e2b-mcp's MCP tools: one file per tool (or small group) with its test beside it, each tool
// defined once (define.go: its name, description, hints, argument and result types, defaults and handler), and All
// (tools.go), the one explicit list of every tool. A tool's input schema is the one owner of its arguments
// (args.go): the server's pipeline holds every call to it (Tool.Check) before the policy sees the call, and the
// handler gets the arguments decoded over the definition's defaults.
//
// Handlers are methods on small structs holding *base (base.go: the dependencies every tool shares); each is given
// the caller (owner and session) and its arguments, and finds the sandbox it names through sandbox.go, which
// refuses one of another session before anything reaches E2B. start.go makes and records new sandboxes, steps.go
// counts steps and takes automatic checkpoints, result.go fits results to the client's limit, and errors.go words
// every failure for the model. The server's pipeline (lease, argument check, policy, approval, audit) runs around
// them.
package tools
