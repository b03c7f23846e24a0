package jsonrpc

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A POSTed message is read and parsed once: the request ReadPosted returns carries it, so that the next handler's
// ReadPosted is the same message, and its body is whole for mcp-go, whether the body is a message the handlers
// read or not (mcp-go answers what they cannot).
func TestReadPostedOnceBodyKept(t *testing.T) {
	for _, raw := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5,"taskId":7,"requestId":[1]}}`,
		`[{"jsonrpc":"2.0","id":1,"method":"tools/list"}]`,
		`{"jsonrpc":"2.0","id":1,"method":`,
	} {
		p, r, err := ReadPosted(httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(raw)))
		if err != nil || string(p.Body) != raw {
			t.Fatalf("read %q (%v), want %q", p.Body, err, raw)
		}
		again, r, err := ReadPosted(r)
		if again != p || err != nil {
			t.Errorf("%s: read again (%v), not the message read first", raw, err)
		}
		if body, err := io.ReadAll(r.Body); string(body) != raw || err != nil {
			t.Errorf("the body handed on is %q (%v), want %q", body, err, raw)
		}
		if wantErr := !strings.HasPrefix(raw, `{"jsonrpc":"2.0","id":1,"method":"tools/call"`); (p.Err != nil) != wantErr {
			t.Errorf("%s: parse error %v, want one: %v", raw, p.Err, wantErr)
		}
	}
}
