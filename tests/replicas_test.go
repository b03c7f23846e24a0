package tests

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/internal/pgtest"
	"github.com/e2b-mcp/e2b-mcp/internal/shellquote"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
	"github.com/e2b-mcp/e2b-mcp/state"
)

// replicaSet is two or more `serve` processes on one PostgreSQL database, behind HAProxy configured as the
// docs/team-server.md tells operators to.
type replicaSet struct {
	pg       *pgtest.Server
	db       string // the database URL, password included
	tokens   string // the tokens file they share
	token    string // the owner's bearer token
	owner    string
	replicas []*httpServer
	dirs     []string // each replica's state directory (its audit log)
	lb       string   // http://host:port of HAProxy
}

// startPostgres starts a PostgreSQL server for the test and returns a new database on it.
func startPostgres(t *testing.T) (*pgtest.Server, string) {
	t.Helper()
	pg, err := pgtest.Start()
	if errors.Is(err, pgtest.ErrNotInstalled) {
		requireEnv(t, false, err.Error())
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg.Stop() })
	db, err := pg.NewDatabase()
	if err != nil {
		t.Fatal(err)
	}
	return pg, db
}

// startReplicas starts n replicas with extra serve flags, and HAProxy in front of them.
func (x *h) startReplicas(n int, extra ...string) *replicaSet {
	x.t.Helper()
	t := x.t.(*testing.T)
	if _, err := exec.LookPath("haproxy"); err != nil {
		requireEnv(t, false, "HAProxy is not installed (apt-get install haproxy)")
	}
	pg, db := startPostgres(t)
	rs := &replicaSet{pg: pg, db: db, tokens: x.path("tokens.json"), owner: x.owner("team")}
	x.login(rs.owner)
	rs.token = x.addToken(rs.owner, rs.tokens)
	var addrs []string
	for i := range n {
		dir := x.path(fmt.Sprintf("replica%d", i+1))
		args := x.serveArgs(rs.owner, "default", append([]string{"--transport", "http", "--tokens-file", rs.tokens,
			"--store", db, "--state-dir", dir}, extra...)...)
		r := x.startHTTP(args...)
		rs.replicas = append(rs.replicas, r)
		rs.dirs = append(rs.dirs, dir)
		addrs = append(addrs, strings.TrimPrefix(r.base, "http://"))
	}
	rs.lb = x.startHAProxy(freePort(t), addrs)
	return rs
}

var (
	haproxyBlock  = regexp.MustCompile("(?s)<!-- haproxy:begin -->\n```haproxy\n(.*?)```\n<!-- haproxy:end -->")
	haproxyBind   = regexp.MustCompile(`(?m)^(\s*bind )\S+$`)
	haproxyServer = regexp.MustCompile(`(?m)^\s*server replica\d+ \S+ (.*)\n`)
)

