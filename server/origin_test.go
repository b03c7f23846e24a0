package server

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/server/oauth"
	"github.com/e2b-mcp/e2b-mcp/server/oauth/oauthtest"
	"github.com/e2b-mcp/e2b-mcp/server/pages"
)

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// openStream sends a GET and returns the answer's status and headers without waiting for a stream to end.
func openStream(t *testing.T, url string, hdr map[string]string) (int, http.Header) {
	t.Helper()
	code, h, _ := send(t, http.MethodGet, url, merge(map[string]string{"Accept": "text/event-stream"}, hdr))
	return code, h
}

// send sends a request without a body (hdr["Host"] is sent as the Host) and returns the answer's status, headers
// and, for an error, body. Other bodies are left unread, so that a stream's answer does not hold the test.
func send(t *testing.T, method, url string, hdr map[string]string) (int, http.Header, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	if h := hdr["Host"]; h != "" {
		req.Host = h
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body []byte
	if resp.StatusCode >= http.StatusBadRequest {
		body, _ = io.ReadAll(resp.Body)
	}
	return resp.StatusCode, resp.Header, string(body)
}

// A page of another origin gets nothing from any endpoint, with or without tokens: the requests a browser makes
// for fetch, EventSource and a no-cors <img>, replayed as the browser sends them (Origin, Sec-Fetch-Site, and
// text/plain bodies that need no preflight). Pages of the server's own origin and clients that are not browsers
// are served, and no answer carries a wildcard Access-Control-Allow-Origin.
func TestHTTPRefusesOtherOrigins(t *testing.T) {
	tokens, toks := tokensFor(t, "alice")
	for _, withTokens := range []bool{false, true} {
		name := map[bool]string{false: "loopback without tokens", true: "with tokens"}[withTokens]
		t.Run(name, func(t *testing.T) {
			opts := fixtureOpts{transport: TransportHTTP}
			auth := ""
			if withTokens {
				opts.tokensFile, auth = tokens, "Bearer "+toks["alice"]
			}
			f := newFixture(t, opts)
			base := serveHTTP(t, f)
			evil := map[string]string{"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"}
			for _, tc := range []struct {
				name, method, path, contentType string
			}{
				{"fetch initialize", http.MethodPost, PathMCP, "application/json"},
				{"simple POST initialize", http.MethodPost, PathMCP, "text/plain"},
				{"preflight", http.MethodOptions, PathMCP, ""},
				{"simple POST to /message", http.MethodPost, PathMessage + "?sessionId=x", "text/plain;charset=UTF-8"},
				{"EventSource", http.MethodGet, PathSSE, ""},
			} {
				hdr := map[string]string{"Content-Type": tc.contentType, "Access-Control-Request-Method": "POST"}
				for k, v := range evil {
					hdr[k] = v
				}
				var code int
				var h http.Header
				if tc.method == http.MethodGet {
					code, h = openStream(t, base+tc.path, hdr)
				} else {
					code, h, _ = do(t, tc.method, base+tc.path, auth, initializeBody, hdr)
				}
				if code != http.StatusForbidden || h.Get("Access-Control-Allow-Origin") != "" {
					t.Errorf("%s from another origin: %d, Access-Control-Allow-Origin %q; want 403 and none",
						tc.name, code, h.Get("Access-Control-Allow-Origin"))
				}
			}
			// An <img src=/sse> sends no Origin, but Sec-Fetch-Site says another site's page made it.
			if code, _ := openStream(t, base+PathSSE, map[string]string{"Sec-Fetch-Site": "cross-site", "Authorization": auth}); code != http.StatusForbidden {
				t.Errorf("a no-cors GET of /sse from another site: %d, want 403", code)
			}
			// The server's own origin, and a client that sends no Origin at all.
			own := strings.TrimPrefix(base, "http://")
			for _, hdr := range []map[string]string{{"Origin": "http://" + own, "Sec-Fetch-Site": "same-origin"}, {}} {
				if code, h, body := do(t, http.MethodPost, base+PathMCP, auth, initializeBody, hdr); code != http.StatusOK || h.Get("Access-Control-Allow-Origin") != "" {
					t.Errorf("initialize with %v: %d %s (Access-Control-Allow-Origin %q)", hdr, code, body, h.Get("Access-Control-Allow-Origin"))
				}
				if code, h := openStream(t, base+PathSSE, merge(hdr, map[string]string{"Authorization": auth})); code != http.StatusOK || h.Get("Access-Control-Allow-Origin") != "" {
					t.Errorf("/sse with %v: %d, Access-Control-Allow-Origin %q", hdr, code, h.Get("Access-Control-Allow-Origin"))
				}
			}
			// A DNS-rebound name is not the server's own origin, although Origin and Host agree.
			rebound := "evil.example:" + own[strings.LastIndex(own, ":")+1:]
			if code, _, _ := do(t, http.MethodPost, base+PathMCP, auth, initializeBody, map[string]string{"Origin": "http://" + rebound, "Host": rebound}); code != http.StatusForbidden {
				t.Errorf("a rebound name: %d, want 403", code)
			}
		})
	}
}

func merge(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		if v != "" {
			out[k] = v
		}
	}
	return out
}

