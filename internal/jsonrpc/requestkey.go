package jsonrpc

import (
	"crypto/sha256"
	"encoding/json"

	"github.com/mark3labs/mcp-go/mcp"
)

// RequestKey is what matches a request's ID (its JSON) to a notifications/cancelled's requestId: the same key for
// the IDs mcp-go takes for one (mcp.RequestId: 7, 7.0 and 70e-1 alike, "a" and "\u0061" alike, 7 and "7" not),
// as a SHA-256, since an ID has no bound on its length and a key may be kept a while. ok is false for what is no
// request ID (null, an object, an array, a boolean, not JSON).
func RequestKey(raw json.RawMessage) (key string, ok bool) {
	var id mcp.RequestId
	if json.Unmarshal(raw, &id) != nil || id.IsNil() {
		return "", false
	}
	sum := sha256.Sum256([]byte(id.String()))
	return string(sum[:]), true
}
