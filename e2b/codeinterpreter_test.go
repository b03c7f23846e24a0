package e2b

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
)

const testTrafficToken = "traffic-token-77c1"

// The code interpreter is addressed as E2B's code-interpreter SDK addresses it: the configured sandbox URL with
// the routing headers, the envd token in X-Access-Token and the traffic token in its header; a body is JSON.
func TestCodeInterpreterRequests(t *testing.T) {
	f := newFakeEnvd(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		switch r.URL.Path {
		case "/execute":
			_, _ = w.Write([]byte("{\"type\": \"number_of_executions\", \"execution_count\": 2}\n" +
				"{\"type\": \"stdout\", \"text\": \"a\\n\", \"timestamp\": \"2026-12-01T21:39:58.986702+00:00\"}\n" +
				"{\"type\": \"keepalive\"}\n" +
				"{\"type\": \"result\", \"text\": \"42\", \"png\": \"iVBO\", \"extra\": {\"x/y\": 1}, \"is_main_result\": true}\n" +
				"{\"type\": \"error\", \"name\": \"E\", \"value\": \"v\", \"traceback\": \"tb\"}\n" +
				"{\"type\": \"end_of_execution\"}\n"))
		case "/contexts":
			if r.Method == http.MethodGet {
				_, _ = w.Write([]byte(`[{"id":"c1","language":"python","cwd":"/home/user"}]`))
				return
			}
			_, _ = w.Write([]byte(`{"id":"c2","language":"python","cwd":"/tmp"}`))
		default:
			_, _ = w.Write([]byte("null"))
		}
	})
	ci := f.envd(t, "0.6.13").CodeInterpreter(testTrafficToken)
	var out []string
	ex, err := ci.Execute(context.Background(), ExecuteRequest{Code: "x * 2"}, ExecuteHandlers{OnStdout: func(s string) { out = append(out, s) }})
	if err != nil {
		t.Fatal(err)
	}
	if ex.ExecutionCount != 2 || len(ex.Results) != 1 || ex.Results[0].Text != "42" || !ex.Results[0].IsMainResult ||
		ex.Results[0].PNG != "iVBO" || ex.Error == nil || ex.Error.Name != "E" || ex.Error.Traceback != "tb" || strings.Join(out, "") != "a\n" {
		t.Fatalf("execution %+v, stdout %q", ex, out)
	}
	r := f.last(t)
	var body map[string]any
	if err := json.Unmarshal(r.body, &body); err != nil || body["code"] != "x * 2" || len(body) != 1 {
		t.Fatalf("execute body %s (%v)", r.body, err)
	}
	for h, want := range map[string]string{"E2b-Sandbox-Id": "sbx1", "E2b-Sandbox-Port": "49999", "X-Access-Token": testToken,
		TrafficTokenHeader: testTrafficToken, "Content-Type": "application/json"} {
		if got := r.header.Get(h); got != want {
			t.Errorf("%s = %q, want %q", h, got, want)
		}
	}
	if r.header.Get("X-API-Key") != "" || strings.Contains(strings.Join(r.header.Values("Authorization"), ""), testAPIKey) {
		t.Error("the API key went to the sandbox")
	}

	cc, err := ci.CreateContext(context.Background(), "", "/tmp")
	if err != nil || cc.ID != "c2" || cc.Cwd != "/tmp" {
		t.Fatalf("create context: %+v, %v", cc, err)
	}
	if r := f.last(t); r.method != http.MethodPost || r.path != "/contexts" || string(r.body) != `{"cwd":"/tmp"}` {
		t.Fatalf("create context sent %s %s %s", r.method, r.path, r.body)
	}
	list, err := ci.ListContexts(context.Background())
	if err != nil || len(list) != 1 || list[0].ID != "c1" {
		t.Fatalf("list contexts: %+v, %v", list, err)
	}
	if err := ci.RestartContext(context.Background(), "c1"); err != nil {
		t.Fatal(err)
	}
	if r := f.last(t); r.method != http.MethodPost || r.path != "/contexts/c1/restart" {
		t.Fatalf("restart sent %s %s", r.method, r.path)
	}
	if err := ci.RemoveContext(context.Background(), "c1"); err != nil {
		t.Fatal(err)
	}
	if r := f.last(t); r.method != http.MethodDelete || r.path != "/contexts/c1" {
		t.Fatalf("remove sent %s %s", r.method, r.path)
	}
}

