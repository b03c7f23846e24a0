package tests

import (
	"strings"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// A web server the assistant starts in a sandbox opens in the user's browser at the link e2b_get_url gives: E2B's
// address of the port (here the emulator's), or, with --private-previews, the server's preview proxy.
func TestPreviewInChromium(t *testing.T) {
	t.Parallel()
	for _, mode := range []struct {
		name, access string
		flags        []string
	}{{"public", "public", nil}, {"private", "private", []string{"--private-previews"}}} {
		t.Run(mode.name, func(t *testing.T) {
			x := newH(t)
			requireChromedriver(t)
			owner := x.owner("preview")
			x.login(owner)
			s := x.startStdio(clientOpts{}, x.serveArgs(owner, "preview", mode.flags...)...)
			id := create(t, s.Client, nil)
			ok(t, s.Client, "e2b_exec", map[string]any{"sandbox_id": id, "background": true, "timeout_ms": 100,
				"command": "echo hi > hello.txt; python3 -m http.server 8000"})
			var res map[string]any
			waitfor.Until(t, 30*time.Second, "the server in the sandbox to listen", func() bool {
				res = ok(t, s.Client, "e2b_get_url", map[string]any{"sandbox_id": id, "port": 8000})
				return res["listening"] == true
			})
			link := str(res, "url")
			if res["access"] != mode.access || !strings.HasPrefix(link, "http://8000-"+id+".localhost:") {
				t.Fatalf("e2b_get_url: %v", res)
			}
			browser := x.startChromium()
			browser.open(link)
			if page := browser.waitFor("Directory listing"); !strings.Contains(page, "hello.txt") {
				t.Fatalf("the preview:\n%s", page)
			}
		})
	}
}
