// Package rpctest sends MCP requests of protocol 2026-07-28 over streamable HTTP as raw JSON-RPC, the way Claude
// Code does, and reads the answers as they are on the wire: for tests that check what such a client sees where an
// MCP client library would hide it (a task answer, a request's _meta).
package rpctest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/internal/ssetest"
)

// Post sends request id (method with params, whose _meta the caller sets) to url, a server's /mcp, with the
// headers protocol 2026-07-28 has on every request and token as a bearer token unless it is empty. It returns the
// answer's result and error; a request that cannot be sent or an answer that is not JSON-RPC fails t. It waits at
// most a minute.
func Post(t testing.TB, url, token string, id int, method string, params map[string]any) (res, rpcErr map[string]any) {
	t.Helper()
	return Answer(t, method, Exchange(t, url, token, id, method, params))
}

// Exchange is Post for any id (a json.RawMessage is sent as it is; nil sends a notification), returning the
// response as it came: the JSON-RPC message, or nil when there is none (a notification's 202).
func Exchange(t testing.TB, url, token string, id any, method string, params map[string]any) []byte {
	t.Helper()
	msg := map[string]any{"jsonrpc": "2.0", "method": method, "params": params}
	if id != nil {
		msg["id"] = id
	}
	body, err := json.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(mcp.HeaderProtocolVersion, mcp.ProtocolVersion20260728)
	req.Header.Set(mcp.HeaderMethod, method)
	if name, ok := params["name"].(string); ok {
		req.Header.Set(mcp.HeaderName, name)
	} else if id, ok := params["taskId"].(string); ok {
		req.Header.Set(mcp.HeaderName, id) // as the Tasks extension has it, for load balancers
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	client := &http.Client{Timeout: time.Minute}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if id == nil && resp.StatusCode != http.StatusAccepted {
		t.Fatalf("the notification %s was answered %s: %s", method, resp.Status, raw)
	}
	if id == nil {
		return nil
	}
	return ssetest.Response(resp.Header.Get("Content-Type"), raw)
}

// Answer is the result and error of raw, the JSON-RPC response to a request of method; one that is not JSON fails t.
func Answer(t testing.TB, method string, raw []byte) (res, rpcErr map[string]any) {
	t.Helper()
	var answer struct {
		Result map[string]any `json:"result"`
		Error  map[string]any `json:"error"`
	}
	if err := json.Unmarshal(raw, &answer); err != nil {
		t.Fatalf("%s answered %q: %v", method, raw, err)
	}
	return answer.Result, answer.Error
}

// UnreadBody is a request body that fails t if it is read: the body of a request whose message a handler before
// the one under test read already (jsonrpc.ReadPosted), which that one must not read again.
func UnreadBody(t testing.TB) io.ReadCloser { return unreadBody{t} }

type unreadBody struct{ t testing.TB }

func (b unreadBody) Read([]byte) (int, error) {
	b.t.Error("a handler read the request's body again, which a handler before it had read")
	return 0, errors.New("the body was read before")
}

func (unreadBody) Close() error { return nil }
