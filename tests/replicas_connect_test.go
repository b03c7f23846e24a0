package tests

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// Two replicas on two "hosts" (each its own state directory and its own copy of the master key file, no D-Bus)
// on one PostgreSQL behind HAProxy, which balances the connect page round robin with no stickiness: members sign
// in through a real OpenID Connect provider and connect their own E2B keys in headless Chromium while the page's
// requests alternate between the replicas; the key is then used by every replica. A link or a member's session
// is honoured by every replica and spent on all at once; the database holds no key, link or cookie in the
// clear.
func TestReplicasShareKeysAndConnectLinks(t *testing.T) {
	t.Parallel()
	node := requireNode(t)
	x := newH(t)
	x.headless = true
	requireChromedriver(t)
	if _, err := exec.LookPath("haproxy"); err != nil {
		requireEnv(t, false, "HAProxy is not installed (apt-get install haproxy)")
	}
	pg, db := startPostgres(t)

	lbAddr := freePort(t)
	public := "http://" + lbAddr
	issuer, redirect := x.startTeamProvider(public)

	_, masterHex := x.masterKeyFile("master.key")
	key1, key2, key3 := newAPIKey(), newAPIKey(), newAPIKey()
	for _, k := range []string{key1, key2, key3} {
		the.noteKey(k)
	}
	var replicas []*httpServer
	var addrs, stateDirs, keyFiles []string
	for i := range 2 {
		host := x.path(fmt.Sprintf("host%d", i+1))
		keyFile := filepath.Join(host, "credentials", "master.key")
		if err := os.MkdirAll(filepath.Dir(keyFile), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(keyFile, []byte(masterHex+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(host, "state")
		if i == 0 {
			// Host 1 kept a key store file, as every host did before the key store moved into the database.
			x.mustRun(strings.NewReader(key3+"\n"), "auth", "login", "--owner", "id3", "--master-key-file", keyFile,
				"--state-dir", dir, "--api-url", the.emu.URL())
		}
		r := x.startHTTP(x.serveArgs("operator", "team", "--transport", "http", "--store", db, "--state-dir", dir,
			"--master-key-file", keyFile, "--public-url", public, "--oauth-issuer", issuer, "--oauth-client-id", pageClient,
			"--oauth-scope", "openid")...)
		if !r.stderr.shows("encrypted key store in postgres://", 10*time.Second) {
			t.Errorf("replica %d does not say that the keys are in the database:\n%s", i+1, r.stderr)
		}
		if i == 0 && !r.stderr.shows("copied the entries id3 of the key store file "+filepath.Join(dir, "keys.json")+" into the database", 10*time.Second) {
			t.Errorf("replica 1 does not say that it moved the key store file into the database:\n%s", r.stderr)
		}
		replicas, addrs = append(replicas, r), append(addrs, strings.TrimPrefix(r.base, "http://"))
		stateDirs, keyFiles = append(stateDirs, dir), append(keyFiles, keyFile)
	}
	lb := x.startHAProxy(lbAddr, addrs)

	_, token1 := x.runOAuthFlow(node, public+"/mcp", mcpClient, redirect, "test-user@127.0.0.1", "token-only")
	_, token2 := x.runOAuthFlow(node, public+"/mcp", mcpClient, redirect, "test-user2", "token-only")

	// Member 2's client cannot open URLs: the answer names a link, which every replica knows; a link ID one
	// character off is known to none.
	plain := x.connectVersion(lb, token2, "m2", "")
	link2 := connectLinkRE.FindString(fails(t, plain, "e2b_create_sandbox", map[string]any{}))
	if !strings.HasPrefix(link2, public+"/connect/") {
		t.Fatalf("no connect link through the load balancer: %q", link2)
	}
	page := &directPage{t: t}
	for i, r := range replicas {
		if code, to := page.get(r.base+linkPath(link2), ""); code != http.StatusFound || !strings.HasPrefix(to, issuer) {
			t.Errorf("member 2's link on replica %d: %d to %q, want the sign-in", i+1, code, to)
		}
		if code, _ := page.get(r.base+linkPath(offByOne(link2)), ""); code != http.StatusNotFound {
			t.Errorf("a guessed link on replica %d: %d, want 404", i+1, code)
		}
	}
	b2 := x.startChromium()
	b2.open(link2)
	b2.signIn("test-user2")
	b2.waitFor(`name="key"`)
	cookie2 := b2.cookie("e2bmcp_connect")

	// Member 1's client opens the page (URL elicitation in protocol 2026-07-28: the call that answers the request
	// is a request of its own, which HAProxy may send to either replica) while the browser's requests go to both.
	// Member 2's signed-in session is worth nothing on member 1's link, on either replica: it is sent to sign in.
	var link1 string
	var mu sync.Mutex
	opener := &openInBrowser{member: func(link string) {
		mu.Lock()
		link1 = link
		mu.Unlock()
		for i, r := range replicas {
			if code, to := page.get(r.base+linkPath(link), cookie2); code != http.StatusFound || !strings.HasPrefix(to, issuer) {
				t.Errorf("member 2's cookie on member 1's link, replica %d: %d to %q, want the sign-in", i+1, code, to)
			}
		}
		b1 := x.startChromium()
		b1.open(link)
		b1.signIn("test-user@127.0.0.1")
		if p := b1.connectKey(key1); !strings.Contains(p, "Connected") {
			t.Errorf("member 1 connecting through the load balancer:\n%s", p)
		}
		// Used once through one replica, the link is spent on every replica.
		b1.open(link)
		if p := b1.waitFor("</h1>"); !strings.Contains(p, "cannot be used") {
			t.Errorf("member 1's used link:\n%s", p)
		}
	}}
	// A failing call must not end the test while the browser is still at work.
	defer waitfor.Return(t, time.Minute, "the browser to finish with the connect page", opener.wg.Wait)
	c1 := x.connectURLClient(public, token1, mcp.ProtocolVersion20260728, opener)
	id1 := create(t, c1, map[string]any{"title": "member 1"})
	waitfor.Return(t, time.Minute, "the browser to finish with the connect page", opener.wg.Wait)
	if sb, _ := the.emu.Sandbox(id1); sb.Team != key1 {
		t.Error("member 1's waiting call did not run with their own key")
	}
	for i, r := range replicas {
		if code, _ := page.get(r.base+linkPath(link1), ""); code != http.StatusNotFound {
			t.Errorf("member 1's used link on replica %d: %d, want 404", i+1, code)
		}
	}

	// Member 2 connects; their next calls succeed on both replicas, with their key.
	if p := b2.connectKey(key2); !strings.Contains(p, "Connected") {
		t.Fatalf("member 2 connecting:\n%s", p)
	}
	before := []int{x.callsIn(stateDirs[0], "m2"), x.callsIn(stateDirs[1], "m2")}
	id2 := create(t, plain, map[string]any{"title": "member 2"})
	if sb, _ := the.emu.Sandbox(id2); sb.Team != key2 {
		t.Error("member 2's sandbox was not made with their own key")
	}
	for range 3 {
		if ids := sandboxIDs(t, plain); len(ids) != 1 || ids[0] != id2 {
			t.Fatalf("member 2 lists %v, want only %s", ids, id2)
		}
	}
	for i, dir := range stateDirs {
		if x.callsIn(dir, "m2") == before[i] {
			t.Errorf("replica %d served none of member 2's calls after the key was connected", i+1)
		}
	}

	// The operator's commands on either host read, revoke and store the keys in the database; a revoked member
	// is sent to the connect page again by every replica.
	for owner, key := range map[string]string{"id1": key1, "id3": key3} {
		status := x.mustRun(nil, "auth", "status", "--owner", owner, "--store", db, "--master-key-file", keyFiles[1])
		if !strings.Contains(status.stdout, "ending in "+key[len(key)-4:]) {
			t.Errorf("auth status of %s on host 2: %s", owner, status)
		}
	}
	x.mustRun(nil, "auth", "logout", "--owner", "id2", "--store", db, "--master-key-file", keyFiles[0])
	for range 2 {
		if msg := fails(t, plain, "e2b_list_sandboxes", map[string]any{}); !strings.Contains(msg, "No E2B API key is connected for id2") {
			t.Errorf("a call after logout: %q", msg)
		}
	}
	// The operator stores member 2's key again from host 2; both replicas use it.
	x.mustRun(strings.NewReader(key2+"\n"), "auth", "login", "--owner", "id2", "--store", db, "--master-key-file", keyFiles[1],
		"--api-url", the.emu.URL())
	for range 2 {
		if ids := sandboxIDs(t, plain); len(ids) != 1 || ids[0] != id2 {
			t.Errorf("member 2 lists %v after auth login, want %s", ids, id2)
		}
	}

	// The master key is rotated in the database from host 1; host 2's commands need the new key from then on.
	_, newHex := x.masterKeyFile("new.key")
	rotated := x.mustRun(nil, "keys", "rotate-master", "--store", db, "--master-key-file", keyFiles[0],
		"--new-master-key-file", x.path("secrets", "new.key"))
	if !strings.Contains(rotated.stdout, "Sealed the 4 entries of the key store in postgres://") { // the members' keys, the data key
		t.Errorf("rotating the key store in the database: %s", rotated)
	}
	if r := x.run(nil, "auth", "status", "--owner", "id1", "--store", db, "--master-key-file", keyFiles[1]); r.err == nil ||
		!strings.Contains(r.stderr, keyFiles[1]+" does not open the key store in postgres://") {
		t.Errorf("auth status with the old master key after the rotation: %s", r)
	}
	status := x.mustRun(nil, "auth", "status", "--owner", "id1", "--store", db, "--master-key-file", x.path("secrets", "new.key"))
	if !strings.Contains(status.stdout, "ending in "+key1[len(key1)-4:]) {
		t.Errorf("auth status with the new master key: %s", status)
	}

	// A copy of the database gives away no key, no master key, no link and no cookie.
	dump, err := pg.Dump(db)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(x.path("pgdump.sql"), dump, 0o600); err != nil { // the harness scans it for the keys
		t.Fatal(err)
	}
	if !strings.Contains(string(dump), "e2b_mcp_secrets") || !strings.Contains(string(dump), "id1\t") {
		t.Fatalf("the dump lacks the key store:\n%s", dump)
	}
	// (The audit log records the answers that named the links: a link opens nothing without its member's sign-in.)
	for _, leak := range findLeaks(map[string]string{masterHex: "the master key", newHex: "the new master key"}, nil, stateDirs...) {
		t.Errorf("secret leaked: %s", leak)
	}
	for _, leak := range findLeaks(map[string]string{masterHex: "the master key", newHex: "the new master key", linkID(link1): "member 1's link",
		linkID(link2): "member 2's link", cookie2: "member 2's connect cookie"}, nil, x.path("pgdump.sql")) {
		t.Errorf("secret leaked: %s", leak)
	}
}

// directPage requests connect pages as a browser would, without following redirects, with a given cookie.
type directPage struct{ t *testing.T }

// get returns the status and the redirect's target.
func (p *directPage) get(u, cookie string) (int, string) {
	p.t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		p.t.Fatal(err)
	}
	if cookie != "" {
		req.AddCookie(&http.Cookie{Name: "e2bmcp_connect", Value: cookie})
	}
	c := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Location")
}

// linkPath is a connect link's path, to be asked of one replica directly.
func linkPath(link string) string {
	u, err := url.Parse(link)
	if err != nil {
		return "/connect/unparsable"
	}
	return u.Path
}

// linkID is a connect link's secret part.
func linkID(link string) string { return strings.TrimPrefix(linkPath(link), "/connect/") }

// offByOne is the link with its ID's last character changed.
func offByOne(link string) string {
	last := link[len(link)-1]
	next := byte('A')
	if last == 'A' {
		next = 'B'
	}
	return link[:len(link)-1] + string(next)
}
