package tests

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// requireChromium skips (fails in CI) when no Chromium is installed.
func requireChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	requireEnv(t, false, "Chromium is not installed (apt install chromium)")
	return ""
}

// pageSite serves tests/browser/origin.html on a loopback port under any host name, and collects what the page
// reports.
type pageSite struct {
	port    string
	reports chan map[string]any
}

func startPageSite(t *testing.T) *pageSite {
	t.Helper()
	page, err := os.ReadFile(filepath.Join("browser", "origin.html"))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &pageSite{port: ln.Addr().(*net.TCPAddr).AddrPort().String()[len("127.0.0.1:"):], reports: make(chan map[string]any, 1)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write(page)
	})
	mux.HandleFunc("POST /report", func(w http.ResponseWriter, r *http.Request) {
		var rep map[string]any
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &rep); err != nil {
			rep = map[string]any{"page_error": "unreadable report: " + string(body)}
		}
		select {
		case s.reports <- rep:
		default:
		}
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

// pageHosts are the names the page is served under; Chromium resolves them to 127.0.0.1. Each is an origin (and
// a site) of its own, other than the server's.
const (
	hostileHost = "evil.example"
	allowedHost = "app.example"
)

// visit opens the page in a fresh headless Chromium and returns what it reported.
func (x *h) visit(chromium string, site *pageSite, host, mode, server, token string) map[string]any {
	x.t.Helper()
	ctx, cancel := context.WithTimeout(x.t.Context(), 90*time.Second)
	defer cancel()
	q := "mode=" + mode + "&server=" + server + "&token=" + token
	url := "http://" + host + ":" + site.port + "/?" + q
	cmd := exec.Command(chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-proxy-server",
		"--password-store=basic",
		"--user-data-dir="+x.path("chromium-"+mode+"-"+host+"-"+randomHex(4)),
		"--host-resolver-rules=MAP "+hostileHost+" 127.0.0.1, MAP "+allowedHost+" 127.0.0.1",
		url)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its helpers go with it
	// Off the tests' D-Bus session: the browser has no business with the keyring there.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "DBUS_SESSION_BUS_ADDRESS=") })
	out := x.capture("chromium " + mode + " output")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		x.t.Fatalf("starting Chromium: %v", err)
	}
	defer func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	}()
	select {
	case rep := <-site.reports:
		x.t.Logf("page %s (%s) reported: %v", host, mode, rep)
		if e, ok := rep["page_error"]; ok {
			x.t.Fatalf("the page failed: %v", e)
		}
		return rep
	case <-ctx.Done():
		x.t.Fatalf("the page at %s reported nothing within 90 s; Chromium said:\n%s", url, out)
		return nil
	}
}

// ownerSandboxes counts the emulator's sandboxes made for owner.
func ownerSandboxes(owner string) int {
	n := 0
	for _, sb := range the.emu.Sandboxes() {
		if sb.Metadata["e2b-mcp.owner"] == owner {
			n++
		}
	}
	return n
}

// A web page of another origin, in a real browser, cannot drive the server on either transport, with or without
// tokens: its CORS requests are refused, its simple POSTs and its EventSource get nothing, and no sandbox is
// made. A browser-based client of an origin named with --allow-origin works, and so does the TypeScript SDK client
// on the same server.
func TestBrowserCannotDriveTheServer(t *testing.T) {
	t.Parallel()
	chromium := requireChromium(t)
	node := requireNode(t)
	x := newH(t)
	site := startPageSite(t)
	blocked := func(rep map[string]any, owner, what string) {
		t.Helper()
		for _, step := range []string{"mcp_cors_initialize", "mcp_cors_create", "sse_cors_stream", "sse_eventsource"} {
			r, _ := rep[step].(map[string]any)
			if r["outcome"] != "blocked" {
				t.Errorf("%s: %s got through: %v", what, step, r)
			}
		}
		if n := ownerSandboxes(owner); n != 0 {
			t.Errorf("%s: the page made %d sandboxes", what, n)
		}
	}

	t.Run("loopback without tokens", func(t *testing.T) {
		owner := x.owner("browser")
		x.login(owner)
		allowed := "http://" + allowedHost + ":" + site.port
		srv := x.startHTTP(x.serveArgs(owner, "browser", "--transport", "http", "--policy", x.allowAll(), "--allow-origin", allowed)...)
		blocked(x.visit(chromium, site, hostileHost, "attack", srv.base, ""), owner, "a hostile page")

		rep := x.visit(chromium, site, allowedHost, "client", srv.base, "")
		st, _ := rep["streamable"].(map[string]any)
		list, _ := st["list"].(map[string]any)
		if st["outcome"] != "answered" || st["server"] != "e2b-mcp" || list == nil {
			t.Errorf("a client of an allowed origin over streamable HTTP: %v", st)
		}
		if sse, _ := rep["sse"].(map[string]any); sse["outcome"] != "answered" || sse["server"] != "e2b-mcp" {
			t.Errorf("a client of an allowed origin over SSE: %v", sse)
		}
	})

	t.Run("with tokens", func(t *testing.T) {
		owner := x.owner("browser-tokens")
		x.login(owner)
		tokens := x.path("tokens.json")
		tok := x.addToken(owner, tokens)
		srv := x.startHTTP("serve", "--transport", "sse", "--tokens-file", tokens,
			"--api-url", the.emu.URL(), "--sandbox-url", the.emu.URL(),
			"--state-dir", x.path("state-tokens"), "--policy", x.allowAll())
		// The page even holds a valid token.
		blocked(x.visit(chromium, site, hostileHost, "attack", srv.base, tok), owner, "a hostile page with a token")
		x.runFlow(node, "http", srv.base, tok, "browser-sdk")
	})
}
