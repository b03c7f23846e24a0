package tests

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"

	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// The domains the emulator's egress proxy resolves to this machine, so that servers of the tests stand for
// sites of the internet: git (the credential's domain), other (allowed, no credential), denied (outside the
// allow-list).
const (
	gitDomain    = "git.e2e.test"
	otherDomain  = "other.e2e.test"
	deniedDomain = "denied.e2e.test"
)

func egressHosts() map[string]string {
	return map[string]string{gitDomain: "127.0.0.1", otherDomain: "127.0.0.1", deniedDomain: "127.0.0.1"}
}

// site is a test server standing for one domain; it records the Authorization header of every request.
type site struct {
	*httptest.Server
	domain string
	mu     sync.Mutex
	auth   []string
}

func newSite(t *testing.T, domain string) *site {
	t.Helper()
	s := &site{domain: domain}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.auth = append(s.auth, r.Header.Get("Authorization"))
		s.mu.Unlock()
		_, _ = w.Write([]byte("reached " + domain + "\n"))
	}))
	t.Cleanup(s.Close)
	return s
}

// url is the site's address as a sandbox names it: its domain and the test server's port.
func (s *site) url() string {
	return "http://" + s.domain + ":" + s.URL[strings.LastIndex(s.URL, ":")+1:] + "/info/refs"
}

// last is the Authorization header of the latest request ("" for none), and how many requests came.
func (s *site) last() (string, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.auth) == 0 {
		return "", 0
	}
	return s.auth[len(s.auth)-1], len(s.auth)
}

// results keeps every tool result text of a test, to be searched for a credential's value at its end.
type results struct{ texts []string }

func (r *results) ok(t *testing.T, c *client.Client, tool string, args map[string]any) map[string]any {
	t.Helper()
	res := call(t, c, tool, args)
	r.texts = append(r.texts, text(res))
	if res.IsError {
		t.Fatalf("%s %v: tool error: %s", tool, args, text(res))
	}
	return fields(t, res)
}

// basicHeader is what the egress proxy sets for a GitHub token.
func basicHeader(token string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+token))
}

// noteCredential registers a token and its header forms with the secret scan.
func noteCredential(token string) {
	the.noteSecret(token, "credential value "+token[:6]+"…")
	h := basicHeader(token)
	the.noteSecret(strings.TrimPrefix(h, "Basic "), "credential header value "+h[:12]+"…")
}

// A credential added with the CLI while a server runs for an owner who had none is in the next sandbox it
// creates, and one removed is not: the server remembers that the owner has no credentials only while the
// keyring still holds none.
func TestEgressCredentialAddedWhileServing(t *testing.T) {
	t.Parallel()
	x := newH(t)
	owner := x.owner("egress-late")
	x.login(owner)
	s := x.startStdio(clientOpts{}, x.serveArgs(owner, "egress-late", "--allow-out", gitDomain)...)
	var res results
	credentialsOfCreate := func(when string) []any {
		t.Helper()
		out := res.ok(t, s.Client, "e2b_create_sandbox", map[string]any{"title": when})
		the.noteSandbox(str(out, "sandbox_id"))
		egress, _ := out["egress"].(map[string]any)
		creds, ok := egress["credentials"].([]any)
		if !ok {
			t.Fatalf("%s: create's egress has no credentials list: %v", when, egress)
		}
		return creds
	}
	for _, when := range []string{"before any credential", "again before any credential"} {
		if creds := credentialsOfCreate(when); len(creds) != 0 {
			t.Fatalf("%s: create applied %v", when, creds)
		}
	}
	value := "ghp_" + randomHex(18)
	noteCredential(value)
	x.mustRun(strings.NewReader(value+"\n"), "credentials", "add", "gh", "--domain", gitDomain, "--github", "--owner", owner)
	x.t.Cleanup(func() { x.run(nil, "credentials", "remove", "gh", "--owner", owner) })
	if creds := credentialsOfCreate("after credentials add"); len(creds) != 1 || creds[0].(map[string]any)["name"] != "gh" {
		t.Fatalf("a create after credentials add applied %v; want gh", creds)
	}
	x.mustRun(nil, "credentials", "remove", "gh", "--owner", owner)
	if creds := credentialsOfCreate("after credentials remove"); len(creds) != 0 {
		t.Fatalf("a create after credentials remove applied %v", creds)
	}
}

