package emulator

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b/wire"
)

// origin is a test server standing for a domain of the internet; it records what each request brought.
type origin struct {
	*httptest.Server
	mu   sync.Mutex
	seen []http.Header
}

func newOrigin(t *testing.T) *origin {
	t.Helper()
	o := &origin{}
	o.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		o.seen = append(o.seen, r.Header.Clone())
		o.mu.Unlock()
		_, _ = w.Write([]byte("hello from " + r.Host + "\n"))
	}))
	t.Cleanup(o.Close)
	return o
}

func (o *origin) requests() []http.Header {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]http.Header(nil), o.seen...)
}

func (o *origin) port() string { return o.URL[strings.LastIndex(o.URL, ":")+1:] }

func requireCurl(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is not installed; the egress tests run it inside sandboxes (apt-get install curl)")
	}
}

// shell runs a command in the sandbox and returns its stdout and stderr.
func (b envdBox) shell(t *testing.T, command string) (string, string) {
	t.Helper()
	return output(t, b.run(t, command, nil))
}

// The emulator's egress proxy does what E2B's does: a rule's header reaches the rule's domain (replacing one the
// sandbox sent), other domains get nothing, a denied destination is never reached, PUT .../network takes effect
// for the next request, and nothing inside the sandbox holds the value.
func TestEgressRulesAndLimits(t *testing.T) {
	requireCurl(t)
	git, other, denied := newOrigin(t), newOrigin(t), newOrigin(t)
	s := envdServer(t, Options{Hosts: map[string]string{"git.test": "127.0.0.1", "other.test": "127.0.0.1", "denied.test": "127.0.0.1"}})
	const secret = "Bearer s3cr3t-value-never-inside"
	b := envdCreate(t, s, map[string]any{"network": map[string]any{
		"allowOut": []string{"git.test", "*.other.test", "other.test"},
		"denyOut":  []string{wire.AllTraffic},
		"rules":    map[string]any{"git.test": []any{map[string]any{"transform": map[string]any{"headers": map[string]string{"Authorization": secret}}}}},
	}})
	curl := func(url string, extra ...string) string {
		return "curl -sS --max-time 20 " + strings.Join(extra, " ") + " " + url
	}

	out, errOut := b.shell(t, curl("http://git.test:"+git.port()+"/repo.git/info/refs", "-H 'Authorization: forged'")+" && "+
		curl("http://other.test:"+other.port()+"/x"))
	if !strings.Contains(out, "hello from git.test:") || !strings.Contains(out, "hello from other.test:") {
		t.Fatalf("requests through the proxy: stdout %q stderr %q", out, errOut)
	}
	if got := git.requests(); len(got) != 1 || got[0].Get("Authorization") != secret || len(got[0].Values("Authorization")) != 1 {
		t.Fatalf("git.test got %v", got)
	}
	if got := other.requests(); len(got) != 1 || got[0].Get("Authorization") != "" {
		t.Fatalf("other.test got %v", got)
	}
	// The header follows the destination, not what the request claims: a request to other.test that names
	// git.test as its Host gets nothing.
	b.shell(t, curl("http://other.test:"+other.port()+"/", "-H 'Host: git.test:"+git.port()+"'"))
	if got := other.requests(); len(got) != 2 || got[1].Get("Authorization") != "" {
		t.Fatalf("other.test with git.test's Host got %v", got)
	}

	// Denied: a domain outside allowOut, this machine's own addresses, and any way around the proxy.
	for _, cmd := range []string{
		curl("http://denied.test:" + denied.port() + "/"),
		curl("http://127.0.0.1:" + denied.port() + "/"),
		curl("http://denied.test:"+denied.port()+"/", "--noproxy '*'", "--resolve denied.test:"+denied.port()+":127.0.0.1"),
		"exec 3<>/dev/tcp/127.0.0.1/" + denied.port() + " && echo connected",
	} {
		if out, _ := b.shell(t, cmd+"; echo exit=$?"); strings.Contains(out, "hello") || strings.Contains(out, "connected") || strings.Contains(out, "exit=0") {
			t.Errorf("%s: reached: %q", cmd, out)
		}
	}
	if n := len(denied.requests()); n != 0 {
		t.Fatalf("the denied server got %d requests", n)
	}

	// Nothing inside holds the value: environment, every process's environ and command line, the files.
	out, _ = b.shell(t, "env; cat /proc/*/environ /proc/*/cmdline 2>/dev/null | tr '\\0' '\\n'; grep -rs 's3''cr3t' /home /tmp /root /run /etc 2>/dev/null; echo done")
	if strings.Contains(out, "s3cr3t") || !strings.Contains(out, "done") {
		t.Fatalf("the value is visible inside the sandbox:\n%s", out)
	}

	// PUT replaces everything: a new value is in force for the next request, and the old limits are gone.
	put := cpCall(t, s, http.MethodPut, "/sandboxes/"+b.id+"/network", envdTestKey, map[string]any{
		"rules": map[string]any{"git.test": []any{map[string]any{"transform": map[string]any{"headers": map[string]string{"Authorization": "Bearer rotated"}}}}},
	})
	if put.status != http.StatusNoContent {
		t.Fatalf("PUT network: %d %s", put.status, put.body)
	}
	out, errOut = b.shell(t, curl("http://git.test:"+git.port()+"/")+" && "+curl("http://denied.test:"+denied.port()+"/"))
	if !strings.Contains(out, "hello from denied.test") {
		t.Fatalf("after the update: stdout %q stderr %q", out, errOut)
	}
	if got := git.requests(); got[len(got)-1].Get("Authorization") != "Bearer rotated" {
		t.Fatalf("after the update git.test got %v", got[len(got)-1])
	}
	if sb, _ := s.Sandbox(b.id); sb.Network == nil || len(sb.Network.AllowOut) != 0 || len(sb.Network.DenyOut) != 0 {
		t.Fatalf("recorded network after PUT: %+v", sb.Network)
	}
}

