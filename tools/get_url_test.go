package tools

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// localhostGet fetches link as a browser would: a name under localhost is this machine (Go's resolver may not
// know that), the Host header the name itself.
func localhostGet(t *testing.T, link string, hdr http.Header) (int, string, http.Header) {
	t.Helper()
	c := &http.Client{
		Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, port, _ := net.SplitHostPort(addr)
			if host == "localhost" || strings.HasSuffix(host, ".localhost") {
				addr = net.JoinHostPort("127.0.0.1", port)
			}
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	req, err := http.NewRequest(http.MethodGet, link, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), resp.Header
}

// A web server started in the background is at the link e2b_get_url gives, which says what listens.
func TestGetURLPublic(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.connect(t, eras[0], Caller{Owner: "alice", Session: "main"})
	id := s.createSandbox(t, nil)

	before := s.ok(t, "e2b_get_url", map[string]any{"sandbox_id": id, "port": 8000})
	wantLink := fmt.Sprintf("http://8000-%s.localhost:%s/", id, e.emu.URL()[strings.LastIndex(e.emu.URL(), ":")+1:])
	if before["url"] != wantLink || before["access"] != "public" || before["listening"] != false {
		t.Fatalf("before the server starts: %v (want url %s)", before, wantLink)
	}
	wantContains(t, before["note"].(string), "Nothing listens on port 8000")

	s.ok(t, "e2b_exec", map[string]any{"sandbox_id": id, "command": "echo hi > hello.txt; python3 -m http.server 8000", "background": true, "timeout_ms": 100})
	var after map[string]any
	waitfor.Until(t, 30*time.Second, "the server in the sandbox to listen on 8000", func() bool {
		after = s.ok(t, "e2b_get_url", map[string]any{"sandbox_id": id, "port": 8000})
		return after["listening"] == true
	})
	if code, body, _ := localhostGet(t, after["url"].(string), nil); code != http.StatusOK || !strings.Contains(body, "Directory listing") || !strings.Contains(body, "hello.txt") {
		t.Fatalf("the link: HTTP %d %s", code, body)
	}
	other := s.ok(t, "e2b_get_url", map[string]any{"sandbox_id": id, "port": 9000})
	if ports, _ := other["listening_ports"].([]any); other["listening"] != false || len(ports) != 1 || ports[0] != float64(8000) {
		t.Fatalf("a port nothing listens on: %v", other)
	}

	wantContains(t, s.fail(t, "e2b_get_url", map[string]any{"sandbox_id": id}), "Missing required parameter: port")
	wantContains(t, s.fail(t, "e2b_get_url", map[string]any{"sandbox_id": id, "port": 70000}), "Invalid port 70000")
	wantContains(t, s.fail(t, "e2b_get_url", map[string]any{"sandbox_id": id, "port": 49983}), "E2B's own daemon")
	bob := e.connect(t, eras[0], Caller{Owner: "bob", Session: "main"})
	wantContains(t, bob.fail(t, "e2b_get_url", map[string]any{"sandbox_id": id, "port": 8000}), "not found")
}

func TestParseListening(t *testing.T) {
	t.Parallel()
	table := `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 1 1 0000000000000000 100 0 0 10 0
   1: 0100007F:C33F 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 2 1 0000000000000000 100 0 0 10 0
   2: 0100007F:1F40 0100007F:A000 01 00000000:00000000 00:00000000 00000000  1000        0 3 1 0000000000000000 100 0 0 10 0
  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:1F40 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4 1 0000000000000000 100 0 0 10 0
   1: 00000000000000000000000000000000:0BB8 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 5 1 0000000000000000 100 0 0 10 0
`
	got := parseListening(table)
	if fmt.Sprint(got) != "[3000 8000]" { // envd's 49983 (C33F) is left out; 8000 once; the connection is not listening
		t.Fatalf("listening ports: %v", got)
	}
}
