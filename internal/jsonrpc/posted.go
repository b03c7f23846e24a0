package jsonrpc

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
)

// Posted is a JSON-RPC message POSTed over streamable HTTP, read once for the handlers in front of mcp-go: the
// cancels of protocol 2026-07-28 and the Tasks extension both look at every POST, and a body may be megabytes (an
// e2b_write_file's content), so the first of them to look reads the body and parses its envelope, and the next
// finds both on the request's context (ReadPosted).
type Posted struct {
	Body     []byte
	Envelope Envelope
	// Err is why Body is no message the handlers read (not JSON, a batch, a field of the wrong type): they leave
	// it to mcp-go, which answers it.
	Err error
}

// Envelope is what the handlers in front of mcp-go read of a message. The params they read, each only for some
// methods, are kept raw (but _meta, which all of them read): a field of the wrong type that one handler does not
// read must not keep another from reading the message (a notifications/cancelled with a numeric params.name is
// still a cancel to keep from mcp-go).
type Envelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		Name           json.RawMessage `json:"name"`           // a tools/call's tool
		TaskID         json.RawMessage `json:"taskId"`         // the Tasks extension's requests'
		InputResponses json.RawMessage `json:"inputResponses"` // tasks/update's
		RequestID      json.RawMessage `json:"requestId"`      // notifications/cancelled's
		Meta           *mcp.Meta       `json:"_meta"`
		Arguments      any             `json:"arguments"` // a tools/call's, decoded once (TakeArguments)
	} `json:"params"`
}

type postedKey struct{}

// ReadPosted is r's message: the one an earlier handler read, carried on r's context, or else r's body read and
// parsed now. The request returned carries the message on its context, with r's body put back for mcp-go; hand it
// on instead of r. An error is the body's read's, whose request is for mcp-go to answer.
func ReadPosted(r *http.Request) (*Posted, *http.Request, error) {
	if p, ok := r.Context().Value(postedKey{}).(*Posted); ok {
		return p, r, nil
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, r, err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	p := &Posted{Body: body}
	p.Err = json.Unmarshal(body, &p.Envelope)
	return p, r.WithContext(context.WithValue(r.Context(), postedKey{}, p)), nil
}
