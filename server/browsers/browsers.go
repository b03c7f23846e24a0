// Package browsers is which requests of web browsers the server serves: a page of another site gets nothing from
// it, a page of a domain rebound to 127.0.0.1 gets nothing from a loopback listener, and the browser-based MCP
// clients of the allowed origins get CORS answers.
package browsers

import (
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/e2b-mcp/e2b-mcp/internal/display"
	"github.com/e2b-mcp/e2b-mcp/internal/loopback"
)

// Browsers.
//
// Any web page the user opens can send requests to a server on the user's machine, and some of them it can send
// without asking the server first (a "simple" request: GET, or a POST of text/plain). The MCP specification has
// servers validate Origin for that reason. A request is refused (403) when it carries an Origin that is not
// allowed, or, carrying none, says through Sec-Fetch-Site that a page of another site made it (an <img> or a
// <script> that asks for /sse; "same-site" is a page on another port of localhost). Allowed are the server's own
// origin (its public URL's, or a page it serves: the Origin names the host and port the request was sent to, a
// trusted one; see DNS rebinding below) and those given with --allow-origin, for browser-based MCP clients,
// which alone get CORS answers. There is no wildcard. Clients that are not browsers send no Origin and are not
// affected.

// NoCORSOrigin is given to mcp-go's SSE transport as its only CORS origin. Without a CORS configuration it
// answers every stream with "Access-Control-Allow-Origin: *"; configured with an origin no browser sends, it adds
// nothing. CORS is answered by GuardOrigin.
const NoCORSOrigin = "urn:e2b-mcp:cors-is-answered-by-the-origin-guard"

// maxEcho bounds what an error message repeats of a value the caller sent.
const maxEcho = 64

// corsAllowHeaders are the request headers a browser-based client of an allowed origin may send, besides the
// server's own (NewRules).
var corsAllowHeaders = []string{"Authorization", "Content-Type", "Accept", "Last-Event-ID", "Mcp-Session-Id",
	"Mcp-Protocol-Version"}

// ParseOrigin checks one --allow-origin value and returns it as browsers write it: scheme://host[:port] in lower
// case, with no path and no default port.
func ParseOrigin(s string) (string, error) {
	if s == "*" || strings.Contains(s, "*") {
		return "", errors.New("wildcards are not allowed: name each origin (scheme://host[:port])")
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return "", fmt.Errorf("origin %q: %w", s, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("origin %q: want http:// or https://", s)
	case u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "":
		return "", fmt.Errorf("origin %q: want scheme://host[:port] and nothing more", s)
	}
	host := strings.ToLower(u.Host)
	if port := u.Port(); (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		host = strings.ToLower(u.Hostname())
		if strings.Contains(host, ":") {
			host = "[" + host + "]"
		}
	}
	return u.Scheme + "://" + host, nil
}

// DNS rebinding.
//
// A page of any domain can have its name resolve to 127.0.0.1 once it is loaded; its scripts then reach a
// loopback server as the page's own origin (a GET of its own origin carries no Origin header at all) and read the
// answers. Such a request still names the page's domain in Host. So a request that arrives over loopback (on a
// listener of a loopback address, or one of 0.0.0.0 reached at 127.0.0.1) is served, on every path, only when
// its Host is localhost, a loopback address, or the host of the server's public URL (a proxy on the same machine
// may pass that on). A request from the network is not checked: a listener others reach authenticates its
// callers with bearer tokens, which pages of other domains do not hold, and it is reached by names (addresses,
// proxies' names) the server cannot know. Such a request's Origin is the server's own only when it is that of
// the public URL.

// Rules say which requests of browsers the server serves: the Host a request over loopback may name, and the
// origins that are its own or allowed.
type Rules struct {
	// public are the origins of the URLs clients reach the server at (its public URL, the OAuth resource) as
	// ParseOrigin writes them, which a proxy in front may not pass on as the Host.
	public []string
	// allowed are the origins of --allow-origin, which alone get CORS answers.
	allowed []string
	// corsHeaders are the request headers an allowed origin's page may send, as Access-Control-Allow-Headers.
	corsHeaders string
}

// NewRules are the rules of a server reached at publicURLs ("" for none), whose allowed origins (as ParseOrigin
// writes them) are allowed, and whose browser-based clients may send its own headers too.
func NewRules(publicURLs, allowed, headers []string) Rules {
	b := Rules{allowed: allowed, corsHeaders: strings.Join(append(slices.Clone(corsAllowHeaders), headers...), ", ")}
	for _, raw := range publicURLs {
		if u, err := url.Parse(raw); err == nil && u.Host != "" {
			if origin, err := ParseOrigin(u.Scheme + "://" + u.Host); err == nil {
				b.public = append(b.public, origin)
			}
		}
	}
	return b
}

// overLoopback reports whether r arrived on a connection to a loopback address.
func overLoopback(r *http.Request) bool {
	addr, ok := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr)
	return ok && addr.IP.IsLoopback()
}

