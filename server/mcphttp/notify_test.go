package mcphttp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// An answer the server makes without mcp-go (Respond) follows the call's notifications on the POST's stream: a
// notification turns the POST's response into an SSE stream, and the answer is its last event. Without one, the
// answer is a plain JSON body.
func TestRespondFollowsTheCallsNotifications(t *testing.T) {
	const answer = `{"jsonrpc":"2.0","id":7,"result":{}}`
	progress := mcp.JSONRPCNotification{JSONRPC: mcp.JSONRPC_VERSION,
		Notification: mcp.Notification{Method: string(mcp.MethodNotificationProgress)}}
	for _, notified := range []bool{true, false} {
		w := httptest.NewRecorder()
		handler := withPOSTNotifier(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			if notified {
				p, ok := w.(*postStream)
				if !ok {
					t.Fatalf("the POST's handler writes to a %T, not the POST's stream", w)
				}
				if err := p.notify(context.Background(), progress); err != nil {
					t.Fatal(err)
				}
			}
			Respond(w, []byte(answer))
		}))
		handler.ServeHTTP(w, httptest.NewRequest(http.MethodPost, PathMCP, strings.NewReader("{}")))
		body, kind := w.Body.String(), w.Header().Get("Content-Type")
		if !notified {
			if kind != "application/json" || body != answer {
				t.Errorf("without a notification: %s %q, want application/json %q", kind, body, answer)
			}
			continue
		}
		events := strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n")
		if kind != "text/event-stream" || len(events) != 2 || !strings.Contains(events[0], "notifications/progress") ||
			events[1] != "event: message\ndata: "+answer {
			t.Errorf("after a notification: %s %q, want the notification's event, then the answer's", kind, body)
		}
	}
}