// /message takes JSON only: a text/plain body, which a page may send anywhere without a preflight, is refused
// even from a caller with the right session.
func TestSSEMessageWantsJSON(t *testing.T) {
	f := newFixture(t, fixtureOpts{transport: TransportSSE})
	base := serveHTTP(t, f)
	c := sseClient(t, base, "", "")
	defer c.Close()
	// The client's own session ID is in mcp-go's client; a made-up one is refused by type before the lookup.
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", ""} {
		code, _, _ := do(t, http.MethodPost, base+PathMessage+"?sessionId=x", "", toolsList, map[string]string{"Content-Type": ct})
		if code != http.StatusUnsupportedMediaType {
			t.Errorf("POST /message as %q: %d, want 415", ct, code)
		}
	}
	if _, err := c.ListTools(t.Context(), mcp.ListToolsRequest{}); err != nil {
		t.Fatalf("the SSE client after the refusals: %v", err)
	}
}

// An origin given with AllowOrigins is served with CORS answers naming it (a preflight first, before any token),
// never "*"; others still are not.
func TestHTTPAllowedOrigin(t *testing.T) {
	tokens, toks := tokensFor(t, "alice")
	f := newFixture(t, fixtureOpts{transport: TransportHTTP, tokensFile: tokens, mutate: func(c *Config, _ *e2btest.Server) {
		c.AllowOrigins = []string{"HTTPS://App.Example:443"}
	}})
	base := serveHTTP(t, f)
	app := "https://app.example"
	code, h, _ := do(t, http.MethodOptions, base+PathMCP, "", "", map[string]string{"Origin": app,
		"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization, content-type, mcp-protocol-version"})
	if code != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != app ||
		!strings.Contains(h.Get("Access-Control-Allow-Headers"), "Authorization") ||
		!strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") {
		t.Errorf("preflight of an allowed origin: %d %v", code, h)
	}
	code, h, body := do(t, http.MethodPost, base+PathMCP, "Bearer "+toks["alice"], initializeBody, map[string]string{"Origin": app})
	if code != http.StatusOK || h.Get("Access-Control-Allow-Origin") != app || !strings.Contains(h.Get("Access-Control-Expose-Headers"), "Mcp-Session-Id") {
		t.Errorf("initialize from an allowed origin: %d %v %s", code, h, body)
	}
	code, h = openStream(t, base+PathSSE, map[string]string{"Origin": app, "Authorization": "Bearer " + toks["alice"]})
	if code != http.StatusOK || h.Get("Access-Control-Allow-Origin") != app {
		t.Errorf("/sse from an allowed origin: %d, Access-Control-Allow-Origin %q", code, h.Get("Access-Control-Allow-Origin"))
	}
	if code, _, _ := do(t, http.MethodPost, base+PathMCP, "Bearer "+toks["alice"], initializeBody, map[string]string{"Origin": "https://app.example.evil"}); code != http.StatusForbidden {
		t.Errorf("an origin that only starts like an allowed one: %d, want 403", code)
	}
}

