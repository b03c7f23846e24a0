// Package jsonrpc encodes the JSON-RPC answers the server writes itself, in front of mcp-go: a result, an error,
// or mcp-go's own answer, each as the bytes of one message; reads a POSTed message once for the HTTP handlers in
// front of mcp-go (Posted); keeps a tool call's arguments, decoded once, out of what mcp-go parses
// (TakeArguments); and matches a cancel's requestId to its call as mcp-go does (RequestKey).
package jsonrpc

import (
	"encoding/json"

	"github.com/mark3labs/mcp-go/mcp"
)

// Result is the answer to request id with result; a result that cannot be encoded is answered as an internal error.
func Result(id json.RawMessage, result any) []byte {
	b, err := json.Marshal(map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "id": id, "result": result})
	if err != nil {
		return Error(id, mcp.INTERNAL_ERROR, "the result could not be encoded: "+err.Error(), nil)
	}
	return b
}

// Error is the error answer to request id; data is left out when nil.
func Error(id json.RawMessage, code int, message string, data any) []byte {
	e := map[string]any{"code": code, "message": message}
	if data != nil {
		e["data"] = data
	}
	b, err := json.Marshal(map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "id": id, "error": e})
	if err != nil { // data that cannot be encoded: the error goes without it
		b, _ = json.Marshal(map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "id": id,
			"error": map[string]any{"code": code, "message": message}}) // plain values
	}
	return b
}

// Encode is resp, an answer mcp-go made to request id, as its bytes; one that cannot be encoded is answered as an
// internal error.
func Encode(id json.RawMessage, resp mcp.JSONRPCMessage) []byte {
	b, err := json.Marshal(resp)
	if err != nil {
		return Error(id, mcp.INTERNAL_ERROR, "the result could not be encoded: "+err.Error(), nil)
	}
	return b
}
