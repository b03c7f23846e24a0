package server

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/internal/pgtest"
	"github.com/e2b-mcp/e2b-mcp/state"
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
		`e2b_mcp_owner_sandboxes_created_month{owner="alice"} 2`,
		`e2b_mcp_owner_peak_running_month{owner="alice"} 2`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	for _, period := range []string{"day", "month"} {
		if !strings.Contains(body, `e2b_mcp_owner_sandbox_hours{owner="alice",period="`+period+`"} `) {
			t.Errorf("/metrics lacks alice's sandbox-hours of the %s", period)
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

// refusingKeys is a data key source that counts the times it is asked and gives no key.
type refusingKeys struct{ asked atomic.Int32 }

func (k *refusingKeys) DataKey() ([]byte, error) {
	k.asked.Add(1)
	return nil, errors.New("the data key was asked for")
}

// storeKinds are where the gauges' tests keep records: the state directory's bbolt file and a PostgreSQL
// database (skipped where PostgreSQL is not installed).
var storeKinds = map[string]func(testing.TB) string{
	"bolt":     func(t testing.TB) string { return t.TempDir() },
	"postgres": func(t testing.TB) string { _, db := pgtest.Database(t); return db },
}

// storeWithSandboxes records n sandboxes with envd tokens at where (states in turn running, paused, running,
// gone) and returns how many it recorded of each state.
func storeWithSandboxes(t testing.TB, where string, n int) map[string]int {
	t.Helper()
	st, err := state.OpenAt(where, state.Options{Keys: state.StaticKeySource(bytes.Repeat([]byte{7}, state.DataKeySize))})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	states := []string{state.StateRunning, state.StatePaused, state.StateRunning, state.StateGone}
	counts := map[string]int{}
	for i := range n {
		r := state.SandboxRecord{ID: fmt.Sprintf("sbx%05d", i), Owner: fmt.Sprintf("owner%d", i%3), Session: "main",
			AccessToken: fmt.Sprintf("envd-token-%05d", i), State: states[i%len(states)]}
		if err := st.PutSandbox(r); err != nil {
			t.Fatal(err)
		}
		counts[r.State]++
	}
	return counts
}

// storeMetrics opens the store at where with keys and serves the metrics that read it.
func storeMetrics(t testing.TB, where string, keys state.KeySource, onError func(error)) http.Handler {
	t.Helper()
	st, err := state.OpenAt(where, state.Options{Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	approvals, err := approvalsOf(st, where, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	m := newMetrics()
	m.watchStore(st, approvals, time.Now, onError)
	return m.handler()
}

func scrape(t testing.TB, h http.Handler) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, PathMetrics, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}

// A scrape opens no secret: the sandboxes by state are counted from the records as stored, so a store whose
// data key is refused still shows them, and the key is never asked for.
func TestMetricsScrapeOpensNoToken(t *testing.T) {
	for name, fresh := range storeKinds {
		t.Run(name, func(t *testing.T) {
			where := fresh(t)
			counts := storeWithSandboxes(t, where, 7)
			keys := &refusingKeys{}
			body := scrape(t, storeMetrics(t, where, keys, func(err error) { t.Errorf("reading a metric: %v", err) }))
			for _, st := range []string{state.StateRunning, state.StatePaused, state.StateGone} {
				if want := fmt.Sprintf("e2b_mcp_sandboxes{state=%q} %d\n", st, counts[st]); !strings.Contains(body, want) {
					t.Errorf("/metrics lacks %s", want)
				}
			}
			if n := keys.asked.Load(); n != 0 {
				t.Errorf("a scrape asked for the data key %d times", n)
			}
		})
	}
}

// BenchmarkMetricsScrape is one scrape of /metrics with 1000 sandboxes recorded.
func BenchmarkMetricsScrape(b *testing.B) {
	for _, name := range []string{"bolt", "postgres"} {
		b.Run(name, func(b *testing.B) {
			where := storeKinds[name](b)
			storeWithSandboxes(b, where, 1000)
			h := storeMetrics(b, where, state.StaticKeySource(bytes.Repeat([]byte{7}, state.DataKeySize)),
				func(err error) { b.Fatal(err) })
			b.ReportAllocs()
			for b.Loop() {
				scrape(b, h)
			}
		})
	}
}