// serveTransport serves the server's HTTP handler on a loopback port until the test ends, and returns its base URL
// and the patterns of its mux.
func serveTransport(t *testing.T, srv *Server) (string, []string) {
	t.Helper()
	tr := srv.newHTTPTransport()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: tr.handler, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() {
		_ = tr.mcp.Shutdown(t.Context())
		_ = hs.Close()
	})
	return "http://" + ln.Addr().String(), tr.patterns
}

// pathOf is a path that a mux pattern matches: its wildcards, and what follows a trailing slash, filled in.
func pathOf(pattern string) string {
	if _, path, ok := strings.Cut(pattern, " "); ok { // "GET /path"
		pattern = path
	}
	pattern = regexp.MustCompile(`\{[^}]*\}`).ReplaceAllString(pattern, "x")
	if strings.HasSuffix(pattern, "/") {
		pattern += "x"
	}
	return pattern
}

// DNS rebinding: a page of rebind.evil.example, whose name the attacker has made resolve to 127.0.0.1, sends
// requests that name it in Host, with its own Origin or (a GET of its own origin) none. Every path the server
// registers, and one it does not, answers them 403, on a loopback server without tokens (where being on
// loopback is the only authentication) and on one with OAuth and a public URL; the same requests naming a
// loopback host (or the public URL's host, as a proxy on the machine passes it on) are not refused.
func TestDNSRebindingRefusedOnEveryPath(t *testing.T) {
	iss := oauthtest.NewIssuer(t)
	for _, tc := range []struct {
		name   string
		mutate func(*Config)
		public string // the public URL's host, "" for none
		want   []string
	}{
		{"loopback without tokens", func(c *Config) { c.Transport = TransportHTTP }, "",
			[]string{PathHealth, PathMetrics, pages.PathConnect, PathMCP, PathSSE, PathMessage}},
		{"OAuth and a public URL", func(c *Config) {
			c.Transport, c.PublicURL = TransportHTTP, "https://mcp.example.test"
			c.OAuth = &oauth.Config{Issuer: iss.URL, Resource: oauthtest.Resource, OwnerClaim: "sub", ClientID: "e2b-mcp"}
		}, "mcp.example.test", []string{PathHealth, PathMetrics, pages.PathConnect, PathMCP, PathSSE, PathMessage,
			"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base, patterns := serveTransport(t, newConnectFixture(t, tc.mutate).srv)
			for _, p := range tc.want {
				if !slices.Contains(patterns, p) {
					t.Fatalf("the mux has no %s: %v", p, patterns)
				}
			}
			port := base[strings.LastIndex(base, ":")+1:]
			rebound := "rebind.evil.example:" + port
			refused := []map[string]string{
				{"Host": rebound, "Origin": "http://" + rebound, "Sec-Fetch-Site": "same-origin"},
				{"Host": rebound, "Sec-Fetch-Site": "same-origin"},
				{"Host": "127.0.0.1.rebind.evil.example:" + port},
			}
			served := []map[string]string{{}, {"Host": "localhost:" + port}, {"Host": "[::1]:" + port},
				{"Origin": base, "Sec-Fetch-Site": "same-origin"}}
			if tc.public != "" {
				served = append(served, map[string]string{"Host": tc.public}, map[string]string{"Host": tc.public,
					"Origin": "https://" + tc.public, "Sec-Fetch-Site": "same-origin"})
			}
			for _, path := range append(mapPaths(patterns), "/no-such-path") {
				for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodOptions} {
					for _, hdr := range refused {
						if code, _, body := send(t, method, base+path, hdr); code != http.StatusForbidden || !strings.Contains(body, hostRefused) {
							t.Errorf("%s %s with %v: %d %q, want 403 for the Host", method, path, hdr, code, body)
						}
					}
					for _, hdr := range served {
						// The path's own answer, whatever it is (a page may refuse for reasons of its own).
						if code, _, body := send(t, method, base+path, hdr); strings.Contains(body, hostRefused) {
							t.Errorf("%s %s with %v: %d %q, want it let through", method, path, hdr, code, body)
						}
					}
				}
			}
		})
	}
}