// A credential added with the CLI into the real keyring is in force through the emulator's egress proxy in a new
// sandbox, a resumed one, a live fork, a fork of a checkpoint and an adopted one after a restart; a rotated value
// replaces the old one at the next resume; remove takes it out. Only the allow-list's destinations are reached.
// No value appears in any result, output, log, audit line or file of the run (the scan of newH and TestMain).
func TestEgressCredentialsEndToEnd(t *testing.T) {
	t.Parallel()
	x := newH(t)
	owner := x.owner("egress")
	key := x.login(owner)
	git, other, denied := newSite(t, gitDomain), newSite(t, otherDomain), newSite(t, deniedDomain)

	first := "ghp_" + randomHex(18)
	noteCredential(first)
	r := x.mustRun(strings.NewReader(first+"\n"), "credentials", "add", "gh", "--domain", gitDomain, "--github", "--owner", owner)
	if !strings.Contains(r.stdout, "Authorization: Basic base64(x-access-token:<the stored value>)") {
		t.Fatalf("credentials add: %s", r)
	}
	x.t.Cleanup(func() { x.run(nil, "credentials", "remove", "gh", "--owner", owner) })
	if r := x.mustRun(nil, "credentials", "list", "--owner", owner); !strings.Contains(r.stdout, "gh") || !strings.Contains(r.stdout, gitDomain) {
		t.Fatalf("credentials list: %s", r)
	}

	args := x.serveArgs(owner, "egress", "--allow-out", gitDomain+","+otherDomain)
	s := x.startStdio(clientOpts{}, args...)
	var res results
	curl := func(c *client.Client, id string, target *site) map[string]any {
		t.Helper()
		return res.ok(t, c, "e2b_exec", map[string]any{"sandbox_id": id, "command": "curl -sS --max-time 20 " + target.url()})
	}
	wantAuth := func(c *client.Client, id, want, when string) {
		t.Helper()
		out := curl(c, id, git)
		if str(out, "stdout") != "reached "+gitDomain+"\n" {
			t.Fatalf("%s: curl to %s: %v", when, gitDomain, out)
		}
		if got, _ := git.last(); got != want {
			t.Fatalf("%s: %s got Authorization %q, want %q", when, gitDomain, got, want)
		}
	}

	out := res.ok(t, s.Client, "e2b_create_sandbox", map[string]any{"title": "repo"})
	id := str(out, "sandbox_id")
	the.noteSandbox(id)
	egress, _ := out["egress"].(map[string]any)
	if creds, _ := egress["credentials"].([]any); len(creds) != 1 || creds[0].(map[string]any)["name"] != "gh" ||
		creds[0].(map[string]any)["domain"] != gitDomain || egress["internet"] != false {
		t.Fatalf("create's egress: %v", egress)
	}
	wantAuth(s.Client, id, basicHeader(first), "new sandbox")
	curl(s.Client, id, other)
	if got, n := other.last(); n != 1 || got != "" {
		t.Fatalf("%s got Authorization %q (%d requests)", otherDomain, got, n)
	}
	out = res.ok(t, s.Client, "e2b_exec", map[string]any{"sandbox_id": id, "command": "curl -sS --max-time 20 " + denied.url() + "; echo exit=$?"})
	if strings.Contains(str(out, "stdout"), "reached") || strings.Contains(str(out, "stdout"), "exit=0") {
		t.Fatalf("a destination outside the allow-list was reached: %v", out)
	}
	if _, n := denied.last(); n != 0 {
		t.Fatalf("%s got %d requests", deniedDomain, n)
	}
	// Nothing inside the sandbox holds the value (the results are searched at the end).
	res.ok(t, s.Client, "e2b_exec", map[string]any{"sandbox_id": id,
		"command": "env; cat /proc/*/environ /proc/*/cmdline 2>/dev/null | tr '\\0' '\\n'; ls -la /run/e2b-egress; grep -rsl ghp_ /home /tmp /root /etc /run; true"})

	// The model can neither set nor widen the egress configuration: no tool takes it.
	for _, extra := range []map[string]any{
		{"network": map[string]any{"allowOut": []string{deniedDomain}}},
		{"allow_out": []string{deniedDomain}},
		{"egress": map[string]any{"internet": true}},
		{"credentials": []string{"gh"}},
	} {
		a := map[string]any{"title": "widened"}
		for k, v := range extra {
			a[k] = v
		}
		if msg := fails(t, s.Client, "e2b_create_sandbox", a); !strings.Contains(msg, "Unknown parameter") {
			t.Fatalf("create with %v: %s", extra, msg)
		}
	}
	if msg := fails(t, s.Client, "e2b_manage_sandbox", map[string]any{"sandbox_id": id, "action": "resume", "network": map[string]any{}}); !strings.Contains(msg, "Unknown parameter") {
		t.Fatalf("resume with a network: %s", msg)
	}

	// Rotated while the sandbox sleeps: the resume brings the new value.
	second := "ghp_" + randomHex(18)
	noteCredential(second)
	x.mustRun(strings.NewReader(second+"\n"), "credentials", "add", "gh", "--domain", gitDomain, "--github", "--owner", owner)
	res.ok(t, s.Client, "e2b_manage_sandbox", map[string]any{"sandbox_id": id, "action": "pause"})
	res.ok(t, s.Client, "e2b_manage_sandbox", map[string]any{"sandbox_id": id, "action": "resume"})
	wantAuth(s.Client, id, basicHeader(second), "resumed after a rotation")

	// Forks, live and from a checkpoint.
	cp := res.ok(t, s.Client, "e2b_checkpoint_sandbox", map[string]any{"sandbox_id": id})
	for _, a := range []map[string]any{{"sandbox_id": id}, {"checkpoint_id": str(cp, "checkpoint_id")}} {
		out := res.ok(t, s.Client, "e2b_fork_sandbox", a)
		fork := str(out["sandboxes"].([]any)[0].(map[string]any), "sandbox_id")
		the.noteSandbox(fork)
		wantAuth(s.Client, fork, basicHeader(second), "fork "+fork)
	}

	// A sandbox the store never recorded (a crash between E2B's create and the record) is adopted at the next
	// start with the owner's credentials.
	s.kill9(t)
	orphan, err := the.emu.CreateSandbox(key, e2btest.SandboxOptions{Secure: true, Metadata: map[string]string{
		"e2b-mcp": "true", "e2b-mcp.owner": owner, "e2b-mcp.session_id": "egress", "e2b-mcp.title": "orphan"}})
	if err != nil {
		t.Fatal(err)
	}
	the.noteSandbox(orphan.ID)
	s2 := x.startStdio(clientOpts{}, args...)
	waitfor.Until(t, 30*time.Second, "the adopted sandbox's egress configuration", func() bool {
		sb, ok := the.emu.Sandbox(orphan.ID)
		return ok && sb.Network != nil && len(sb.Network.Rules) > 0
	})
	wantAuth(s2.Client, orphan.ID, basicHeader(second), "adopted after a restart")
	wantAuth(s2.Client, id, basicHeader(second), "after a restart")

	// Removed: the next resume takes it out.
	x.mustRun(nil, "credentials", "remove", "gh", "--owner", owner)
	res.ok(t, s2.Client, "e2b_manage_sandbox", map[string]any{"sandbox_id": id, "action": "pause"})
	res.ok(t, s2.Client, "e2b_manage_sandbox", map[string]any{"sandbox_id": id, "action": "resume"})
	wantAuth(s2.Client, id, "", "resumed after remove")

	// The audit log is read like every output: the scan of newH covers it and the state directory.
	x.mustRun(nil, "audit", "--state-dir", x.path("state"), "--json")
	// Only the control-plane calls that configure a sandbox carry a value; nothing sent to envd does.
	carriers := 0
	for _, rq := range the.emu.Requests() {
		raw := fmt.Sprint(rq.Header) + string(rq.Body)
		if !strings.Contains(raw, strings.TrimPrefix(basicHeader(first), "Basic ")) && !strings.Contains(raw, strings.TrimPrefix(basicHeader(second), "Basic ")) {
			continue
		}
		if rq.Header.Get("E2b-Sandbox-Id") != "" || !(rq.Method == http.MethodPost && (rq.Path == "/sandboxes" || rq.Path == "/v2/sandboxes") ||
			rq.Method == http.MethodPut && strings.HasSuffix(rq.Path, "/network")) {
			t.Fatalf("a credential value was sent in %s %s (host %s)", rq.Method, rq.Path, rq.Host)
		}
		carriers++
	}
	if carriers < 5 {
		t.Fatalf("only %d control-plane calls carried the credential; the check above saw nothing", carriers)
	}
	for _, txt := range res.texts {
		for _, v := range []string{first, second, basicHeader(first), basicHeader(second)} {
			if strings.Contains(txt, v) || strings.Contains(txt, strings.TrimPrefix(v, "Basic ")) {
				t.Fatalf("a tool result holds a credential value:\n%s", txt)
			}
		}
	}
}

