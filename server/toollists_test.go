package server

import (
	"encoding/json"
	"reflect"
	"strconv"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/tools"
)

// What a stdio client's tools/list gets, asked twice (the second answered from bytes), is mcp-go's own answer for
// that client: for every profile --client-profile names.
func TestToolListsAreMCPGosForEveryProfile(t *testing.T) {
	for _, profile := range tools.ClientProfiles() {
		t.Run(profile, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{mutate: func(c *Config, _ *e2btest.Server) { c.ClientProfile = profile }})
			r := newRawStdio(t, f.srv)
			r.initialize(t)
			line := `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`
			want := mustJSON(t, f.srv.mcp.HandleMessage(t.Context(), []byte(line)))
			for id := 2; id < 4; id++ {
				r.write(t, `{"jsonrpc":"2.0","id":`+strconv.Itoa(id)+`,"method":"tools/list"}`)
				if got := toolListResult(t, r.answer(t, id)); got != toolListResult(t, mustDecode(t, want)) {
					t.Errorf("tools/list %d:\n%.400s\nmcp-go's:\n%.400s", id, got, want)
				}
			}
		})
	}
}

// Clients of protocol 2026-07-28 say who they are in each request, so one stdio server may be asked by one client
// and then by another: each gets the list fitted to it, not the one kept for the client before.
func TestToolListsFollowTheClient(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	r := newRawStdio(t, f.srv)
	lists := map[string]string{}
	for i, client := range []string{"codex-mcp-client", "claude-code", "codex-mcp-client", "some-client",
		"claude-code", "some-client"} {
		id := i + 2
		params := `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
			`"io.modelcontextprotocol/clientInfo":{"name":"` + client + `","version":"1"},` +
			`"io.modelcontextprotocol/clientCapabilities":{}}}`
		line := `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/list","params":` + params + `}`
		want := toolListResult(t, mustDecode(t, mustJSON(t, f.srv.mcp.HandleMessage(t.Context(), []byte(line)))))
		r.write(t, line)
		got := toolListResult(t, r.answer(t, id))
		if got != want {
			t.Errorf("tools/list %d of %s:\n%.400s\nmcp-go's:\n%.400s", id, client, got, want)
		}
		lists[client] = got
	}
	if lists["codex-mcp-client"] == lists["claude-code"] {
		t.Fatal("the clients' lists are alike, so this test shows nothing: pick clients whose lists differ")
	}
}

// toolListResult is an answer's result as JSON; an answer without one fails t.
func toolListResult(t *testing.T, answer map[string]any) string {
	t.Helper()
	if answer["result"] == nil {
		t.Fatalf("tools/list answered %.400v", answer)
	}
	return mustJSON(t, answer["result"])
}

func mustDecode(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// The tools/list answers are kept as bytes (toolLists), and the server tells clients its tools do not change
// (listChanged false): both hold because the tools are registered once, as the server is built. Nothing outside the
// package reaches mcp-go's server, where a tool could be added later.
func TestToolsCannotBeAddedLate(t *testing.T) {
	mcpServer := reflect.TypeFor[*mcpserver.MCPServer]()
	srv := reflect.TypeFor[*Server]()
	for i := range srv.NumMethod() {
		m := srv.Method(i)
		for j := range m.Type.NumOut() {
			if m.Type.Out(j) == mcpServer {
				t.Errorf("(*Server).%s gives out mcp-go's server, where tools could be added after a tools/list", m.Name)
			}
		}
	}
	for i := range srv.Elem().NumField() {
		if f := srv.Elem().Field(i); f.IsExported() && f.Type == mcpServer {
			t.Errorf("Server.%s is mcp-go's server, where tools could be added after a tools/list", f.Name)
		}
	}
	var init struct {
		Result struct {
			Capabilities mcp.ServerCapabilities `json:"capabilities"`
		} `json:"result"`
	}
	f := newFixture(t, fixtureOpts{})
	answer, _ := json.Marshal(f.srv.mcp.HandleMessage(t.Context(), []byte(`{"jsonrpc":"2.0","id":1,"method":`+
		`"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)))
	if err := json.Unmarshal(answer, &init); err != nil || init.Result.Capabilities.Tools == nil {
		t.Fatalf("initialize answered %s: %v", answer, err)
	}
	if init.Result.Capabilities.Tools.ListChanged {
		t.Errorf("the server tells clients its tool list may change, and tools/list is answered from bytes")
	}
}