// Without a sandbox URL, the code interpreter is the sandbox's own host for port 49999.
func TestCodeInterpreterHost(t *testing.T) {
	c, err := NewClient(Config{APIKey: testAPIKey})
	if err != nil {
		t.Fatal(err)
	}
	u, h := c.Envd(SandboxConn{ID: "abc123", Domain: "example.dev"}).PortTarget(CodeInterpreterPort)
	if u.String() != "https://49999-abc123.example.dev" || len(h) != 0 {
		t.Fatalf("code interpreter at %s with %v", u, h)
	}
}

// The server's errors are text: they become an *APIError with that text, a token it echoes redacted; a stream
// that ends before end_of_execution, or a line past the limit, is an error, never a result.
func TestCodeInterpreterErrors(t *testing.T) {
	answer := ""
	status := http.StatusOK
	f := newFakeEnvd(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.WriteHeader(status)
		_, _ = w.Write([]byte(answer))
	})
	ci := f.envd(t, "0.6.13").CodeInterpreter(testTrafficToken)
	run := func() error {
		_, err := ci.Execute(context.Background(), ExecuteRequest{Code: "1"}, ExecuteHandlers{})
		return err
	}

	status, answer = http.StatusNotFound, "Context c9 not found"
	var ae *APIError
	if err := run(); !errors.As(err, &ae) || ae.Status != 404 || ae.Message != "Context c9 not found" || !errors.Is(err, ErrNotFound) {
		t.Fatalf("404: %v", err)
	}
	status, answer = http.StatusForbidden, "bad tokens "+testToken+" "+testTrafficToken
	if err := run(); err == nil || strings.Contains(err.Error(), testToken) || strings.Contains(err.Error(), testTrafficToken) {
		t.Fatalf("an echoed token is shown: %v", err)
	}
	status, answer = http.StatusOK, "{\"type\": \"number_of_executions\", \"execution_count\": 1}\n"
	if err := run(); !errors.Is(err, ErrStreamCut) {
		t.Fatalf("a stream without its end: %v", err)
	}
	answer = "{\"type\": \"result\", \"text\": \"" + strings.Repeat("x", maxExecuteLine) + "\"}\n{\"type\": \"end_of_execution\"}\n"
	if err := run(); !errors.Is(err, ErrBadAnswer) {
		t.Fatalf("a line over the limit: %v", err)
	}
	answer = "not json\n"
	if err := run(); !errors.Is(err, ErrBadAnswer) {
		t.Fatalf("a line that is not JSON: %v", err)
	}
	if _, err := ci.Execute(context.Background(), ExecuteRequest{Code: "1", ContextID: "c", Language: "python"}, ExecuteHandlers{}); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("context and language: %v", err)
	}
}

// A traceback as E2B's server joins IPython's parts (no separator) gets its line breaks back: the rule, the header
// and each frame on lines of their own, as IPython prints them.
func TestTracebackLines(t *testing.T) {
	rule := strings.Repeat("-", 75)
	parts := []string{rule, "ZeroDivisionError                         Traceback (most recent call last)",
		"Cell In[1], line 3\n      1 def g():\n----> 3 g()\n", "Cell In[1], line 2, in g()\n----> 2     return 1/0\n",
		"ZeroDivisionError: division by zero"}
	want := rule + "\nZeroDivisionError                         Traceback (most recent call last)\n" +
		"Cell In[1], line 3\n      1 def g():\n----> 3 g()\nCell In[1], line 2, in g()\n----> 2     return 1/0\n" +
		"ZeroDivisionError: division by zero"
	if got := tracebackLines(strings.Join(parts, "")); got != want {
		t.Fatalf("traceback:\n%s\nwant:\n%s", got, want)
	}
	// One already in lines, and a SyntaxError's (no rule, no header), are left as they are.
	for _, tb := range []string{want, "  Cell In[1], line 1\n    1/\n      ^\nSyntaxError: invalid syntax\n"} {
		if got := tracebackLines(tb); got != tb {
			t.Errorf("changed %q to %q", tb, got)
		}
	}
}