// startHAProxy runs HAProxy with the configuration docs/team-server.md gives, its addresses replaced by the test's (listening on
// listen, host:port), until the test ends, and waits until it passes requests on.
func (x *h) startHAProxy(listen string, replicas []string) string {
	x.t.Helper()
	doc, err := os.ReadFile(teamServerDocPath)
	if err != nil {
		x.t.Fatal(err)
	}
	m := haproxyBlock.FindSubmatch(doc)
	if m == nil {
		x.t.Fatalf("%s has no HAProxy configuration between <!-- haproxy:begin --> and <!-- haproxy:end -->", teamServerDocPath)
	}
	cfg := string(m[1])
	servers := haproxyServer.FindAllStringSubmatch(cfg, -1)
	if len(servers) == 0 || len(haproxyBind.FindAllString(cfg, -1)) != 1 {
		x.t.Fatalf("the documented HAProxy configuration lacks its bind line or server lines:\n%s", cfg)
	}
	cfg = haproxyBind.ReplaceAllString(cfg, "${1}"+listen)
	var lines strings.Builder
	for i, addr := range replicas {
		fmt.Fprintf(&lines, "    server replica%d %s %s\n", i+1, addr, servers[0][1])
	}
	first := true
	cfg = haproxyServer.ReplaceAllStringFunc(cfg, func(string) string {
		if !first {
			return ""
		}
		first = false
		return lines.String()
	})
	path := x.path("haproxy.cfg")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		x.t.Fatal(err)
	}
	cmd := exec.Command("haproxy", "-db", "-f", path)
	cmd.Stdout, cmd.Stderr = x.capture("haproxy stdout"), x.capture("haproxy stderr")
	if err := cmd.Start(); err != nil {
		x.t.Fatalf("starting haproxy: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	x.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		waitfor.Recv(x.t, done, 30*time.Second, "haproxy to exit after its kill")
	})
	base := "http://" + listen
	waitfor.Until(x.t, 30*time.Second, "HAProxy passes /healthz to the replicas", func() bool {
		select {
		case <-done:
			x.t.Fatalf("haproxy exited:\n%s", cmd.Stderr)
		default:
		}
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return base
}

// connectVersion connects an mcp-go client over streamable HTTP speaking protocol version (the newest when "").
func (x *h) connectVersion(base, token, session, version string) *client.Client {
	x.t.Helper()
	return x.connectEliciting(base, token, session, version, nil)
}

// connectEliciting is connectVersion for a client that answers form elicitations with e (none when nil).
func (x *h) connectEliciting(base, token, session, version string, e client.ElicitationHandler) *client.Client {
	x.t.Helper()
	tr, err := transport.NewStreamableHTTP(base+"/mcp", transport.WithHTTPHeaders(map[string]string{
		"Authorization": "Bearer " + token, "X-E2B-MCP-Session": session}))
	if err != nil {
		x.t.Fatal(err)
	}
	var opts []client.ClientOption
	if version != "" {
		opts = append(opts, client.WithProtocolVersion(version))
	}
	req := initRequest(version)
	if e != nil {
		opts = append(opts, client.WithElicitationHandler(e))
		req.Params.Capabilities.Elicitation = &mcp.ElicitationCapability{Form: &struct{}{}}
	}
	c := client.NewClient(tr, opts...)
	x.t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(x.t.Context(), 30*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		x.t.Fatal(err)
	}
	if _, err := c.Initialize(ctx, req); err != nil {
		x.t.Fatalf("initialize: %v", err)
	}
	return c
}

// callsIn counts the audit entries of session in a replica's log.
func (x *h) callsIn(dir, session string) int {
	x.t.Helper()
	n := 0
	for _, e := range x.auditEntriesIn(dir) {
		if e["session"] == session {
			n++
		}
	}
	return n
}

var approvalID = regexp.MustCompile("e2b-mcp approve ([0-9a-z]{10})")

// replicasPolicy is the built-in policy's delete rule (an operator approves), and a pause that the user
// approves in their client.
const replicasPolicy = `default_action: allow
rules:
  - id: delete-sandbox-needs-approval
    when: { target: e2b_manage_sandbox, action: delete }
    then: { decision: require_approval, reason: deleting a sandbox destroys its files and processes }
  - id: the-user-approves-pauses
    when: { target: e2b_manage_sandbox, action: pause }
    then: { decision: require_approval, reason: pausing stops its processes, approver: client }
`

// Two replicas on one PostgreSQL behind HAProxy serve one team as one server: calls alternate between them, a
// sandbox made through one is used through the other, an approval granted once is honoured by the replica the
// retried call reaches, as is the answer to an approval question, the lease is renewed wherever calls land, and
// a 2025-era session sticks to its replica.
func TestReplicasBehindHAProxy(t *testing.T) {
	t.Parallel()
	x := newH(t)
	policyFile := x.path("replicas-policy.yaml")
	if err := os.WriteFile(policyFile, []byte(replicasPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	rs := x.startReplicas(2, "--lease", "1h", "--policy", policyFile)
	r1, r2 := rs.replicas[0].base, rs.replicas[1].base

	// Calls of a 2026-07-28 client through the load balancer alternate between the replicas.
	c := x.connectVersion(rs.lb, rs.token, "flow", "")
	id := create(t, c, map[string]any{"title": "shared"})
	for i := range 4 {
		ok(t, c, "e2b_write_file", map[string]any{"sandbox_id": id, "path": fmt.Sprintf("f%d.txt", i), "content": "v"})
		if out := ok(t, c, "e2b_exec", map[string]any{"sandbox_id": id, "command": fmt.Sprintf("cat f%d.txt", i)}); str(out, "stdout") != "v" {
			t.Fatalf("exec after write through the load balancer: %v", out)
		}
	}
	for i, dir := range rs.dirs {
		if n := x.callsIn(dir, "flow"); n < 3 {
			t.Errorf("replica %d served %d of the 9 calls; round robin should give each about half", i+1, n)
		}
	}

	// Created through one, used through the other.
	on1 := x.connectVersion(r1, rs.token, "direct", "")
	on2 := x.connectVersion(r2, rs.token, "direct", "")
	made := create(t, on1, map[string]any{"title": "made on replica 1"})
	if out := ok(t, on2, "e2b_exec", map[string]any{"sandbox_id": made, "command": "echo hi from 2"}); str(out, "stdout") != "hi from 2\n" {
		t.Fatalf("exec through replica 2 of a sandbox made through replica 1: %v", out)
	}
	if ids := sandboxIDs(t, on2); !strings.Contains(strings.Join(ids, " "), made) {
		t.Fatalf("replica 2 lists %v, not %s", ids, made)
	}

	// The lease is renewed by a call on either replica.
	st, err := state.OpenPostgres(rs.db, state.Options{Keys: state.StaticKeySource(make([]byte, state.DataKeySize))})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	lease := func() time.Time {
		t.Helper()
		sessions, err := st.Sessions()
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range sessions {
			if s.Owner == rs.owner && s.Name == "renewed" {
				return s.LeaseExpires
			}
		}
		t.Fatal("no session 'renewed' in the database")
		return time.Time{}
	}
	ok(t, x.connectVersion(r1, rs.token, "renewed", ""), "e2b_list_sandboxes", map[string]any{})
	first := lease()
	time.Sleep(20 * time.Millisecond)
	ok(t, x.connectVersion(r2, rs.token, "renewed", ""), "e2b_list_sandboxes", map[string]any{})
	if second := lease(); !second.After(first) {
		t.Fatalf("a call through replica 2 did not renew the lease (%v, then %v)", first, second)
	}

	// An approval asked for through replica 1 and granted once is honoured through replica 2, once.
	del := map[string]any{"sandbox_id": made, "action": "delete"}
	msg := fails(t, on1, "e2b_manage_sandbox", del)
	m := approvalID.FindStringSubmatch(msg)
	if m == nil || !strings.Contains(msg, "--store "+shellquote.Quote(state.URLWithoutPassword(rs.db))) {
		t.Fatalf("no approval ID naming the shared store in %q", msg)
	}
	if strings.Contains(msg, pgPassword(rs.db)) {
		t.Fatalf("the approval hint shows the database password: %q", msg)
	}
	x.mustRun(nil, "approve", m[1], "--store", rs.db)
	if out := ok(t, on2, "e2b_manage_sandbox", del); out["success"] != true {
		t.Fatalf("the approved delete through replica 2: %v", out)
	}
	if _, found := the.emu.Sandbox(made); found {
		t.Fatal("the approved delete did not reach E2B")
	}

	// A 2026-07-28 client asked to approve a pause answers with a request of its own, which round robin sends
	// to the other replica: it honours the question the first one asked, and the pause runs once.
	yes := &yesNo{accept: true}
	asker := x.connectEliciting(rs.lb, rs.token, "asked", "", yes)
	paused := create(t, asker, map[string]any{"title": "paused on approval"})
	if out := ok(t, asker, "e2b_manage_sandbox", map[string]any{"sandbox_id": paused, "action": "pause"}); out["success"] != true {
		t.Fatalf("the approved pause through the load balancer: %v", out)
	}
	if yes.asked.Load() != 1 {
		t.Fatalf("the user was asked %d times, want once", yes.asked.Load())
	}
	if sb, _ := the.emu.Sandbox(paused); sb.State != e2btest.StatePaused {
		t.Fatalf("the approved pause left the sandbox %q", sb.State)
	}

	// A 2025-era client keeps an Mcp-Session-Id: HAProxy's stick table keeps its requests on one replica.
	old := x.connectVersion(rs.lb, rs.token, "era2025", mcp.ProtocolVersion20251125)
	for range 6 {
		ok(t, old, "e2b_list_sandboxes", map[string]any{})
	}
	n1, n2 := x.callsIn(rs.dirs[0], "era2025"), x.callsIn(rs.dirs[1], "era2025")
	if n1+n2 != 6 || (n1 != 0 && n2 != 0) {
		t.Fatalf("a 2025-era session's 6 calls went %d to replica 1 and %d to replica 2; want all on one", n1, n2)
	}

	// /metrics of each replica: its own calls, and the shared gauges.
	for i, r := range rs.replicas {
		req, _ := http.NewRequest(http.MethodGet, r.base+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+rs.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `e2b_mcp_tool_calls_total{decision="allow",outcome="ok",tool="e2b_exec"}`) ||
			!strings.Contains(string(body), `e2b_mcp_sandboxes{state="running"} 1`) {
			t.Errorf("replica %d /metrics: %d\n%s", i+1, resp.StatusCode, body)
		}
	}
}

// A replica killed in the middle of a load fails only the calls it was running: every call that succeeded is in
// the store and in E2B, and the load balancer sends the rest to the replica left.
func TestReplicaKilledMidLoad(t *testing.T) {
	t.Parallel()
	x := newH(t)
	rs := x.startReplicas(2, "--lease", "1h")
	const workers = 4
	clients := make([]*client.Client, workers)
	sandboxes := make([]string, workers)
	for w := range workers {
		clients[w] = x.connectVersion(rs.lb, rs.token, fmt.Sprintf("load%d", w), "")
		sandboxes[w] = create(t, clients[w], map[string]any{"title": fmt.Sprintf("load %d", w)})
	}

	type outcome struct {
		path    string
		content string
		err     error
		isError bool
		when    time.Time
	}
	var (
		mu       sync.Mutex
		outcomes []outcome
		stop     = make(chan struct{})
		wg       sync.WaitGroup
	)
	for w := range workers {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				o := outcome{path: fmt.Sprintf("w%d-%d.txt", w, i), content: fmt.Sprintf("worker %d call %d", w, i)}
				ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
				res, err := callCtx(ctx, clients[w], "e2b_write_file",
					map[string]any{"sandbox_id": sandboxes[w], "path": o.path, "content": o.content}, nil)
				cancel()
				o.err, o.when = err, time.Now()
				o.isError = err == nil && res.IsError
				mu.Lock()
				outcomes = append(outcomes, o)
				mu.Unlock()
			}
		})
	}
	time.Sleep(time.Second)
	killed := time.Now()
	rs.replicas[1].kill9(t)
	time.Sleep(3 * time.Second)
	close(stop)
	waitfor.Return(t, 2*time.Minute, "the callers to stop", wg.Wait)

	var okCalls, failed, failedLate int
	for _, o := range outcomes {
		switch {
		case o.isError:
			t.Errorf("a call failed as a tool error, not as a lost connection: %s", o.path)
		case o.err != nil:
			failed++
			// A call still failing long after the kill means the load balancer kept sending calls to the dead
			// replica instead of the one left.
			if o.when.After(killed.Add(2 * time.Second)) {
				failedLate++
			}
		default:
			okCalls++
		}
	}
	t.Logf("%d calls succeeded, %d failed (%d of them more than 2s after the kill)", okCalls, failed, failedLate)
	if failed > workers {
		t.Errorf("%d calls failed; only the %d in flight on the killed replica may", failed, workers)
	}
	if failedLate > 0 || okCalls == 0 {
		t.Errorf("after the kill: %d calls failed late, %d succeeded in all", failedLate, okCalls)
	}
	// Every acknowledged write is there, read through the replica left.
	survivor := x.connectVersion(rs.replicas[0].base, rs.token, "load0", "")
	for _, o := range outcomes {
		if o.err != nil || o.isError {
			continue
		}
		w := 0
		fmt.Sscanf(o.path, "w%d-", &w)
		c := survivor
		if w != 0 {
			c = x.connectVersion(rs.replicas[0].base, rs.token, fmt.Sprintf("load%d", w), "")
		}
		if out := ok(t, c, "e2b_read_file", map[string]any{"sandbox_id": sandboxes[w], "path": o.path}); !strings.Contains(str(out, "content"), o.content) {
			t.Fatalf("acknowledged write %s reads %v", o.path, out)
		}
	}
	if ids := sandboxIDs(t, survivor); len(ids) != 1 || ids[0] != sandboxes[0] {
		t.Fatalf("the surviving replica lists %v for session load0, want [%s]", ids, sandboxes[0])
	}
}

