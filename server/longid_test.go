package server

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/internal/rpctest"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
	"github.com/e2b-mcp/e2b-mcp/tools"
)

// A client may give a call any JSON-RPC ID, however long: the protocol sets no bound. A 100 KB ID, a string or a
// number of 100,000 digits, comes back as it was sent, and the result the model reads stays within the result
// limit (the ID is no part of it). A cancel that comes before such a call still cancels it (what is kept of it
// meanwhile is small: see server/mcphttp's TestLongIDsKeptSmall).
func TestLongRequestIDs(t *testing.T) {
	const limit = tools.MinResultLimit
	f := newFixture(t, fixtureOpts{transport: TransportHTTP,
		mutate: func(c *Config, _ *e2btest.Server) { c.Tools.ResultLimit = limit }})
	url := serveHTTP(t, f) + PathMCP
	sandbox := callStructured(t, "e2b_create_sandbox", &httpRaw{url: url}, false, "e2b_create_sandbox",
		map[string]any{})["sandbox_id"].(string)
	call := func(command string) map[string]any {
		return map[string]any{"name": "e2b_exec", "arguments": map[string]any{"sandbox_id": sandbox, "command": command},
			"_meta": requestMeta(false)}
	}
	for kind, id := range map[string]json.RawMessage{
		"string": json.RawMessage(`"` + strings.Repeat("x", 100_000) + `"`),
		"number": json.RawMessage(strings.Repeat("7", 100_000)),
	} {
		t.Run(kind, func(t *testing.T) {
			var answer struct {
				ID     json.RawMessage `json:"id"`
				Result json.RawMessage `json:"result"`
			}
			raw := rpctest.Exchange(t, url, "", id, "tools/call", call("head -c 30000 /dev/zero | tr '\\0' x"))
			if err := json.Unmarshal(raw, &answer); err != nil || !bytes.Equal(answer.ID, id) {
				t.Fatalf("the answer to a call of a %d-byte %s ID does not carry it: %.200s", len(id), kind, raw)
			}
			if n := copySize(answer.Result); n < 0 || n > limit {
				t.Errorf("the result of a call of a %d-byte ID is %d bytes as the client reads it, over the limit of %d",
					len(id), n, limit)
			}

			rpctest.Exchange(t, url, "", nil, "notifications/cancelled",
				map[string]any{"requestId": id, "reason": "the user pressed Stop", "_meta": requestMeta(false)})
			// A cancelled call is not answered (the protocol has its receiver send nothing), or answered with an error.
			if raw := rpctest.Exchange(t, url, "", id, "tools/call", call("exec sleep 4248")); len(raw) > 0 {
				if res, rpcErr := rpctest.Answer(t, "tools/call", raw); rpcErr == nil && res["isError"] != true {
					t.Errorf("a call whose cancel came first ran: %v", res)
				}
			}
			// envd lists a killed process until it has reaped it, so the listing may lag the answer a little.
			waitfor.Until(t, 10*time.Second, "the command of a call whose cancel came first is gone", func() bool {
				return !commandRuns(t, f.emu, f.emu.URL(), sandbox, "sleep 4248")
			})
		})
	}
}
