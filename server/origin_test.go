package server

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
)

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// openStream sends a GET and returns the answer's status and headers without waiting for a stream to end.
func openStream(t *testing.T, url string, hdr map[string]string) (int, http.Header) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header
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

func TestParseOrigin(t *testing.T) {
	for in, want := range map[string]string{
		"http://localhost:3000":    "http://localhost:3000",
		"HTTPS://App.Example:443/": "https://app.example",
		"http://[::1]:80":          "http://[::1]",
		"https://mcp.example:8443": "https://mcp.example:8443",
	} {
		if got, err := ParseOrigin(in); err != nil || got != want {
			t.Errorf("ParseOrigin(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"*", "https://*.example", "null", "app.example", "ftp://x", "https://x/path", "https://u@x", "https://x?q", ""} {
		if got, err := ParseOrigin(bad); err == nil {
			t.Errorf("ParseOrigin(%q) = %q, want an error", bad, got)
		}
	}
}
