package tests

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"

	"github.com/e2b-mcp/e2b-mcp/internal/smalldisk"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// healthOf is the status and body of GET base/healthz.
func healthOf(t *testing.T, base string) (int, string) {
	t.Helper()
	resp, err := http.Get(base + "/healthz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// With one replica's state directory full, its /healthz answers 503 within a second, and HAProxy (as
// docs/team-server.md configures it) stops sending it calls: every call lands on the other replica, none is refused.
// Once space returns, the replica is healthy again and HAProxy sends it calls again.
func TestReplicaWithFullDiskGetsNoCalls(t *testing.T) {
	t.Parallel()
	x := newH(t)
	full := x.path("replica1") // startReplicas' state directory of the first replica
	smalldisk.Mount(t, full, 2<<20)
	rs := x.startReplicas(2, "--lease", "1h")
	r1 := rs.replicas[0].base

	c := x.connectVersion(rs.lb, rs.token, "before", "")
	id := create(t, c, map[string]any{"title": "balanced"})
	for range 5 {
		ok(t, c, "e2b_exec", map[string]any{"sandbox_id": id, "command": "true"})
	}
	if n1, n2 := x.callsIn(rs.dirs[0], "before"), x.callsIn(rs.dirs[1], "before"); n1 == 0 || n2 == 0 {
		t.Fatalf("before the disk filled, calls went %d to replica 1 and %d to replica 2; want both", n1, n2)
	}

	filler := smalldisk.Fill(t, full)
	filled := time.Now()
	waitfor.Until(t, 5*time.Second, "replica 1's /healthz answers 503", func() bool {
		code, _ := healthOf(t, r1)
		return code == http.StatusServiceUnavailable
	})
	took := time.Since(filled)
	t.Logf("/healthz of the full replica answered 503 %v after the disk filled", took.Round(time.Millisecond))
	if _, body := healthOf(t, r1); !strings.Contains(body, "audit log cannot record") || strings.Contains(body, full) {
		t.Errorf("/healthz of the full replica says %q; want the reason, without the server's paths", body)
	}

	// HAProxy passes /healthz on too: once it has marked replica 1 down, every request goes to replica 2, so
	// /healthz through it answers 200 time after time (round robin over both would answer 503 every other time).
	waitfor.Until(t, 15*time.Second, "HAProxy marks the full replica down", func() bool {
		for range 6 {
			if code, _ := healthOf(t, rs.lb); code != http.StatusOK {
				return false
			}
		}
		return true
	})
	t.Logf("HAProxy stopped sending requests to the full replica %v after the disk filled", time.Since(filled).Round(time.Millisecond))

	const calls = 20
	after := x.connectVersion(rs.lb, rs.token, "after", "")
	mine := create(t, after, map[string]any{"title": "while one replica is full"})
	for i := range calls - 1 {
		if res := call(t, after, "e2b_exec", map[string]any{"sandbox_id": mine, "command": "true"}); res.IsError {
			t.Fatalf("call %d through HAProxy with replica 1's disk full: %s", i+1, text(res))
		}
	}
	if n1, n2 := x.callsIn(rs.dirs[0], "after"), x.callsIn(rs.dirs[1], "after"); n1 != 0 || n2 != calls {
		t.Fatalf("with replica 1's disk full, calls went %d to replica 1 and %d to replica 2; want all %d on replica 2", n1, n2, calls)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	waitfor.Until(t, 5*time.Second, "replica 1's /healthz answers 200 again", func() bool {
		code, _ := healthOf(t, r1)
		return code == http.StatusOK
	})
	back := x.connectVersion(rs.lb, rs.token, "back", "")
	waitfor.Until(t, 15*time.Second, "HAProxy sends replica 1 calls again", func() bool {
		ok(t, back, "e2b_list_sandboxes", map[string]any{})
		return x.callsIn(rs.dirs[0], "back") > 0
	})
}

// PostgreSQL stopped (SIGSTOP) for 10 s under load, behind the README's HAProxy block, fails no call: the
// database is shared by both replicas, so /healthz stays 200 on each (saying the store does not answer), HAProxy
// keeps sending calls, and they wait for the database and go through.
func TestDatabaseStallFailsNoCall(t *testing.T) {
	t.Parallel()
	x := newH(t)
	rs := x.startReplicas(2, "--lease", "1h")
	const workers = 4
	clients := make([]*client.Client, workers)
	sandboxes := make([]string, workers)
	for w := range workers {
		clients[w] = x.connectVersion(rs.lb, rs.token, fmt.Sprintf("stall%d", w), "")
		sandboxes[w] = create(t, clients[w], map[string]any{"title": fmt.Sprintf("stall %d", w)})
	}

	var (
		stop              atomic.Bool
		spans             [][2]time.Time // each call's start and end
		mu                sync.Mutex
		failures          []string
		wg                sync.WaitGroup
		storeSaidStalled  atomic.Bool
		healthWhilePaused []int
	)
	for w := range workers {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				began := time.Now()
				ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
				res, err := callCtx(ctx, clients[w], "e2b_write_file",
					map[string]any{"sandbox_id": sandboxes[w], "path": fmt.Sprintf("f%d.txt", i), "content": "x"}, nil)
				cancel()
				mu.Lock()
				spans = append(spans, [2]time.Time{began, time.Now()})
				mu.Unlock()
				failure := ""
				switch {
				case err != nil:
					failure = err.Error()
				case res.IsError:
					failure = text(res)
				}
				if failure != "" {
					mu.Lock()
					failures = append(failures, failure)
					mu.Unlock()
					time.Sleep(100 * time.Millisecond) // as a client would before trying again
				}
			}
		})
	}
	time.Sleep(time.Second)
	pausedAt := time.Now()
	if err := rs.pg.Pause(); err != nil {
		t.Fatal(err)
	}
	for range 10 { // 10 s, asking the replicas' /healthz each second
		time.Sleep(time.Second)
		for _, r := range rs.replicas {
			code, body := healthOf(t, r.base)
			healthWhilePaused = append(healthWhilePaused, code)
			if strings.Contains(body, "state store does not answer") {
				storeSaidStalled.Store(true)
			}
		}
	}
	if err := rs.pg.Resume(); err != nil {
		t.Fatal(err)
	}
	resumedAt := time.Now()
	time.Sleep(2 * time.Second)
	stop.Store(true)
	waitfor.Return(t, 2*time.Minute, "the callers to stop", wg.Wait)

	straddled := 0
	for _, span := range spans {
		if span[0].Before(resumedAt) && span[1].After(pausedAt) {
			straddled++
		}
	}
	t.Logf("%d calls, %d of them while PostgreSQL was stopped; /healthz while stopped: %v", len(spans), straddled, healthWhilePaused)
	if straddled == 0 {
		t.Fatal("no call ran while PostgreSQL was stopped: the test saw no stall")
	}
	if len(failures) > 0 {
		t.Errorf("%d calls failed with PostgreSQL stopped for 10 s; the first: %s", len(failures), failures[0])
	}
	for _, code := range healthWhilePaused {
		if code != http.StatusOK {
			t.Errorf("a replica's /healthz answered %d while the shared database was stopped, want 200", code)
			break
		}
	}
	if !storeSaidStalled.Load() {
		t.Error("no replica's /healthz said that the state store does not answer while it was stopped")
	}
}
