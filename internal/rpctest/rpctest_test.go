package rpctest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// Post sends what a 2026-07-28 client sends (the JSON-RPC request, its method and name headers, the bearer token)
// and reads the answer whether the server gives it as JSON or as an event stream.
func TestPostSendsWhatTheProtocolWantsAndReadsBothForms(t *testing.T) {
	var got struct {
		header http.Header
		body   map[string]any
	}
	form := "json"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.header = r.Header.Clone()
		raw, _ := io.ReadAll(r.Body)
		got.body = nil
		_ = json.Unmarshal(raw, &got.body)
		answer := `{"jsonrpc":"2.0","id":7,"result":{"taskId":"t1"}}`
		if form == "sse" {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "event: message\ndata: "+answer+"\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, answer)
	}))
	defer srv.Close()

	for _, form = range []string{"json", "sse"} {
		res, rpcErr := Post(t, srv.URL, "tok", 7, "tools/call", map[string]any{"name": "e2b_exec"})
		if rpcErr != nil || res["taskId"] != "t1" {
			t.Errorf("%s answer read as result %v, error %v", form, res, rpcErr)
		}
	}
	for header, want := range map[string]string{
		"Authorization":           "Bearer tok",
		mcp.HeaderProtocolVersion: mcp.ProtocolVersion20260728,
		mcp.HeaderMethod:          "tools/call",
		mcp.HeaderName:            "e2b_exec",
	} {
		if v := got.header.Get(header); v != want {
			t.Errorf("header %s: %q, want %q", header, v, want)
		}
	}
	if got.body["method"] != "tools/call" || got.body["id"] != float64(7) || got.body["jsonrpc"] != "2.0" {
		t.Errorf("request body %v", got.body)
	}
}

// Answer gives a JSON-RPC error as the error and no result.
func TestAnswerReadsAnError(t *testing.T) {
	res, rpcErr := Answer(t, "tasks/get", []byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"unknown task"}}`))
	if res != nil || rpcErr["message"] != "unknown task" {
		t.Fatalf("result %v, error %v", res, rpcErr)
	}
}

// Exchange sends an id given as JSON as it is, and a notification without one, which it expects answered 202.
func TestExchangeSendsRawIDsAndNotifications(t *testing.T) {
	var ids []json.RawMessage
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var msg struct {
			ID json.RawMessage `json:"id"`
		}
		raw, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(raw, &msg)
		ids = append(ids, msg.ID)
		if msg.ID == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(msg.ID)+`,"result":{}}`)
	}))
	defer srv.Close()

	const id = "123456789012345678901234567890"
	if got := Exchange(t, srv.URL, "", json.RawMessage(id), "tools/call", nil); string(got) != `{"jsonrpc":"2.0","id":`+id+`,"result":{}}` {
		t.Errorf("the answer to a call read as %q", got)
	}
	if got := Exchange(t, srv.URL, "", nil, "notifications/cancelled", nil); got != nil {
		t.Errorf("a notification's answer read as %q, want none", got)
	}
	if len(ids) != 2 || string(ids[0]) != id || ids[1] != nil {
		t.Errorf("the server saw the ids %q, want %s and none", ids, id)
	}
}
