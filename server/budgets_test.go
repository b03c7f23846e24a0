package server

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// budgetPolicy caps every owner at live and running sandboxes.
func budgetPolicy(live, running int, extra string) string {
	return fmt.Sprintf("default_action: allow\nlimits:\n  default: {live_sandboxes: %d, running_sandboxes: %d%s}\nrules: []\n",
		live, running, extra)
}

// 50 creates of one owner at once against a cap of 5 running sandboxes make exactly 5 sandboxes at E2B (the
// emulator's own count); the 45 others are refused, naming the cap, before they reach E2B.
func TestCapOnRunningSandboxesHoldsUnderConcurrentCreates(t *testing.T) {
	const calls, capRunning = 50, 5
	f := newFixture(t, fixtureOpts{policy: budgetPolicy(20, capRunning, "")})
	c := connect(t, f.srv, eras[0], nil)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		refusals []string
		ok       int
	)
	start := make(chan struct{})
	for range calls {
		wg.Go(func() {
			<-start
			res := callTool(t, c, "e2b_create_sandbox", map[string]any{"title": "racer"})
			mu.Lock()
			defer mu.Unlock()
			if res.IsError {
				refusals = append(refusals, resultText(res))
			} else {
				ok++
			}
		})
	}
	close(start)
	waitfor.Return(t, 2*time.Minute, "the concurrent creates", wg.Wait)
	if n := len(f.emu.Sandboxes()); n != capRunning || ok != capRunning {
		t.Fatalf("%d creates at once with a cap of %d: %d sandboxes at E2B, %d answered as created", calls, capRunning, n, ok)
	}
	for _, r := range refusals {
		if !strings.Contains(r, "5 of 5 running sandboxes: pause or delete one (e2b_list_sandboxes") {
			t.Errorf("a refusal that does not name the cap: %s", r)
		}
	}
	if len(refusals) != calls-capRunning {
		t.Errorf("%d refusals, want %d", len(refusals), calls-capRunning)
	}
}

// A create E2B refuses gives its place back; a resume and a fork are held to the caps too, and pausing a
// sandbox frees a running place but not a live one.
func TestCapsOnResumeForkAndFailedCreates(t *testing.T) {
	f := newFixture(t, fixtureOpts{policy: budgetPolicy(2, 1, ", max_timeout_seconds: 3600, templates: [base]")})
	c := connect(t, f.srv, eras[0], nil)

	f.emu.FailNext(1, 400)
	mustFail(t, c, "e2b_create_sandbox", map[string]any{})
	a := createSandbox(t, c) // the failed create's place is free again
	msg := mustFail(t, c, "e2b_create_sandbox", map[string]any{})
	if !strings.Contains(msg, "1 of 1 running sandboxes: pause or delete one") {
		t.Fatalf("a second running sandbox: %s", msg)
	}
	if msg := mustFail(t, c, "e2b_create_sandbox", map[string]any{"template": "desktop", "timeout_seconds": 60}); !strings.Contains(msg,
		`template "desktop" is not one of the templates allowed (base)`) {
		t.Fatalf("a template outside the limits: %s", msg)
	}
	if msg := mustFail(t, c, "e2b_create_sandbox", map[string]any{"timeout_seconds": 7200}); !strings.Contains(msg,
		"timeout_seconds 7200 is above the longest allowed, 3600") {
		t.Fatalf("a timeout beyond the limits: %s", msg)
	}
	mustOK(t, c, "e2b_manage_sandbox", map[string]any{"sandbox_id": a, "action": "pause"})
	b := createSandbox(t, c) // a paused sandbox holds no running place
	if msg := mustFail(t, c, "e2b_manage_sandbox", map[string]any{"sandbox_id": a, "action": "resume"}); !strings.Contains(msg,
		"1 of 1 running sandboxes") {
		t.Fatalf("resuming past the running cap: %s", msg)
	}
	if msg := mustFail(t, c, "e2b_create_sandbox", map[string]any{}); !strings.Contains(msg,
		"2 of 2 live sandboxes: delete one; a paused sandbox counts too") {
		t.Fatalf("a third live sandbox: %s", msg)
	}
	mustOK(t, c, "e2b_manage_sandbox", map[string]any{"sandbox_id": b, "action": "pause"})
	mustOK(t, c, "e2b_manage_sandbox", map[string]any{"sandbox_id": a, "action": "resume"})
	if msg := mustFail(t, c, "e2b_fork_sandbox", map[string]any{"sandbox_id": a}); !strings.Contains(msg, "2 of 2 live sandboxes") {
		t.Fatalf("a fork past the live cap: %s", msg)
	}
	if n := len(f.emu.Sandboxes()); n != 2 {
		t.Fatalf("E2B has %d sandboxes, want the 2 the caps allow", n)
	}
}
