package cli

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/e2b-mcp/e2b-mcp/server/synclink"
)

// `e2b-mcp sync` says what is wrong with its command line, or with the link, before it reads or sends anything;
// the server's refusal is printed as the server words it, and the token is never.
func TestSyncCommandLine(t *testing.T) {
	var got http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Clone()
		switch r.URL.Path {
		case "/team/sync/begin":
			if r.Header.Get(synclink.TicketHeader) == "used" {
				http.Error(w, "this sync link was used already: a link works once; ask for a new one", http.StatusGone)
				return
			}
			w.Header().Set(synclink.NextHeader, "next")
			_, _ = w.Write([]byte(`{"link":{"d":"out","s":"sb1","r":"/home/user/p"},"manifest":null}`))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	e := newEnv(t)
	for _, tc := range []struct {
		args        []string
		token, want string
		code        int
	}{
		{[]string{"sync", "in", dir}, "tok", "--link is required", exitUsage},
		{[]string{"sync", "sideways", "--link", "x", dir}, "tok", `sync "sideways": want in or out`, exitUsage},
		{[]string{"sync", "in", "--apply", "--link", "x", dir}, "tok", "--apply is for sync out", exitUsage},
		{[]string{"sync", "in", "--link", srv.URL + "/team/sync#t"}, "tok", "missing argument", exitUsage},
		{[]string{"sync", "in", "--link", srv.URL + "/team/sync#t", dir}, "", "set E2B_MCP_TOKEN", exitFailure},
		{[]string{"sync", "in", "--link", srv.URL + "/other/sync#t", dir}, "secret-token",
			"not at your team server (" + srv.URL + "/team/sync): nothing was sent (E2B_MCP_SERVER names", exitFailure},
		{[]string{"sync", "in", "--link", srv.URL + "/team/sync", dir}, "tok", "not a sync link", exitFailure},
		{[]string{"sync", "in", "--link", "file:///etc/passwd#t", dir}, "tok", "not a sync link", exitFailure},
		{[]string{"sync", "in", "--link", srv.URL + "/team/sync#t", dir + "/missing"}, "tok", "no such file", exitFailure},
		{[]string{"sync", "in", "--link", srv.URL + "/team/sync#used", dir}, "secret-token", "used already", exitFailure},
		{[]string{"sync", "in", "--link", srv.URL + "/team/sync#t", dir}, "secret-token", "this link is for sync out",
			exitFailure},
	} {
		e.env["E2B_MCP_TOKEN"] = tc.token
		e.env["E2B_MCP_SERVER"] = srv.URL + "/team/mcp" // as the member's MCP client has it
		r := e.run(t, "", tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stdout+r.stderr, "secret-token") {
			t.Errorf("%v: exit %d, stderr %q; want %d saying %q", tc.args, r.code, r.stderr, tc.code, tc.want)
		}
	}
	if got.Get("Authorization") != "Bearer secret-token" || got.Get(synclink.TicketHeader) != "t" ||
		got.Get("Origin") != "" || got.Get("Cookie") != "" {
		t.Errorf("the last step's headers: %v", got)
	}
}
