package tests

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// A call running when its server is killed (kill -9) is in the audit log as started and never ended: after a
// restart `e2b-mcp audit` shows it so, beside the calls that ended.
func TestCallRunningAtKill9IsAuditedAsStarted(t *testing.T) {
	t.Parallel()
	x := newH(t)
	owner := x.owner("crash-audit")
	x.login(owner)
	args := x.serveArgs(owner, "crash")

	first := x.startStdio(clientOpts{}, args...)
	id := create(t, first.Client, map[string]any{"title": "crash"})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		_, _ = callCtx(ctx, first.Client, "e2b_exec", map[string]any{"sandbox_id": id,
			"command": "touch started; sleep 4; touch finished"}, nil)
	}()
	waitfor.Until(t, 20*time.Second, "the exec's started record", func() bool {
		return len(x.auditEntries("--tool", "e2b_exec", "--decision", "started")) == 1
	})
	time.Sleep(time.Second) // the command is running in the sandbox
	first.kill9(t)

	second := x.startStdio(clientOpts{}, args...)
	ok(t, second.Client, "e2b_list_sandboxes", map[string]any{})

	r := x.mustRun(nil, "audit", "--state-dir", x.path("state"))
	var execRows []string
	for _, line := range strings.Split(r.stdout, "\n") {
		if strings.Contains(line, "e2b_exec") {
			execRows = append(execRows, line)
		}
	}
	if len(execRows) != 1 || !strings.Contains(execRows[0], "started, no end") || !strings.Contains(execRows[0], "sleep 4") {
		t.Errorf("e2b-mcp audit after the crash shows the exec as %q; want one row, started and not ended:\n%s", execRows, r.stdout)
	}
	if !strings.Contains(r.stderr, "1 call started and has no outcome") {
		t.Errorf("e2b-mcp audit's note: %q", r.stderr)
	}
	// The calls that ended, before the crash and after it, are whole.
	for _, tool := range []string{"e2b_create_sandbox", "e2b_list_sandboxes"} {
		if e := x.auditEntries("--tool", tool); len(e) != 1 || e[0]["outcome"] != "ok" {
			t.Errorf("audit of %s: %v", tool, e)
		}
	}
}
