package server

import (
	"errors"
	"fmt"
	"net"
	"net/http"

	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/e2b-mcp/e2b-mcp/internal/loopback"
	"github.com/e2b-mcp/e2b-mcp/server/browsers"
	"github.com/e2b-mcp/e2b-mcp/server/mcphttp"
	"github.com/e2b-mcp/e2b-mcp/server/synclink"
	"github.com/e2b-mcp/e2b-mcp/tools"
)

// HTTP paths. Streamable HTTP and SSE are both served on every HTTP listener, whichever of http or sse
// --transport names, so that any client finds the endpoint it speaks (server/mcphttp).
const (
	PathMCP     = mcphttp.PathMCP
	PathSSE     = mcphttp.PathSSE
	PathMessage = mcphttp.PathMessage
	PathHealth  = "/healthz"
	// SessionHeader names the session of an HTTP caller; without it the caller uses Config.Session.
	SessionHeader = "X-E2B-MCP-Session"
)

// httpTransport is the HTTP side of a Server: the handler, the patterns of its mux and the MCP transports it
// routes to.
type httpTransport struct {
	handler  http.Handler
	patterns []string
	mcp      *mcphttp.Transport
}

func (s *Server) newHTTPTransport() *httpTransport {
	// The Tasks extension's POSTs to /mcp are answered in front of mcp-go (server/tasks).
	tasksFront := func(next http.Handler) http.Handler { return s.tasks.HTTP(next, mcphttp.Respond) }
	t := &httpTransport{mcp: mcphttp.New(s.mcp, mcphttp.Options{Sessions: s.sessions, Caller: identityFrom,
		Now: s.cfg.Now, Log: s.log, Front: tasksFront})}
	rules := s.browserRules()
	mux := http.NewServeMux()
	handle := func(pattern string, h http.Handler) { // every path through here, so that tests find them all
		mux.Handle(pattern, h)
		t.patterns = append(t.patterns, pattern)
	}
	handle(PathHealth, s.newHealth())
	if o := s.cfg.OAuth; o != nil {
		meta := o.MetadataHandler()
		handle(mcpserver.WellKnownProtectedResourcePath, meta)
		handle(mcpserver.ProtectedResourceMetadataPath(o.Resource), meta)
	}
	s.pages.handle(handle)
	if s.syncHandler != nil {
		// The command line's, which the handler tells apart from a browser itself; each step caps its own body.
		handle(synclink.Path+"/", s.syncHandler)
	}
	// Outermost first: the page's origin, the body's type and size, then the caller.
	handle(PathMCP, rules.GuardOrigin(s.limits.limitBody(s.authenticate(t.mcp.MCP()))))
	handle(PathSSE, rules.GuardOrigin(s.limits.limitBody(s.authenticate(t.mcp.SSE()))))
	handle(PathMessage, rules.GuardOrigin(browsers.RequireJSON(s.limits.limitBody(s.authenticate(t.mcp.Messages())))))
	handle(PathMetrics, rules.GuardOrigin(s.authenticate(s.metrics.handler())))
	t.handler = rules.GuardHost(mux)
	if s.previews != nil { // a team server's previews are told apart by host name, before anything else
		t.handler = s.previews.Route(t.handler)
	}
	return t
}

// Handler is the server's HTTP handler (streamable HTTP at /mcp, SSE at /sse and /message, /healthz), for
// mounting in a server of one's own. Run serves it with graceful shutdown.
func (s *Server) Handler() http.Handler { return s.newHTTPTransport().handler }

// authenticated reports whether HTTP callers must authenticate (a tokens file, OAuth, or both).
func (s *Server) authenticated() bool { return s.tokens != nil || s.oauth != nil }

// browserRules are which requests of browsers the server serves (server/browsers): its public URL and the OAuth
// resource are its own origins, --allow-origin's are allowed, and their pages may send the session header.
func (s *Server) browserRules() browsers.Rules {
	urls := []string{s.cfg.PublicURL}
	if s.cfg.OAuth != nil {
		urls = append(urls, s.cfg.OAuth.Resource)
	}
	return browsers.NewRules(urls, s.cfg.AllowOrigins, []string{SessionHeader})
}

// authenticate makes the request's caller: the owner of its bearer token (s.bearer: from the tokens file, or an
// OAuth access token's owner claim; anything else is answered 401) or, with neither configured (on a loopback
// listener), the configured owner; and the session of its X-E2B-MCP-Session header or the configured session.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		owner := s.cfg.Owner
		if s.bearer != nil {
			var ok bool
			if owner, ok = s.bearer.Owner(w, r); !ok {
				return
			}
		}
		session := s.cfg.Session
		if h := r.Header.Get(SessionHeader); h != "" {
			if err := checkSessionName(h); err != nil {
				http.Error(w, "bad "+SessionHeader+" header: "+err.Error(), http.StatusBadRequest)
				return
			}
			session = h
		}
		next.ServeHTTP(w, r.WithContext(withIdentity(r.Context(), tools.Caller{Owner: owner, Session: session})))
	})
}

// maxEcho bounds what an error message repeats of a value the caller sent.
const maxEcho = 64

// maxSessionName bounds session names from headers.
const maxSessionName = 128

// checkSessionName accepts printable names of at most maxSessionName bytes.
func checkSessionName(name string) error {
	switch {
	case name == "":
		return errors.New("the session name is empty")
	case len(name) > maxSessionName:
		return fmt.Errorf("the session name is longer than %d bytes", maxSessionName)
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return errors.New("the session name contains a control character")
		}
	}
	return nil
}

// checkListen refuses a listener that others can reach when there is no authentication to tell callers apart.
func checkListen(addr string, haveTokens bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address %q: %w", addr, err)
	}
	if !haveTokens && !loopback.Host(host) {
		return fmt.Errorf("refusing to listen on %s without --tokens-file or --oauth-issuer: anyone who can reach it would "+
			"act with your E2B key. Listen on 127.0.0.1, ::1 or localhost, or authenticate callers (a tokens file from "+
			"`e2b-mcp tokens add OWNER`, or your identity provider)", addr)
	}
	return nil
}