// hostName is the name of a Host header value, without its port.
func hostName(host string) string {
	if name, _, err := net.SplitHostPort(host); err == nil {
		return name
	}
	return strings.Trim(host, "[]")
}

// publicHost reports whether host (a Host header value) names the host of a public URL. The port is not
// compared: a proxy passes on the name clients used, with or without the port it listens on.
func (b Rules) publicHost(host string) bool {
	name := hostName(host)
	for _, origin := range b.public {
		if u, err := url.Parse(origin); err == nil && strings.EqualFold(u.Hostname(), name) {
			return true
		}
	}
	return false
}

// trustedHost reports whether r's Host names the server as it is meant to be reached: on a loopback
// connection a loopback name, and everywhere the public URL's host.
func (b Rules) trustedHost(r *http.Request) bool {
	return (overLoopback(r) && loopback.Host(hostName(r.Host))) || b.publicHost(r.Host)
}

// GuardHost refuses (403) a request over loopback whose Host is not trusted, whatever its path: it wraps the
// whole mux, so a path added later is covered without a word of its own. A request with no Host at all (HTTP/1.0,
// as HAProxy's `option httpchk` sends) passes: every browser sends a Host, so it cannot be a rebound page's.
func (b Rules) GuardHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if overLoopback(r) && r.Host != "" && !b.trustedHost(r) {
			http.Error(w, fmt.Sprintf("forbidden: Host '%s' is not this server's (a loopback name or the public URL's host)",
				display.Prefix(r.Host, maxEcho)), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// ownOrigin reports whether origin is the server's own for r: that of the public URL, or a page served from the
// host and port r was sent to, when that is a trusted host. (A DNS-rebound name is never one, although the
// rebound page's Origin and Host agree.)
func (b Rules) ownOrigin(origin string, r *http.Request) bool {
	if slices.Contains(b.public, strings.ToLower(origin)) {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Path != "" || u.User != nil {
		return false
	}
	return strings.EqualFold(u.Host, r.Host) && b.trustedHost(r)
}

// GuardOrigin refuses requests from pages of origins that are not allowed, answers CORS preflights of allowed
// ones (before authentication: a preflight carries no credentials) and adds CORS headers to their answers.
func (b Rules) GuardOrigin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" {
			if site := r.Header.Get("Sec-Fetch-Site"); site == "cross-site" || site == "same-site" {
				http.Error(w, "forbidden: a request another site's page made", http.StatusForbidden)
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		if b.ownOrigin(origin, r) {
			next.ServeHTTP(w, r)
			return
		}
		if !slices.Contains(b.allowed, strings.ToLower(origin)) {
			http.Error(w, fmt.Sprintf("forbidden: origin '%s' is not allowed (see `e2b-mcp serve --allow-origin`)",
				display.Prefix(origin, maxEcho)), http.StatusForbidden)
			return
		}
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", origin)
		h.Add("Vary", "Origin")
		h.Set("Access-Control-Expose-Headers", "Mcp-Session-Id")
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Set("Access-Control-Allow-Methods", "GET, POST, DELETE")
			h.Set("Access-Control-Allow-Headers", b.corsHeaders)
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// RequireJSON refuses a POST whose body is not declared application/json: a browser sends text/plain and form
// bodies to any origin without a preflight, JSON only after one.
func RequireJSON(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
				http.Error(w, "unsupported media type: send Content-Type: application/json", http.StatusUnsupportedMediaType)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
