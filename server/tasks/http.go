package tasks

import (
	"net/http"

	"github.com/e2b-mcp/e2b-mcp/internal/jsonrpc"
)

// HTTP is the front of the streamable HTTP transport: it answers a POST of one of the Tasks extension's messages
// itself, writing the answer with respond (which writes it on the POST's own stream when a notification of the
// call has made it one), and hands every other request to next. It reads the message an earlier handler read, if
// one did (jsonrpc.ReadPosted).
func (ts *Tasks) HTTP(next http.Handler, respond func(w http.ResponseWriter, answer []byte)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		posted, r, err := jsonrpc.ReadPosted(r)
		if err != nil {
			next.ServeHTTP(w, r) // mcp-go answers the unreadable body
			return
		}
		m, ours := ts.take(posted)
		if !ours {
			next.ServeHTTP(w, r)
			return
		}
		respond(w, ts.Answer(r.Context(), m, posted.Body))
	})
}
