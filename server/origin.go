package server

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/e2b-mcp/e2b-mcp/internal/display"
)

// Browsers.
//
// Any web page the user opens can send requests to a server on the user's machine, and some of them it can send
// without asking the server first (a "simple" request: GET, or a POST of text/plain). The MCP specification has
// servers validate Origin for that reason. A request is refused (403) when it carries an Origin that is not
// allowed, or, carrying none, says through Sec-Fetch-Site that a page of another site made it (an <img> or a
// <script> that asks for /sse). Allowed are the server's own origin (a page it serves: the Origin names the
// host the request was sent to) and those given with --allow-origin, for browser-based MCP clients, which alone
// get CORS answers. There is no wildcard. Clients that are not browsers send no Origin and are not affected.

// noCORSOrigin is given to mcp-go's SSE transport as its only CORS origin. Without a CORS configuration it
// answers every stream with "Access-Control-Allow-Origin: *"; configured with an origin no browser sends, it adds
// nothing. CORS is answered by guardOrigin.
const noCORSOrigin = "urn:e2b-mcp:cors-is-answered-by-the-origin-guard"

// maxEcho bounds what an error message repeats of a value the caller sent.
const maxEcho = 64

// corsAllowHeaders are the request headers a browser-based client of an allowed origin may send.
var corsAllowHeaders = strings.Join([]string{"Authorization", "Content-Type", "Accept", "Last-Event-ID",
	"Mcp-Session-Id", "Mcp-Protocol-Version", SessionHeader}, ", ")

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

// ownOrigin reports whether origin is the server's own for r: a page served from the host r was sent to.
// (On a loopback listener mcp-go refuses a Host that is not a loopback name, so a page of a domain rebound to
// 127.0.0.1 is not taken for the server's own.)
func ownOrigin(origin string, r *http.Request) bool {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Path != "" || u.User != nil {
		return false
	}
	return strings.EqualFold(u.Host, r.Host)
}

// publicOrigin reports whether origin is that of the URL clients reach the server at (--public-url), which a
// proxy in front may not pass on as the Host.
func (s *Server) publicOrigin(origin string) bool {
	if s.cfg.OAuth == nil {
		return false
	}
	u, err := url.Parse(s.cfg.OAuth.Resource)
	return err == nil && strings.EqualFold(origin, u.Scheme+"://"+u.Host)
}

// guardOrigin refuses requests from pages of origins that are not allowed, answers CORS preflights of allowed
// ones (before authentication: a preflight carries no credentials) and adds CORS headers to their answers.
func (s *Server) guardOrigin(next http.Handler) http.Handler {
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
		if ownOrigin(origin, r) || s.publicOrigin(origin) {
			next.ServeHTTP(w, r)
			return
		}
		if !slices.Contains(s.cfg.AllowOrigins, strings.ToLower(origin)) {
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
			h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
			h.Set("Access-Control-Max-Age", "600")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// requireJSON refuses a POST whose body is not declared application/json: a browser sends text/plain and form
// bodies to any origin without a preflight, JSON only after one.
func requireJSON(next http.Handler) http.Handler {
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
