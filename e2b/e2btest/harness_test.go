package e2btest

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// testKey is the API key of the tests' team.
const testKey = "e2b_00000000000000000000000000000000000000aa"

// newTestServer is a test emulator without the expiry ticker, closed when the test ends.
func newTestServer(t *testing.T) *Server {
	t.Helper()
	s, err := New(Options{ExpiryInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

// errorCode is the code of E2B's JSON error body.
func (a answer) errorCode(t *testing.T) int {
	t.Helper()
	var e struct {
		Code int `json:"code"`
	}
	if err := json.Unmarshal(a.body, &e); err != nil {
		t.Fatalf("error body %q: %v", a.body, err)
	}
	return e.Code
}

// call sends a request to s with testKey as its API key and the given headers; body "" sends none.
func call(t *testing.T, s *Server, method, path string, header map[string]string, body string) answer {
	t.Helper()
	req, err := http.NewRequest(method, s.URL()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body == "" {
		req.Body = http.NoBody
	} else {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("X-API-Key", testKey)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: data}
}

// create makes a sandbox over HTTP, as a client does, and returns the answer.
func create(t *testing.T, s *Server) answer {
	t.Helper()
	return call(t, s, "POST", "/sandboxes", nil, `{"templateID":"base"}`)
}