// Replicas sweeping the same database give each orphan its action once.
func TestReplicasSweepEachOrphanOnce(t *testing.T) {
	t.Parallel()
	x := newH(t)
	rs := x.startReplicas(3, "--lease", "3s", "--sweep-interval", "100ms")
	c := x.connectVersion(rs.lb, rs.token, "left", "")
	orphans := []string{create(t, c, map[string]any{"title": "a"}), create(t, c, map[string]any{"title": "b"})}
	c.Close()
	waitfor.Until(t, 30*time.Second, "the lapsed session's sandboxes are paused", func() bool {
		for _, id := range orphans {
			if sb, found := the.emu.Sandbox(id); !found || sb.State != "paused" {
				return false
			}
		}
		return true
	})
	time.Sleep(time.Second) // more sweeps of every replica
	for _, id := range orphans {
		pauses := 0
		for _, r := range the.emu.Requests() {
			if r.Method == http.MethodPost && r.Path == "/sandboxes/"+id+"/pause" {
				pauses++
			}
		}
		if pauses != 1 {
			t.Errorf("orphan %s was paused %d times by the 3 replicas, want once", id, pauses)
		}
	}
}

// pgPassword is the password in a database URL.
func pgPassword(dbURL string) string {
	_, rest, _ := strings.Cut(strings.TrimPrefix(dbURL, "postgres://"), ":")
	pw, _, _ := strings.Cut(rest, "@")
	return pw
}
