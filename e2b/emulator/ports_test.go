package emulator

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// portGet asks for path on port of the sandbox by its host name, as a browser would, with hdr.
func (b envdBox) portGet(t *testing.T, port, path string, hdr map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.s.URL()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = port + "-" + b.id + ".localhost"
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// serveDirectory starts python3's http.server on port 8000 in the background and waits until it answers.
func (b envdBox) serveDirectory(t *testing.T, hdr map[string]string) {
	t.Helper()
	b.run(t, "echo hello > /home/user/hello.txt; nohup python3 -m http.server 8000 >/dev/null 2>&1 &", nil)
	waitfor.Until(t, 30*time.Second, "the server in the sandbox to list hello.txt", func() bool {
		code, body := b.portGet(t, "8000", "/", hdr)
		return code == http.StatusOK && strings.Contains(body, "hello.txt")
	})
}

func TestPortsServedByHostName(t *testing.T) {
	s := envdServer(t, Options{})
	b := envdCreate(t, s, nil)
	if code, body := b.portGet(t, "8000", "/", nil); code != http.StatusBadGateway || !strings.Contains(body, "port is not open") {
		t.Fatalf("before anything listens: HTTP %d %s", code, body)
	}
	b.serveDirectory(t, nil)
	if code, body := b.portGet(t, "8000", "/hello.txt", nil); code != http.StatusOK || body != "hello\n" {
		t.Fatalf("a file: HTTP %d %q", code, body)
	}
	if code, body := b.portGet(t, "8001", "/", nil); code != http.StatusBadGateway || !strings.Contains(body, "port is not open") {
		t.Fatalf("a port nothing listens on: HTTP %d %s", code, body)
	}
	if code, _ := b.portGet(t, "8000", "/", map[string]string{"E2b-Traffic-Access-Token": "anything"}); code != http.StatusOK {
		t.Fatalf("a public sandbox with a token header: HTTP %d", code)
	}
}

func TestPortsNeedTheTrafficToken(t *testing.T) {
	s := envdServer(t, Options{})
	b := envdCreate(t, s, map[string]any{"network": map[string]any{"allowPublicTraffic": false}})
	sb, _ := s.Sandbox(b.id)
	if sb.TrafficToken == "" {
		t.Fatal("no traffic token for a sandbox without public traffic")
	}
	withToken := map[string]string{"E2b-Traffic-Access-Token": sb.TrafficToken}
	b.serveDirectory(t, withToken)
	for name, hdr := range map[string]map[string]string{
		"no token":    nil,
		"wrong token": {"E2b-Traffic-Access-Token": sb.TrafficToken + "x"},
		"empty token": {"E2b-Traffic-Access-Token": ""},
	} {
		if code, body := b.portGet(t, "8000", "/", hdr); code != http.StatusForbidden || strings.Contains(body, "hello.txt") {
			t.Errorf("%s: HTTP %d %s", name, code, body)
		}
	}
	// envd's own port keeps its own credentials: the traffic token is not asked for.
	if resp, _ := b.do(t, http.MethodGet, "/health", nil, nil); resp.StatusCode != http.StatusNoContent {
		t.Errorf("envd's health: HTTP %d", resp.StatusCode)
	}
}
