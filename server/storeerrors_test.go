package server

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/internal/pgtest"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// PostgreSQL restarted under load (as pg_ctl restart does: a fast shutdown that ends every connection, then a
// start) fails no call: the store makes an operation again on a new connection while the database is away.
func TestDatabaseRestartFailsNoCall(t *testing.T) {
	pg, db := pgtest.Database(t)
	f := newFixture(t, fixtureOpts{mutate: func(cfg *Config, _ *e2btest.Server) { cfg.Store = db }})
	c := connect(t, f.srv, eras[0], nil)
	id := createSandbox(t, c)

	var (
		stop             atomic.Bool
		mu               sync.Mutex
		failures         = map[string]int{}
		calls, straddled atomic.Int64 // calls in all; calls running while the database restarted
		restarting       atomic.Int64 // restarts begun, less those ended
		wg               sync.WaitGroup
	)
	for i := range 4 {
		wg.Go(func() {
			for !stop.Load() {
				tool, args := "e2b_list_sandboxes", map[string]any{}
				if i%2 == 1 {
					tool, args = "e2b_exec", map[string]any{"sandbox_id": id, "command": "true"}
				}
				during := restarting.Load() > 0
				res := callTool(t, c, tool, args)
				calls.Add(1)
				if during || restarting.Load() > 0 {
					straddled.Add(1)
				}
				if res.IsError {
					mu.Lock()
					failures[resultText(res)]++
					mu.Unlock()
				}
			}
		})
	}
	const restarts = 3
	for range restarts {
		time.Sleep(200 * time.Millisecond) // calls go through between restarts
		restarting.Add(1)
		err := pg.Restart()
		restarting.Add(-1)
		if err != nil {
			t.Error(err)
			break
		}
	}
	time.Sleep(200 * time.Millisecond)
	stop.Store(true)
	waitfor.Return(t, 2*time.Minute, "the calls made while the database restarted", wg.Wait)

	t.Logf("%d calls, %d of them while the database restarted; %d restarts", calls.Load(), straddled.Load(), restarts)
	if straddled.Load() == 0 {
		t.Fatal("no call ran while the database restarted: the test saw no outage")
	}
	for text, n := range failures {
		t.Errorf("%d× %s", n, text)
	}
}
