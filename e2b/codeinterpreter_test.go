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
// that ends before end_of_execution is an error, never a result.
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
	// A line over the bound is left out and counted, and so is a result past what one execution holds: a server
	// in the sandbox's hands cannot make the client hold more than a few lines' worth.
	result := func(text string) string { return "{\"type\": \"result\", \"text\": \"" + text + "\"}\n" }
	answer = result(strings.Repeat("x", 64<<10)) + result("kept") + strings.Repeat(result(strings.Repeat("y", 900)), 5) +
		"{\"type\": \"end_of_execution\"}\n"
	ex, err := ci.WithMaxLine(1<<10).Execute(context.Background(), ExecuteRequest{Code: "1"}, ExecuteHandlers{})
	if err != nil || ex.Dropped != 2 || len(ex.Results) != 5 || ex.Results[0].Text != "kept" {
		t.Fatalf("lines over the bounds: %d results, %d dropped, %v", len(ex.Results), ex.Dropped, err)
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

// Port 49999 is the sandbox's: code in it can stop E2B's server and answer in its place, and it then receives
// the envd access token (and, on E2B, the traffic token) with every request. Whatever it sends back, neither
// token reaches the caller, whole, cut or in pieces: in output, results, errors, tracebacks, contexts and error
// answers alike.
func TestCodeInterpreterHidesTheTokens(t *testing.T) {
	const (
		tok     = "f3a9c1e07b5d4a2e9c8b7a6f5e4d3c2b1a0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d"
		traffic = "9d8c7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a1f0e9d8c"
	)
	line := func(w http.ResponseWriter, v map[string]any) {
		b, _ := json.Marshal(v)
		_, _ = w.Write(append(b, '\n'))
	}
	f := newFakeEnvd(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		got, gotTraffic := r.Header.Get("X-Access-Token"), r.Header.Get(TrafficTokenHeader)
		switch r.URL.Path {
		case "/execute":
			line(w, map[string]any{"type": "stdout", "text": "leak " + got + "\n"})
			line(w, map[string]any{"type": "stdout", "text": got[:30]})
			line(w, map[string]any{"type": "stderr", "text": got[30:] + " " + gotTraffic})
			line(w, map[string]any{"type": "result", "text": got, "html": "<b>" + gotTraffic + "</b>", "markdown": got[8:],
				"json": map[string]any{"k": got}, "data": map[string]any{got: []string{gotTraffic}}, "extra": map[string]any{"x/y": got}})
			line(w, map[string]any{"type": "error", "name": "E" + got, "value": "cut " + got[:56], "traceback": "tb " + gotTraffic[5:]})
			line(w, map[string]any{"type": "end_of_execution"})
		case "/contexts":
			_ = json.NewEncoder(w).Encode([]map[string]any{{"id": got, "language": "python", "cwd": "/home/" + got}})
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte("Context " + strings.Repeat("x", 160) + got + gotTraffic))
		}
	})
	c, err := NewClient(Config{APIKey: testAPIKey, SandboxURL: f.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ci := c.Envd(SandboxConn{ID: "sbx1", Domain: "e2b.app", EnvdVersion: "0.6.13", AccessToken: tok}).CodeInterpreter(traffic)
	var printed []string
	ex, err := ci.Execute(context.Background(), ExecuteRequest{Code: "1"}, ExecuteHandlers{
		OnStdout: func(s string) { printed = append(printed, s) }, OnStderr: func(s string) { printed = append(printed, s) }})
	if err != nil {
		t.Fatal(err)
	}
	shown, _ := json.Marshal(ex)
	list, err := ci.ListContexts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	listed, _ := json.Marshal(list)
	restartErr := ci.RestartContext(context.Background(), "c1")
	if restartErr == nil {
		t.Fatal("the restart's 404 was no error")
	}
	for what, text := range map[string]string{"output": strings.Join(printed, ""), "execution": string(shown),
		"contexts": string(listed), "error answer": restartErr.Error()} {
		for _, secret := range []string{tok, traffic} {
			for i := 0; i+8 <= len(secret); i++ {
				if strings.Contains(text, secret[i:i+8]) {
					t.Errorf("the %s shows a piece of a token (%s...): %s", what, secret[i:i+8], text)
					break
				}
			}
		}
	}
	if !strings.Contains(string(shown), "[redacted]") || !strings.Contains(strings.Join(printed, ""), "leak [redacted]") {
		t.Errorf("the execution lost what was around the tokens: %s %q", shown, printed)
	}
}
