package server

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// wireRequest is a tools/call as mcp-go decodes it from the wire.
func wireRequest(t *testing.T, args string) mcp.CallToolRequest {
	t.Helper()
	var req mcp.CallToolRequest
	if err := json.Unmarshal([]byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"e2b_write_file","arguments":`+args+`}}`), &req); err != nil {
		t.Fatal(err)
	}
	return req
}

// The arguments of a call from the wire are not parsed again, numbers or not: mcp-go's map is what the policy and
// the audit read, and it is what decoding the JSON here gives (escapes resolved, the last of duplicate names,
// numbers as float64).
func TestCallArgsTakeMCPGoMap(t *testing.T) {
	for _, args := range []string{
		`{"sandbox_id":"abc","path":"/a","content":"line\n\t\"q\" \u003c\u0026\u003e \ud83d\ude00"}`,
		`{"upload_files":[{"session_path":"a","sandbox_path":"/b"}],"env_vars":{"K":"v"},"x":null,"t":true}`,
		`{"path":"first","path":"second","Path":"case"}`,
		`{"sandbox_id":"abc","timeout_ms":3.0}`,
		`{"upload_files":[{"session_path":"a","n":[1e3]}]}`,
		`{}`,
	} {
		req := wireRequest(t, args)
		wire, _ := req.Params.Arguments.(map[string]any)
		view := callArgs(req)
		if wire == nil || reflect.ValueOf(view).UnsafePointer() != reflect.ValueOf(wire).UnsafePointer() {
			t.Errorf("%s: callArgs parsed the arguments again instead of taking mcp-go's map", args)
		}
		var own map[string]any
		if err := json.Unmarshal(req.Params.RawArguments, &own); err != nil || !reflect.DeepEqual(view, own) {
			t.Errorf("%s: mcp-go's map %#v differs from decoding the JSON here %#v (%v)", args, view, own, err)
		}
	}
	for _, args := range []string{`[1]`, `"x"`, `null`} {
		if view := callArgs(wireRequest(t, args)); view != nil {
			t.Errorf("%s: got %#v, want nil for arguments that are not an object", args, view)
		}
	}
}

// An in-process caller's arguments given as JSON or as a struct are seen as their JSON decodes.
func TestCallArgsInProcess(t *testing.T) {
	var req mcp.CallToolRequest
	req.Params.Arguments = json.RawMessage(`{"sandbox_id":"abc","timeout_ms":3}`)
	want := map[string]any{"sandbox_id": "abc", "timeout_ms": 3.0}
	if got := callArgs(req); !reflect.DeepEqual(got, want) {
		t.Errorf("raw JSON: got %#v, want %#v", got, want)
	}
	req.Params.Arguments = struct {
		SandboxID string `json:"sandbox_id"`
		TimeoutMS int    `json:"timeout_ms"`
	}{"abc", 3}
	if got := callArgs(req); !reflect.DeepEqual(got, want) {
		t.Errorf("struct: got %#v, want %#v", got, want)
	}
}
