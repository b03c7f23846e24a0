package server

import (
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/internal/pgtest"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// Through restarts of PostgreSQL under load, every call that fails says the state store failed: none blames E2B,
// none is an "Internal error", and none shows the database's host, port, user or name to the caller.
func TestDatabaseRestartIsTheStateStoresFailure(t *testing.T) {
	pg, db := pgtest.Database(t)
	f := newFixture(t, fixtureOpts{mutate: func(cfg *Config, _ *e2btest.Server) { cfg.Store = db }})
	c := connect(t, f.srv, eras[0], nil)
	id := createSandbox(t, c)
	u, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	secret := []string{u.Host, u.Port(), u.User.Username(), strings.TrimPrefix(u.Path, "/"), "postgres://"}

	var stop atomic.Bool
	var mu sync.Mutex
	failures := map[string]int{}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				tool, args := "e2b_list_sandboxes", map[string]any{}
				if i%2 == 1 {
					tool, args = "e2b_exec", map[string]any{"sandbox_id": id, "command": "true"}
				}
				if res := callTool(t, c, tool, args); res.IsError {
					mu.Lock()
					failures[resultText(res)]++
					mu.Unlock()
				}
			}
		}()
	}
	for range 3 {
		if err := pg.Restart(); err != nil {
			t.Error(err)
			break
		}
	}
	stop.Store(true)
	waitfor.Return(t, 2*time.Minute, "the calls made while the database restarted", wg.Wait)

	if len(failures) == 0 {
		t.Fatal("no call failed while the database restarted: the test saw no outage")
	}
	for text, n := range failures {
		t.Logf("%d× %s", n, text)
		if strings.Contains(text, "E2B") || strings.Contains(text, "Internal error") || !strings.Contains(text, "state store") {
			t.Errorf("a failure of the database reads %q", text)
		}
		for _, s := range secret {
			if strings.Contains(text, s) {
				t.Errorf("a failure shows the caller the database's %q: %q", s, text)
			}
		}
	}
	mustOK(t, c, "e2b_exec", map[string]any{"sandbox_id": id, "command": "true"})
}
