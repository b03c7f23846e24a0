package jsonrpc

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/mark3labs/mcp-go/mcp"
)

// A tool call's arguments are the bulk of a big call (an e2b_write_file of 1 MiB), and mcp-go parses a message
// several times over: its transports to read the envelope, its handler (MCPServer.HandleMessage) to read the
// envelope again, to check its member names, to decode the request, whose params decode their arguments twice
// more. So the server's fronts (the stdio front, and the HTTP handlers in front of mcp-go's streamable and SSE
// transports) decode a call's arguments in their one parse of the message, and hand mcp-go the message with the
// arguments' value (found by argumentsAt, a scan that decodes nothing) replaced by argumentsStandIn; the call
// pipeline puts them back into the request (RestoreArguments) before anything of the server reads it. Every step
// of mcp-go's handling still runs on the call as it did (the envelope's checks, the session, the cancels, the
// hooks, the tool's lookup and filters, the middleware, the result's limits); the only difference is what
// mcp-go's own steps before the middleware see of the arguments, and the server has none that reads them (no
// request hooks, no input schema validation by mcp-go: the pipeline checks the arguments).

// argumentsStandIn is what mcp-go is given for arguments a front took. A call that reached a tool with it
// unreplaced would be refused for an unknown parameter, not run with no arguments.
const argumentsStandIn = `{"e2b-mcp":"the arguments are kept by the server's front"}`

// takenArguments are a call's arguments that a front took out of its message: decoded, and the JSON they were
// decoded from, as mcp-go sets a request's Arguments and RawArguments.
type takenArguments struct {
	decoded any
	raw     json.RawMessage
}

type takenArgumentsKey struct{}

// TakeArguments returns msg, a tools/call, with its arguments' value replaced by argumentsStandIn, and ctx carrying
// them for RestoreArguments; decoded is the value that the front's parse of msg, the one that found msg valid,
// decoded from them. ok is false when msg is to be handed to mcp-go as it is: arguments that are not one JSON
// object, or a message whose arguments argumentsAt cannot tell apart.
func TakeArguments(ctx context.Context, msg []byte, decoded any) (_ context.Context, _ []byte, ok bool) {
	if _, isObject := decoded.(map[string]any); !isObject {
		return ctx, msg, false
	}
	start, end, found := argumentsAt(msg)
	if !found || msg[start] != '{' {
		return ctx, msg, false
	}
	handed := make([]byte, 0, len(msg)-(end-start)+len(argumentsStandIn))
	handed = append(append(append(handed, msg[:start]...), argumentsStandIn...), msg[end:]...)
	if !json.Valid(handed) { // a check of the splice, cheap without the arguments
		return ctx, msg, false
	}
	taken := takenArguments{decoded: decoded, raw: msg[start:end:end]}
	return context.WithValue(ctx, takenArgumentsKey{}, taken), handed, true
}

// argumentsAt finds the value of params.arguments in line, a JSON object encoding/json decoded: line[start:end].
// found is false unless the member that encoding/json decoded as params.arguments is certainly the one found: the
// line has one "params" and it has one "arguments", and no other member of either object is a name encoding/json
// might take for them (one that differs only in case, or that holds an escape or a byte beyond ASCII). mcp-go
// refuses most lines that have those, and the rest it is given whole.
func argumentsAt(line []byte) (start, end int, found bool) {
	pStart, pEnd, found := memberAt(line, skipSpace(line, 0), "params")
	if !found {
		return 0, 0, false
	}
	start, end, found = memberAt(line[:pEnd], pStart, "arguments")
	return start, end, found
}

// memberAt finds the value of the member name in the JSON object at b[i]: b[start:end]; see argumentsAt.
func memberAt(b []byte, i int, name string) (start, end int, found bool) {
	if i >= len(b) || b[i] != '{' {
		return 0, 0, false
	}
	for i = skipSpace(b, i+1); i < len(b) && b[i] == '"'; {
		keyEnd := stringEnd(b, i)
		if keyEnd < 0 {
			return 0, 0, false
		}
		key := b[i+1 : keyEnd-1]
		exact := string(key) == name
		if !exact && (bytes.EqualFold(key, []byte(name)) || !plainKey(key)) {
			return 0, 0, false
		}
		i = skipSpace(b, keyEnd)
		if i >= len(b) || b[i] != ':' {
			return 0, 0, false
		}
		i = skipSpace(b, i+1)
		valueEnd := valueEnd(b, i)
		if valueEnd < 0 {
			return 0, 0, false
		}
		if exact {
			if found {
				return 0, 0, false // a second one
			}
			start, end, found = i, valueEnd, true
		}
		i = skipSpace(b, valueEnd)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	return start, end, found
}

// plainKey reports whether a member name is printable ASCII without escapes: a name encoding/json matches to a
// field only by ASCII case.
func plainKey(key []byte) bool {
	for _, c := range key {
		if c == '\\' || c < 0x20 || c >= 0x80 {
			return false
		}
	}
	return true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd is the index just past the JSON string that starts at b[i] (a '"'), or -1.
func stringEnd(b []byte, i int) int {
	for i++; ; {
		q := bytes.IndexByte(b[i:], '"')
		if q < 0 {
			return -1
		}
		i += q
		escapes := 0
		for j := i - 1; b[j] == '\\'; j-- {
			escapes++
		}
		i++
		if escapes%2 == 0 {
			return i
		}
	}
}

// valueEnd is the index just past the JSON value that starts at b[i], or -1; b is valid JSON.
func valueEnd(b []byte, i int) int {
	depth := 0
	for ; i < len(b); i++ {
		switch b[i] {
		case '"':
			if i = stringEnd(b, i); i < 0 {
				return -1
			}
			if depth == 0 {
				return i
			}
			i--
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				return i + 1
			}
			if depth < 0 {
				return i // the end of the object holding a number, true, false or null
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
		}
	}
	if depth == 0 {
		return i
	}
	return -1
}

// restoreArguments puts the arguments the front took (see takeArguments) back into req, the request mcp-go
// decoded from the line with the stand-in. A request without the stand-in is left as it is: one the front did not
// take arguments from, or one of another call made on the same context.
func RestoreArguments(ctx context.Context, req mcp.CallToolRequest) mcp.CallToolRequest {
	taken, ok := ctx.Value(takenArgumentsKey{}).(takenArguments)
	if ok && bytes.Equal(req.Params.RawArguments, []byte(argumentsStandIn)) {
		req.Params.Arguments, req.Params.RawArguments = taken.decoded, taken.raw
	}
	return req
}
