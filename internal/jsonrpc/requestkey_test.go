package jsonrpc

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// Two request IDs have one key exactly when mcp-go takes them for the same ID, and a key is small whatever the
// ID's length.
func TestRequestKey(t *testing.T) {
	long := strings.Repeat("x", 100_000)
	ids := []string{
		`7`, `7.0`, `70e-1`, ` 7 `, `0.7e1`, `7.5`, `8`, `-7`, `"7"`, `"a"`, `"\u0061"`, `"A"`, `""`, `0`, `-0`,
		`9007199254740993`, `9007199254740993.0`, `9007199254740992`, `12345678901234567890`,
		`12345678901234567890.0`, `"` + long + `"`, `"` + long + `y"`, strings.Repeat("7", 100_000),
		strings.Repeat("7", 99_999) + "8",
	}
	for _, a := range ids {
		ka, ok := RequestKey(json.RawMessage(a))
		if !ok {
			t.Errorf("%.40s: no key", a)
			continue
		}
		if len(ka) != 32 {
			t.Errorf("%.40s: a key of %d bytes", a, len(ka))
		}
		for _, b := range ids {
			kb, _ := RequestKey(json.RawMessage(b))
			if same, mcpSame := ka == kb, mcpID(t, a) == mcpID(t, b); same != mcpSame {
				t.Errorf("%.40s and %.40s: same key %v, mcp-go takes them for one ID: %v", a, b, same, mcpSame)
			}
		}
	}
	for _, pair := range [][2]string{{`7`, `7.0`}, {`7`, `70e-1`}, {`"a"`, `"\u0061"`}} {
		a, _ := RequestKey(json.RawMessage(pair[0]))
		if b, _ := RequestKey(json.RawMessage(pair[1])); a != b {
			t.Errorf("%s and %s have different keys", pair[0], pair[1])
		}
	}
	for _, none := range []string{`null`, `{}`, `{"x":1}`, `[7]`, `true`, ``, ` `, `7x`, `"open`} {
		if k, ok := RequestKey(json.RawMessage(none)); ok {
			t.Errorf("%q has the key %x; it is no request ID", none, k)
		}
	}
}

// mcpID is the ID as mcp-go tells IDs apart (its in-flight requests are keyed on it).
func mcpID(t *testing.T, raw string) string {
	var id mcp.RequestId
	if err := json.Unmarshal([]byte(raw), &id); err != nil {
		t.Fatalf("mcp-go does not read the ID %.40s: %v", raw, err)
	}
	return id.String()
}
