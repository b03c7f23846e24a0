package server

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/mark3labs/mcp-go/mcp"
)

// A tool call's arguments are the bulk of a big call (an e2b_write_file of 1 MiB), and mcp-go's handler parses a
// message it is given several times over: to read its envelope, to check its member names, to decode the request,
// whose params decode their arguments twice more. So the stdio front decodes a call's arguments itself, once, and
// hands mcp-go's handler the line with the arguments' value replaced by argumentsStandIn; the call pipeline
// (governTools) puts them back into the request before anything of this server reads it. Every step of mcp-go's
// handling still runs on the call as it did (the envelope's checks, the session, the cancels, the hooks, the tool's
// lookup and filters, the middleware, the result's limits); the only difference is what mcp-go's own steps before
// the middleware see of the arguments, and this server has none that reads them (no request hooks, no input
// schema validation by mcp-go: the pipeline checks the arguments).

// argumentsStandIn is what mcp-go is given for arguments the front took. A call that reached a tool with it
// unreplaced would be refused for an unknown parameter, not run with no arguments.
const argumentsStandIn = `{"e2b-mcp":"the arguments are kept by the stdio front"}`

// lineArguments is a line's params.arguments as the front's parse of the line finds them: the value's JSON, a
// slice of the line itself, and how many members were read into it (mcp-go refuses a call with two).
type lineArguments struct {
	raw   []byte
	found int
}

// UnmarshalJSON keeps the value's bytes without copying them: encoding/json's Unmarshal hands over a slice of
// the line it decodes, which the front never reuses.
func (a *lineArguments) UnmarshalJSON(b []byte) error {
	a.raw = b
	a.found++
	return nil
}

// takenArguments are a call's arguments that the front took out of its line: decoded, and the JSON they were
// decoded from, as mcp-go sets a request's Arguments and RawArguments.
type takenArguments struct {
	decoded any
	raw     json.RawMessage
}

type takenArgumentsKey struct{}

// takeArguments decodes the arguments of a tools/call line and returns the line with their value replaced by
// argumentsStandIn, and ctx carrying them for restoreArguments. ok is false when the line is handed to mcp-go as
// it is: arguments that are not one JSON object, or that are not a slice of line (the parse that found them
// copied them).
func takeArguments(ctx context.Context, line []byte, args lineArguments) (_ context.Context, _ []byte, ok bool) {
	raw := args.raw
	if args.found != 1 || len(raw) == 0 || raw[0] != '{' {
		return ctx, line, false
	}
	at := cap(line) - cap(raw) // where raw starts in line, if it is a slice of it
	if at < 0 || at+len(raw) > len(line) || &line[at] != &raw[0] {
		return ctx, line, false
	}
	var decoded any
	if json.Unmarshal(raw, &decoded) != nil {
		return ctx, line, false
	}
	handed := make([]byte, 0, len(line)-len(raw)+len(argumentsStandIn))
	handed = append(append(append(handed, line[:at]...), argumentsStandIn...), line[at+len(raw):]...)
	return context.WithValue(ctx, takenArgumentsKey{}, takenArguments{decoded: decoded, raw: raw}), handed, true
}

// restoreArguments puts the arguments the front took (see takeArguments) back into req, the request mcp-go
// decoded from the line with the stand-in. A request without the stand-in is left as it is: one the front did not
// take arguments from, or one of another call made on the same context.
func restoreArguments(ctx context.Context, req mcp.CallToolRequest) mcp.CallToolRequest {
	taken, ok := ctx.Value(takenArgumentsKey{}).(takenArguments)
	if ok && bytes.Equal(req.Params.RawArguments, []byte(argumentsStandIn)) {
		req.Params.Arguments, req.Params.RawArguments = taken.decoded, taken.raw
	}
	return req
}
