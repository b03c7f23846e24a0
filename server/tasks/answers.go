package tasks

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/state"
)

// answerOf is a task as the extension shows it: a task's result (resultType task) or tasks/get's (complete), with
// the call's result once completed. The TTL and polling interval go out in both spellings the extension's
// revisions used (ttlMs and pollIntervalMs now; ttlSeconds and pollIntervalMilliseconds before), as clients read
// one or the other.
func answerOf(t state.Task, kind mcp.ResultType) map[string]any {
	a := map[string]any{
		"resultType":               kind,
		"taskId":                   t.ID,
		"status":                   t.Status,
		"createdAt":                t.Created.UTC().Format(time.RFC3339Nano),
		"lastUpdatedAt":            t.Updated.UTC().Format(time.RFC3339Nano),
		"ttlMs":                    t.Expires.Sub(t.Created).Milliseconds(),
		"ttlSeconds":               int64(t.Expires.Sub(t.Created).Seconds()),
		"pollIntervalMs":           pollInterval.Milliseconds(),
		"pollIntervalMilliseconds": pollInterval.Milliseconds(),
	}
	if t.StatusMessage != "" {
		a["statusMessage"] = t.StatusMessage
	}
	switch t.Status {
	case state.TaskCompleted:
		a["result"] = json.RawMessage(t.Result)
	case state.TaskFailed: // a call that failed with a JSON-RPC error keeps it as its result
		a["error"] = json.RawMessage(t.Result)
	}
	return a
}

// newTaskID is a task's ID: 128 random bits, which is what guards a task (the extension lets a task ID act as a
// bearer token), in printable ASCII.
func newTaskID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return "task-" + hex.EncodeToString(b)
}
