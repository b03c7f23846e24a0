package server

import (
	"bytes"
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

func decodeWithNumbers(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// Arguments without a number are not parsed again: mcp-go's map is both forms, and it is what decoding them here
// gives (escapes resolved, the last of duplicate names).
func TestCallArgsWithoutNumbersTakeMCPGoMap(t *testing.T) {
	for _, args := range []string{
		`{"sandbox_id":"abc","path":"/a","content":"line\n\t\"q\" \u003c\u0026\u003e \ud83d\ude00"}`,
		`{"upload_files":[{"session_path":"a","sandbox_path":"/b"}],"env_vars":{"K":"v"},"x":null,"t":true}`,
		`{"path":"first","path":"second","Path":"case"}`,
		`{}`,
	} {
		req := wireRequest(t, args)
		wire, _ := req.Params.Arguments.(map[string]any)
		view, decoded := callArgs(req)
		if wire == nil || reflect.ValueOf(view).UnsafePointer() != reflect.ValueOf(wire).UnsafePointer() ||
			reflect.ValueOf(decoded).UnsafePointer() != reflect.ValueOf(wire).UnsafePointer() {
			t.Errorf("%s: callArgs parsed the arguments again instead of taking mcp-go's map", args)
		}
		if own := decodeWithNumbers(t, req.Params.RawArguments); !reflect.DeepEqual(decoded, own) {
			t.Errorf("%s: mcp-go's map %#v differs from decoding the JSON here %#v", args, decoded, own)
		}
	}
}

// A number anywhere needs its literal: decoded then holds json.Number (3.0 is not 3 to an integer parameter) and
// view float64.
func TestCallArgsWithNumbersDecoded(t *testing.T) {
	for _, args := range []string{
		`{"sandbox_id":"abc","timeout_ms":3.0}`,
		`{"upload_files":[{"session_path":"a","n":[1e3]}]}`,
	} {
		req := wireRequest(t, args)
		view, decoded := callArgs(req)
		if own := decodeWithNumbers(t, req.Params.RawArguments); !reflect.DeepEqual(decoded, own) {
			t.Errorf("%s: decoded %#v, want %#v", args, decoded, own)
		}
		if !reflect.DeepEqual(view, req.Params.Arguments) {
			t.Errorf("%s: view %#v, want the float64 form %#v", args, view, req.Params.Arguments)
		}
	}
}
