package server

import (
	"encoding/json"
	"strconv"
	"testing"

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
			want := mustJSON(t, f.srv.MCP().HandleMessage(t.Context(), []byte(line)))
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
		want := toolListResult(t, mustDecode(t, mustJSON(t, f.srv.MCP().HandleMessage(t.Context(), []byte(line)))))
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
