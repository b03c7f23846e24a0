package tests

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// A sync link is text a model hands on, and a prompt-injected one may point it at a host of its own, to be sent
// the member's bearer token and files, or to answer with a patch of its own. The member pins their team server in
// E2B_MCP_SERVER and `e2b-mcp sync` refuses a link to any other place before it sends anything: another host,
// port or scheme, a look-alike host, a user name before the host, another path on the same host, and no pin at
// all. The attacker's server is a real one on this machine, and the proxy of every https request (as a name a
// DNS would send there), so that anything the command sent would reach it.
func TestSyncLinkToAnotherServerIsRefused(t *testing.T) {
	t.Parallel()
	x := newH(t)
	var mu sync.Mutex
	var reached []string
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		reached = append(reached, r.Method+" "+r.Host+r.URL.Path+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		http.Error(w, "taken", http.StatusBadGateway)
	}))
	t.Cleanup(evil.Close)
	evilHost := strings.TrimPrefix(evil.URL, "http://")
	project := x.path("project")
	writeTree(t, project, map[string]string{"main.go": "package main\n"})

	for _, tc := range []struct{ name, pin, link, want string }{
		{"another host", "https://team.example", "https://evil.example/sync#T", "not at your team server"},
		{"another port", "https://team.example", "https://team.example:8443/sync#T", "not at your team server"},
		{"another scheme", "https://" + evilHost, "http://" + evilHost + "/sync#T", "not at your team server"},
		{"a look-alike host", "https://team.example", "https://team.example.evil.com/sync#T", "not at your team server"},
		{"a user name before the host", "https://team.example", "https://team.example@evil.com/sync#T",
			"names a user"},
		{"another path", "http://" + evilHost + "/team", "http://" + evilHost + "/other/sync#T",
			"not at your team server"},
		{"no pin", "", "http://" + evilHost + "/sync#T", "set E2B_MCP_SERVER"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, the.bin, "sync", "in", "--link", tc.link, project)
			cmd.Env = append(x.env(), "E2B_MCP_TOKEN=secret-member-token", "E2B_MCP_SERVER="+tc.pin,
				"HTTPS_PROXY="+evil.URL, "https_proxy="+evil.URL, "NO_PROXY=", "no_proxy=")
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), tc.want) || strings.Contains(string(out), "secret-member") {
				t.Errorf("sync in with E2B_MCP_SERVER=%q and %s: %v, %q; want a refusal saying %q", tc.pin, tc.link, err,
					out, tc.want)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(reached) > 0 {
				t.Errorf("the link's server was sent: %q", reached)
				reached = nil
			}
		})
	}
}
