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

// With the database refusing connections, a call that needs approval is answered with the state store's
// failure in words that show the caller none of the database's host, port, user or name.
func TestApprovalPathNamesNoDatabaseAddress(t *testing.T) {
	pg, db := pgtest.Database(t)
	f := newFixture(t, fixtureOpts{policy: approvalPolicy, mutate: func(cfg *Config, _ *e2btest.Server) { cfg.Store = db }})
	c := connect(t, f.srv, eras[0], nil)
	id := createSandbox(t, c)
	u, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimPrefix(u.Path, "/")
	secret := []string{u.Host, u.Port(), u.User.Username(), name, "postgres://"}

	// The outage: the database takes no new connection and its open ones are ended (not a restart, which the
	// store rides out).
	admin := pg.URL("postgres")
	if err := pg.Exec(admin, "ALTER DATABASE "+name+" ALLOW_CONNECTIONS false"); err != nil {
		t.Fatal(err)
	}
	if err := pg.Exec(admin, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", name); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := pg.Exec(admin, "ALTER DATABASE "+name+" ALLOW_CONNECTIONS true"); err != nil {
			t.Error(err)
		}
	}()

	for _, tool := range []struct {
		name string
		args map[string]any
	}{
		{"e2b_write_file", map[string]any{"sandbox_id": id, "path": "a.txt", "content": "x"}},
		{"e2b_manage_sandbox", map[string]any{"sandbox_id": id, "action": "delete"}},
	} {
		res := callTool(t, c, tool.name, tool.args)
		text := resultText(res)
		t.Logf("%s: %s", tool.name, text)
		if !res.IsError || !strings.Contains(text, "state store") {
			t.Errorf("%s with the database refusing connections answered %q; want the state store's failure", tool.name, text)
		}
		for _, s := range secret {
			if strings.Contains(text, s) {
				t.Errorf("%s: the answer shows the caller the database's %q: %q", tool.name, s, text)
			}
		}
	}
	if !sandboxExists(f, id) {
		t.Fatal("the delete ran without approval while the database was out")
	}
}
