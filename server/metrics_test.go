package server

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

const metricsPolicy = `default_action: allow
rules:
  - id: no-rm
    when: { target: e2b_exec, command: "rm *" }
    then: { decision: deny, reason: no removals }
  - id: ask-delete
    when: { target: e2b_manage_sandbox, action: delete }
    then: { decision: require_approval, reason: deleting loses work }
`

// /metrics counts calls by tool, decision and outcome, times them, and shows the store's sandboxes by state and
// the approvals waiting; it answers only with a token, as /mcp does.
func TestMetrics(t *testing.T) {
	tokens, toks := tokensFor(t, "alice")
	f := newFixture(t, fixtureOpts{policy: metricsPolicy, transport: TransportHTTP, tokensFile: tokens})
	base := serveHTTP(t, f)
	for _, bad := range []string{"", "Bearer nope"} {
		if code, _, body := do(t, http.MethodGet, base+PathMetrics, bad, "", nil); code != http.StatusUnauthorized ||
			strings.Contains(body, "e2b_mcp_") {
			t.Fatalf("/metrics with authorization %q: %d %q", bad, code, body)
		}
	}

	c := streamableClient(t, base, toks["alice"], "", mcp.ProtocolVersion20260728)
	id := createSandbox(t, c)
	second := createSandbox(t, c)
	mustOK(t, c, "e2b_manage_sandbox", map[string]any{"sandbox_id": second, "action": "pause"})
	mustOK(t, c, "e2b_exec", map[string]any{"sandbox_id": id, "command": "true"})
	mustFail(t, c, "e2b_exec", map[string]any{"sandbox_id": id, "command": "rm -rf /tmp"})
	mustFail(t, c, "e2b_exec", map[string]any{"sandbox_id": "nope", "command": "true"})
	mustFail(t, c, "e2b_exec", map[string]any{"sandbox_id": id, "command": "true", "bogus": 1})
	mustFail(t, c, "e2b_manage_sandbox", map[string]any{"sandbox_id": id, "action": "delete"})

	code, hdr, body := do(t, http.MethodGet, base+PathMetrics, "Bearer "+toks["alice"], "", nil)
	if code != http.StatusOK || !strings.HasPrefix(hdr.Get("Content-Type"), "text/plain") {
		t.Fatalf("/metrics: %d %s\n%s", code, hdr.Get("Content-Type"), body)
	}
	for _, want := range []string{
		`e2b_mcp_tool_calls_total{decision="allow",outcome="ok",tool="e2b_create_sandbox"} 2`,
		`e2b_mcp_tool_calls_total{decision="allow",outcome="ok",tool="e2b_exec"} 1`,
		`e2b_mcp_tool_calls_total{decision="deny",outcome="denied",tool="e2b_exec"} 1`,
		`e2b_mcp_tool_calls_total{decision="allow",outcome="error",tool="e2b_exec"} 1`,
		`e2b_mcp_tool_calls_total{decision="invalid_arguments",outcome="error",tool="e2b_exec"} 1`,
		`e2b_mcp_tool_calls_total{decision="require_approval",outcome="approval_pending",tool="e2b_manage_sandbox"} 1`,
		`e2b_mcp_tool_call_duration_seconds_count{outcome="ok",tool="e2b_create_sandbox"} 2`,
		`e2b_mcp_tool_call_duration_seconds_bucket{outcome="ok",tool="e2b_exec",le="+Inf"} 1`,
		`e2b_mcp_sandboxes{state="running"} 1`,
		`e2b_mcp_sandboxes{state="paused"} 1`,
		`e2b_mcp_sandboxes{state="gone"} 0`,
		`e2b_mcp_approvals_waiting 1`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if t.Failed() {
		t.Logf("/metrics:\n%s", regexp.MustCompile(`(?m)^(#|go_|process_).*\n`).ReplaceAllString(body, ""))
	}
}

// E2B's error answers are counted by status on their way to the e2b client; a request that gets no answer
// counts as unreachable.
func TestE2BErrorsCounted(t *testing.T) {
	status := http.StatusOK
	e2b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(status) }))
	m := newMetrics()
	c := m.httpClient(&http.Client{})
	get := func() {
		t.Helper()
		resp, err := c.Get(e2b.URL)
		if err == nil {
			resp.Body.Close()
		}
	}
	for _, s := range []int{http.StatusOK, http.StatusTooManyRequests, http.StatusTooManyRequests, http.StatusBadGateway, http.StatusNotFound} {
		status = s
		get()
	}
	e2b.Close()
	get()

	rec := httptest.NewRecorder()
	m.handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, PathMetrics, nil))
	body := rec.Body.String()
	for _, want := range []string{
		`e2b_mcp_e2b_api_errors_total{status="429"} 2`,
		`e2b_mcp_e2b_api_errors_total{status="502"} 1`,
		`e2b_mcp_e2b_api_errors_total{status="404"} 1`,
		`e2b_mcp_e2b_api_errors_total{status="unreachable"} 1`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(body, `status="200"`) {
		t.Error("a successful answer was counted as an error")
	}
}