// The operator's egress file scopes one session of an owner: there no credential and no internet, while the
// owner's other sessions keep both.
func TestEgressFileScopesASession(t *testing.T) {
	t.Parallel()
	x := newH(t)
	owner := x.owner("scoped")
	x.login(owner)
	other := newSite(t, otherDomain)
	token := "ghp_" + randomHex(18)
	noteCredential(token)
	x.mustRun(strings.NewReader(token+"\n"), "credentials", "add", "gh", "--domain", gitDomain, "--github", "--owner", owner)
	x.t.Cleanup(func() { x.run(nil, "credentials", "remove", "gh", "--owner", owner) })
	file := x.path("egress.yaml")
	if err := os.WriteFile(file, []byte("owners:\n  "+owner+":\n    sessions:\n      locked: {no_internet: true, credentials: none}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		session     string
		internet    bool
		credentials int
	}{{"locked", false, 0}, {"open", true, 1}} {
		s := x.startStdio(clientOpts{}, x.serveArgs(owner, tc.session, "--egress-file", file)...)
		out := ok(t, s.Client, "e2b_create_sandbox", map[string]any{})
		id := str(out, "sandbox_id")
		the.noteSandbox(id)
		eg, _ := out["egress"].(map[string]any)
		if creds, _ := eg["credentials"].([]any); eg["internet"] != tc.internet || len(creds) != tc.credentials {
			t.Fatalf("session %s: egress %v", tc.session, eg)
		}
		run := ok(t, s.Client, "e2b_exec", map[string]any{"sandbox_id": id, "command": "curl -sS --max-time 20 " + other.url() + "; echo exit=$?"})
		if reached := strings.Contains(str(run, "stdout"), "reached"); reached != tc.internet {
			t.Fatalf("session %s: reached %s: %v (%v)", tc.session, otherDomain, reached, run)
		}
	}
}
