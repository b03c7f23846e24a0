package tools

import (
	"encoding/json"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

type stringArgs struct {
	SandboxID string `json:"sandbox_id"`
	Path      string `json:"path"`
	Content   string `json:"content"`
}

// Arguments that are all string parameters bind from the map mcp-go decoded, exactly as encoding/json binds the
// JSON: over the defaults, with escapes, odd names, nulls and other types alike.
func TestBindFromDecodedIsBindFromJSON(t *testing.T) {
	b := newBinder(stringArgs{Path: "/default"})
	for _, raw := range []string{
		`{}`,
		`{"sandbox_id":"sb","path":"/a","content":"x"}`,
		`{"content":"tab\tquote\"backslash\\ \u00e9 \ud83d\ude00 nul\u0000 bad\udc00"}`,
		`{"content":"a","content":"last wins"}`,
		`{"Content":"another case"}`,
		`{"content":null}`,
		`{"content":5}`,
		`{"sandbox_id":"sb","extra":"unknown"}`,
		`null`,
	} {
		var req mcp.CallToolRequest
		if err := json.Unmarshal([]byte(`{"name":"t","arguments":`+raw+`}`), &req.Params); err != nil {
			t.Fatal(err)
		}
		got, gotErr := b.bind(req)
		want := stringArgs{Path: "/default"}
		var wantErr error
		if raw != "null" {
			wantErr = json.Unmarshal([]byte(raw), &want)
		}
		if got != want || (gotErr == nil) != (wantErr == nil) {
			t.Errorf("%s: bound %+v (%v), encoding/json binds %+v (%v)", raw, got, gotErr, want, wantErr)
		}
	}
}

// Such arguments are taken from the decoded map, not decoded again from their JSON: a 1 MiB e2b_write_file is one
// pass over its content less. (Here the JSON says otherwise than the map, which no decoded call does, to tell the
// two apart.)
func TestBindTakesTheDecodedStrings(t *testing.T) {
	b := newBinder(stringArgs{})
	var req mcp.CallToolRequest
	req.Params.Arguments = map[string]any{"content": "from the map"}
	req.Params.RawArguments = json.RawMessage(`{"content":"from the JSON"}`)
	if got, err := b.bind(req); err != nil || got.Content != "from the map" {
		t.Errorf("bound %+v (%v), want the map's content", got, err)
	}
	// A map an in-process caller made (no JSON) is encoded and decoded, which mends invalid UTF-8.
	req.Params.RawArguments = nil
	req.Params.Arguments = map[string]any{"content": "bad\xff"}
	if got, err := b.bind(req); err != nil || got.Content != "bad\uFFFD" {
		t.Errorf("bound %q (%v), want the invalid byte mended as encoding/json does", got.Content, err)
	}
	// A struct with a parameter that is not a string always decodes its JSON.
	if nb := newBinder(bindArgs{}); nb.strings != nil {
		t.Errorf("a binder of %T takes arguments from the map", bindArgs{})
	}
}
