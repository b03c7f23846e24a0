package tests

import (
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"

	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
	"github.com/e2b-mcp/e2b-mcp/lifecycle"
)

// 50 creates of one owner at once, spread over two replicas on one PostgreSQL, against a cap of 5 running
// sandboxes, make exactly 5 sandboxes at E2B (the emulator's own count); the 45 others are refused naming the cap.
func TestReplicasHoldTheRunningCapTogether(t *testing.T) {
	t.Parallel()
	const calls, capRunning, session = 50, 5, "capped"
	x := newH(t)
	pol := x.path("limits.yaml")
	if err := os.WriteFile(pol, []byte("default_action: allow\nlimits:\n  default: {running_sandboxes: 5}\nrules: []\n"),
		0o600); err != nil {
		t.Fatal(err)
	}
	rs := x.startReplicas(2, "--policy", pol)
	clients := []*client.Client{
		x.connectVersion(rs.replicas[0].base, rs.token, session, ""),
		x.connectVersion(rs.replicas[1].base, rs.token, session, ""),
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		created  int
		refusals []string
	)
	start := make(chan struct{})
	for i := range calls {
		wg.Go(func() {
			<-start
			res := call(t, clients[i%2], "e2b_create_sandbox", map[string]any{"title": "racer"})
			mu.Lock()
			defer mu.Unlock()
			if res.IsError {
				refusals = append(refusals, text(res))
				return
			}
			created++
		})
	}
	close(start)
	waitfor.Return(t, 3*time.Minute, "the creates through two replicas", wg.Wait)
	atE2B := 0
	for _, sb := range the.emu.Sandboxes() {
		if sb.Metadata[lifecycle.TagSession] == session && sb.Metadata[lifecycle.TagOwner] == rs.owner {
			atE2B++
			the.noteSandbox(sb.ID)
		}
	}
	if atE2B != capRunning || created != capRunning {
		t.Fatalf("%d creates through two replicas with a cap of %d: %d sandboxes at E2B, %d answered as created",
			calls, capRunning, atE2B, created)
	}
	if len(refusals) != calls-capRunning {
		t.Errorf("%d refusals, want %d", len(refusals), calls-capRunning)
	}
	for _, r := range refusals {
		if !strings.Contains(r, "5 of 5 running sandboxes: pause or delete one") {
			t.Errorf("a refusal that does not name the cap: %s", r)
		}
	}
}

// A sandbox-hours budget is one between replicas on one PostgreSQL: the running time of a sandbox made through one
// replica uses up the budget, and the other then refuses a create naming the limit.
func TestReplicasShareTheSandboxHoursBudget(t *testing.T) {
	const session = "hours"
	x := newH(t)
	pol := x.path("hours.yaml")
	// 0.001 hours is 3.6 seconds of one running sandbox.
	if err := os.WriteFile(pol, []byte("default_action: allow\nlimits:\n  default: {sandbox_hours_per_day: 0.001}\nrules: []\n"),
		0o600); err != nil {
		t.Fatal(err)
	}
	rs := x.startReplicas(2, "--policy", pol)
	first := x.connectVersion(rs.replicas[0].base, rs.token, session, "")
	second := x.connectVersion(rs.replicas[1].base, rs.token, session, "")
	id, _ := ok(t, first, "e2b_create_sandbox", map[string]any{"title": "spends"})["sandbox_id"].(string)
	the.noteSandbox(id)
	waitfor.Until(t, time.Minute, "the sandbox to use up the day's budget, as the second replica reads it", func() bool {
		usage, _ := ok(t, second, "e2b_list_sandboxes", map[string]any{})["usage"].(map[string]any)
		today, _ := usage["sandbox_hours_today"].(map[string]any)
		used, _ := today["used"].(float64)
		return used > 0.001 // rounded to 4 decimals: 0.0011 is past the budget
	})
	msg := fails(t, second, "e2b_create_sandbox", map[string]any{"title": "refused"})
	if !strings.Contains(msg, "of 0.001 sandbox-hours today (sandbox_hours_per_day), which resets at") {
		t.Fatalf("a create through the other replica with the budget used up: %s", msg)
	}
}