// hostRefused is what guardHost's refusal says.
const hostRefused = "is not this server's"

func mapPaths(patterns []string) []string {
	var paths []string
	for _, p := range patterns {
		paths = append(paths, pathOf(p))
	}
	return paths
}

// guardedRequests are a request of each endpoint that answers only callers, as a page's browser would send them.
var guardedRequests = []struct{ method, path string }{
	{http.MethodPost, PathMCP}, {http.MethodGet, PathSSE}, {http.MethodPost, PathMessage + "?sessionId=x"},
	{http.MethodGet, PathMetrics},
}

// A page on another port of localhost is of the same site, not the same origin: the GET of its <img> or
// <script> carries no Origin, only Sec-Fetch-Site: same-site, and is refused as a cross-site one is. The same
// request marked same-origin, or not marked (a client that is no browser), is served.
func TestHTTPRefusesSameSitePages(t *testing.T) {
	base := serveHTTP(t, newFixture(t, fixtureOpts{transport: TransportHTTP}))
	for _, r := range guardedRequests {
		for site, refused := range map[string]bool{"same-site": true, "cross-site": true, "same-origin": false, "none": false, "": false} {
			code, _, _ := send(t, r.method, base+r.path, map[string]string{"Sec-Fetch-Site": site})
			if (code == http.StatusForbidden) != refused {
				t.Errorf("%s %s with Sec-Fetch-Site %q and no Origin: %d, want refused %v", r.method, r.path, site, code, refused)
			}
		}
	}
}

// The server's own origin is its host and port: a page of another port of 127.0.0.1, or of localhost on the
// same port, is another origin, although a browser counts it as the same site.
func TestOwnOriginComparesPorts(t *testing.T) {
	base := serveHTTP(t, newFixture(t, fixtureOpts{transport: TransportHTTP}))
	port, err := strconv.Atoi(base[strings.LastIndex(base, ":")+1:])
	if err != nil {
		t.Fatal(err)
	}
	other := strconv.Itoa(port%65535 + 1)
	for _, r := range guardedRequests {
		for origin, refused := range map[string]bool{
			"http://127.0.0.1:" + other:              true,
			"http://127.0.0.1":                       true,
			"http://localhost:" + strconv.Itoa(port): true,
			base:                                     false,
		} {
			code, _, _ := send(t, r.method, base+r.path, map[string]string{"Origin": origin, "Sec-Fetch-Site": "same-site"})
			if (code == http.StatusForbidden) != refused {
				t.Errorf("%s %s from %s: %d, want refused %v", r.method, r.path, origin, code, refused)
			}
		}
	}
}

// A load balancer's health check (HAProxy's `option httpchk GET /healthz`) is HTTP/1.0 with no Host header. No
// browser sends a request without Host, so such a request is no DNS rebinding and the Host guard lets it through.
func TestHostlessHealthCheckServed(t *testing.T) {
	base, _ := serveTransport(t, newConnectFixture(t, func(c *Config) { c.Transport = TransportHTTP }).srv)
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET "+PathHealth+" HTTP/1.0\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s over HTTP/1.0 without Host: %d %q, want 200", PathHealth, res.StatusCode, body)
	}
}
