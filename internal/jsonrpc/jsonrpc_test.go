package jsonrpc

import (
	"encoding/json"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// answer decodes an encoded answer, failing t when it is not one JSON-RPC message of request id.
func answer(t *testing.T, raw []byte, id string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%q is not JSON: %v", raw, err)
	}
	if m["jsonrpc"] != "2.0" || string(mustJSON(t, m["id"])) != id {
		t.Fatalf("%s is not an answer of JSON-RPC 2.0 to request %s", raw, id)
	}
	return m
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Each answer keeps its request's ID as it came (a string or a number), and one that cannot be encoded becomes an
// internal error of the same request, never a message without an ID or no message at all.
func TestAnswers(t *testing.T) {
	for _, id := range []string{`7`, `"a-7"`} {
		got := answer(t, Result(json.RawMessage(id), map[string]any{"resultType": "complete"}), id)
		if res, _ := got["result"].(map[string]any); res["resultType"] != "complete" || got["error"] != nil {
			t.Errorf("Result: %v", got)
		}

		got = answer(t, Error(json.RawMessage(id), -32021, "missing", nil), id)
		e, _ := got["error"].(map[string]any)
		if _, has := e["data"]; has || e["code"] != -32021.0 || e["message"] != "missing" || got["result"] != nil {
			t.Errorf("Error without data: %v", got)
		}
		got = answer(t, Error(json.RawMessage(id), -32021, "missing", map[string]any{"x": 1}), id)
		if e, _ := got["error"].(map[string]any); e["data"] == nil {
			t.Errorf("Error with data: %v", got)
		}
		got = answer(t, Error(json.RawMessage(id), mcp.INVALID_PARAMS, "bad", make(chan int)), id)
		if e, _ := got["error"].(map[string]any); e["code"] != float64(mcp.INVALID_PARAMS) || e["message"] != "bad" {
			t.Errorf("Error with data that cannot be encoded: %v", got)
		}

		for what, raw := range map[string][]byte{
			"Result": Result(json.RawMessage(id), make(chan int)),
			"Encode": Encode(json.RawMessage(id), make(chan int)),
		} {
			got = answer(t, raw, id)
			if e, _ := got["error"].(map[string]any); e["code"] != float64(mcp.INTERNAL_ERROR) {
				t.Errorf("%s of what cannot be encoded: %v, want an internal error", what, got)
			}
		}
		resp := mcp.NewJSONRPCResultResponse(mcp.NewRequestId(7), mcp.NewToolResultText("hi"))
		if got := answer(t, Encode(json.RawMessage(`7`), resp), `7`); got["result"] == nil {
			t.Errorf("Encode of mcp-go's answer: %v", got)
		}
	}
}
