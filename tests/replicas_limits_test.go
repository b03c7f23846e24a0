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
