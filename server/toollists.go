package server

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
)

// toolLists answers tools/list from bytes. The answer is mcp-go's tool list fitted to the client (toolsFor) and,
// in protocol 2026-07-28, marked with the result type and the server's identity; it depends on nothing but the
// client's profile and the request's _meta, since the server's tools are registered once, as it is built (nothing
// outside the package reaches mcp-go's server to add one later, and clients are told the list does not change),
// and neither the policy nor anything else that changes while it runs changes what they say. So mcp-go makes each
// answer once, for the first request of each profile and _meta, and every later one gets its bytes. A request
// mcp-go refuses is not kept, nor one with a cursor (there is one page).
type toolLists struct {
	mu      sync.Mutex
	results map[toolListKey]json.RawMessage
}

// maxToolLists bounds the answers kept: a client may send any _meta.
const maxToolLists = 32

type toolListKey struct {
	profile string
	meta    string // the request's _meta as JSON
}

// answer is the answer to the tools/list request m (line), from bytes when it can be.
func (l *toolLists) answer(ctx context.Context, s *Server, m *stdioMessage, line []byte) []byte {
	meta, err := json.Marshal(m.Params.Meta)
	if err != nil || len(m.Params.Cursor) > 0 {
		return answerOf(m.ID, s.mcp.HandleMessage(ctx, line))
	}
	key := toolListKey{profile: clientOf(ctx, s.cfg).Profile, meta: string(meta)}
	l.mu.Lock()
	result, ok := l.results[key]
	l.mu.Unlock()
	if ok {
		// As mcp-go writes a response: jsonrpc, id, result.
		answer := make([]byte, 0, len(result)+64)
		answer = append(answer, `{"jsonrpc":"2.0","id":`...)
		answer = append(answer, bytes.TrimSpace(m.ID)...)
		answer = append(answer, `,"result":`...)
		answer = append(answer, result...)
		return append(answer, '}')
	}
	resp := s.mcp.HandleMessage(ctx, line)
	answer := answerOf(m.ID, resp)
	if r, ok := resp.(mcp.JSONRPCResponse); ok {
		if result, err := json.Marshal(r.Result); err == nil {
			l.mu.Lock()
			if l.results == nil {
				l.results = map[toolListKey]json.RawMessage{}
			}
			if len(l.results) < maxToolLists {
				l.results[key] = result
			}
			l.mu.Unlock()
		}
	}
	return answer
}
