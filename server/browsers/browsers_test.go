package browsers

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

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

// From the network (a team server on 0.0.0.0, behind a proxy or not) Host is not checked: the server is reached
// by names it cannot know, and callers hold tokens. But an Origin that repeats the Host is the server's own only
// for the public URL's host; a name the caller chose (a rebound one too) makes no origin trusted. Over loopback
// the public URL's host is a trusted Host, as a proxy on the same machine passes it on.
func TestBrowserRulesOffLoopback(t *testing.T) {
	b := NewRules([]string{"https://MCP.example.test/", ""}, nil, nil)
	h := b.GuardHost(b.GuardOrigin(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })))
	network := &net.TCPAddr{IP: net.ParseIP("192.0.2.2"), Port: 8931}
	loopback := &net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 8931}
	for _, tc := range []struct {
		local        *net.TCPAddr
		host, origin string
		want         int
	}{
		{network, "team.internal:8931", "", http.StatusNoContent},
		{network, "team.internal:8931", "http://team.internal:8931", http.StatusForbidden},
		{network, "192.0.2.2:8931", "http://192.0.2.2:8931", http.StatusForbidden},
		{network, "127.0.0.1:8931", "http://127.0.0.1:8931", http.StatusForbidden},
		{network, "rebind.evil.example:8931", "http://rebind.evil.example:8931", http.StatusForbidden},
		{network, "mcp.example.test", "https://mcp.example.test", http.StatusNoContent},
		{network, "mcp.example.test:8931", "http://mcp.example.test:8931", http.StatusNoContent},
		{network, "backend:8931", "https://mcp.example.test", http.StatusNoContent}, // a proxy that sets its own Host
		{loopback, "mcp.example.test", "", http.StatusNoContent},
		{loopback, "mcp.example.test", "https://mcp.example.test", http.StatusNoContent},
		{loopback, "team.internal:8931", "", http.StatusForbidden},
	} {
		r := httptest.NewRequest(http.MethodPost, "http://"+tc.host+"/mcp", nil)
		r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, net.Addr(tc.local)))
		if tc.origin != "" {
			r.Header.Set("Origin", tc.origin)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.want {
			t.Errorf("over %s, Host %s, Origin %q: %d, want %d", tc.local, tc.host, tc.origin, w.Code, tc.want)
		}
	}
}

// Only an allowed origin's pages get CORS answers: its preflight is answered before anything else (it carries no
// credentials), with the server's own headers among those allowed; its requests carry its origin, never a
// wildcard. Another origin is refused, and so is a request without one that says another site's page made it.
func TestGuardOriginCORS(t *testing.T) {
	b := NewRules(nil, []string{"https://app.example"}, []string{"X-E2B-MCP-Session"})
	h := b.GuardOrigin(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	serve := func(method string, hdr map[string]string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(method, "http://127.0.0.1:8931/mcp", nil)
		for k, v := range hdr {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	w := serve(http.MethodOptions, map[string]string{"Origin": "https://app.example", "Access-Control-Request-Method": "POST"})
	if w.Code != http.StatusNoContent || w.Header().Get("Access-Control-Allow-Origin") != "https://app.example" ||
		!strings.Contains(w.Header().Get("Access-Control-Allow-Headers"), "X-E2B-MCP-Session") {
		t.Errorf("the allowed origin's preflight: %d %v", w.Code, w.Header())
	}
	if w := serve(http.MethodPost, map[string]string{"Origin": "https://app.example"}); w.Code != http.StatusTeapot ||
		w.Header().Get("Access-Control-Allow-Origin") != "https://app.example" {
		t.Errorf("the allowed origin's request: %d %v", w.Code, w.Header())
	}
	for name, hdr := range map[string]map[string]string{
		"another origin":                {"Origin": "https://evil.example"},
		"another origin's preflight":    {"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"},
		"a cross-site page, no Origin":  {"Sec-Fetch-Site": "cross-site"},
		"a same-site page, no Origin":   {"Sec-Fetch-Site": "same-site"},
		"the allowed origin's sub-site": {"Origin": "https://x.app.example"},
	} {
		if w := serve(http.MethodOptions, hdr); w.Code != http.StatusForbidden || w.Header().Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("%s: %d %v", name, w.Code, w.Header())
		}
	}
	if w := serve(http.MethodPost, nil); w.Code != http.StatusTeapot || w.Header().Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("a client that is no browser: %d %v", w.Code, w.Header())
	}
}