func TestEgressNetworkAnswers(t *testing.T) {
	s := newCPServer(t, Options{})
	bad := cpCall(t, s, http.MethodPost, "/sandboxes", envdTestKey, map[string]any{"templateID": "base", "network": map[string]any{"denyOut": []string{"evil.com"}}})
	if bad.status != http.StatusBadRequest {
		t.Fatalf("a domain in denyOut: %d %s", bad.status, bad.body)
	}
	sb := cpCreate(t, s, envdTestKey, map[string]any{"templateID": "base", "allow_internet_access": false})
	id := sb["sandboxID"].(string)
	if rec, _ := s.Sandbox(id); rec.Network == nil || rec.Network.DenyOut[0] != wire.AllTraffic {
		t.Fatalf("allow_internet_access false: %+v", rec.Network)
	}
	if a := cpCall(t, s, http.MethodPut, "/sandboxes/nosuchbox/network", envdTestKey, map[string]any{}); a.status != http.StatusNotFound {
		t.Fatalf("PUT for an unknown sandbox: %d", a.status)
	}
	if a := cpCall(t, s, http.MethodPut, "/sandboxes/"+id+"/network", "e2b_00ff", map[string]any{}); a.status != http.StatusNotFound {
		t.Fatalf("PUT by another team: %d", a.status)
	}
	if a := cpCall(t, s, http.MethodPost, "/sandboxes/"+id+"/pause", envdTestKey, nil); a.status != http.StatusNoContent {
		t.Fatalf("pause: %d", a.status)
	}
	if a := cpCall(t, s, http.MethodPut, "/sandboxes/"+id+"/network", envdTestKey, map[string]any{}); a.status != http.StatusConflict {
		t.Fatalf("PUT for a paused sandbox: %d", a.status)
	}
}

// socksConnect asks a sandbox's proxy for host:port and returns its reply code.
func socksConnect(t *testing.T, s *Server, id string, cmd byte, host string, port uint16) byte {
	t.Helper()
	dir, err := s.egress.socketDir(id)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("unix", filepath.Join(dir, filepath.Base(egressSocket)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	req := []byte{5, 1, 0, 5, cmd, 0, 3, byte(len(host))}
	req = append(append(req, host...), byte(port>>8), byte(port))
	if _, err := c.Write(req); err != nil {
		t.Fatal(err)
	}
	reply := make([]byte, 12)
	if _, err := io.ReadFull(c, reply); err != nil {
		t.Fatal(err)
	}
	return reply[3]
}

// Without a name mapped by Options.Hosts, nothing of this machine or its networks is reached through the proxy,
// however it is named; and only CONNECT is served.
func TestEgressProxyRefusesTheHost(t *testing.T) {
	o := newOrigin(t)
	s := newCPServer(t, Options{Hosts: map[string]string{"mapped.test": "127.0.0.1"}})
	sb := cpCreate(t, s, envdTestKey, map[string]any{"templateID": "base"})
	id := sb["sandboxID"].(string)
	port, _ := strconv.Atoi(o.port())
	for _, host := range []string{"127.0.0.1", "localhost", "::1", "::ffff:127.0.0.1", "10.0.0.1", "169.254.169.254", "0.0.0.0"} {
		if code := socksConnect(t, s, id, 1, host, uint16(port)); code != socksNotAllowed && code != socksUnreachable {
			t.Errorf("CONNECT %s: reply %d", host, code)
		}
	}
	if code := socksConnect(t, s, id, 3, "mapped.test", uint16(port)); code != socksNoCommand {
		t.Errorf("UDP ASSOCIATE: reply %d", code)
	}
	if code := socksConnect(t, s, id, 1, "mapped.test", uint16(port)); code != socksOK {
		t.Errorf("CONNECT to a mapped name: reply %d", code)
	}
	if n := len(o.requests()); n != 0 {
		t.Fatalf("the host's server got %d requests", n)
	}
}
