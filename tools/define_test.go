package tools

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// upper is an argument type with a decoding of its own, as a tool's enum or duration may have.
type upper string

func (u *upper) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	if s == "" {
		return errors.New("empty")
	}
	*u = upper(strings.ToUpper(s))
	return nil
}

type bindingArgs struct {
	Mode  upper          `json:"mode"`
	Value any            `json:"value"`
	Extra map[string]any `json:"extra"`
	Count int            `json:"count"`
}

// A tool's arguments are what encoding/json makes of the JSON the client sent, whatever the argument types: a
// field with its own UnmarshalJSON is decoded by it, a number in a field of any type is a float64, and a value
// of the wrong type is named in the error.
func TestArgumentsBoundByEncodingJSON(t *testing.T) {
	t.Parallel()
	var got bindingArgs
	tool := define(newBase(Deps{}), definition[bindingArgs, struct{}]{
		name: "bind_test",
		run: func(_ context.Context, _ Caller, a *bindingArgs) (*struct{}, error) {
			got = *a
			return &struct{}{}, nil
		},
	})
	call := func(raw string) *mcp.CallToolResult {
		t.Helper()
		var req mcp.CallToolRequest
		if err := json.Unmarshal([]byte(`{"name":"bind_test","arguments":`+raw+`}`), &req.Params); err != nil {
			t.Fatal(err)
		}
		got = bindingArgs{}
		res, err := tool.Handler(WithCaller(t.Context(), Caller{Owner: "a", Session: "b"}), req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := call(`{"mode":"fast","value":3,"extra":{"n":1.5},"count":2}`); res.IsError {
		t.Fatalf("refused: %s", resultText(res))
	}
	if got.Mode != "FAST" || got.Value != float64(3) || got.Extra["n"] != 1.5 || got.Count != 2 {
		t.Errorf("bound %#v; want encoding/json's {FAST 3.0 map[n:1.5] 2}", got)
	}
	for raw, want := range map[string]string{
		`{"mode":""}`:         "Invalid arguments: empty",
		`{"count":"2"}`:       "Invalid parameter count: expected an integer, got string",
		`{"count":1.5}`:       "Invalid parameter count: expected an integer, got number 1.5",
		`[1]`:                 "Invalid arguments: expected a JSON object of parameters, got array",
		`{"extra":{"n":1e9}}`: "",
	} {
		res := call(raw)
		if text := resultText(res); res.IsError != (want != "") || text != want && want != "" {
			t.Errorf("%s: got %q (isError %v), want %q", raw, text, res.IsError, want)
		}
	}
}
