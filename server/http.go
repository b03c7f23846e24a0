package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/e2b-mcp/e2b-mcp/tools"
)

// HTTP paths. Streamable HTTP and SSE are both served on every HTTP listener, whichever of http or sse
// --transport names, so that any client finds the endpoint it speaks.
const (
	PathMCP     = "/mcp"
	PathSSE     = "/sse"
	PathMessage = "/message"
	PathHealth  = "/healthz"
	// SessionHeader names the session of an HTTP caller; without it the caller uses Config.Session.
	SessionHeader = "X-E2B-MCP-Session"
)

// httpSessionIdleTTL is how long an idle streamable HTTP session (protocol 2025-11-25 and earlier) is kept.
const httpSessionIdleTTL = time.Hour

// httpTransport is the HTTP side of a Server: the handler, the patterns of its mux and the two mcp-go
// transports it routes to.
type httpTransport struct {
	handler    http.Handler
	patterns   []string
	streamable *mcpserver.StreamableHTTPServer
	sse        *mcpserver.SSEServer
}

func (s *Server) newHTTPTransport() *httpTransport {
	t := &httpTransport{
		streamable: mcpserver.NewStreamableHTTPServer(s.mcp,
			mcpserver.WithEndpointPath(PathMCP),
			mcpserver.WithSessionIdManagerResolver(s.sessions),
			mcpserver.WithSessionIdleTTL(httpSessionIdleTTL),
			mcpserver.WithStreamableHTTPLogger(s.log),
			mcpserver.WithDisableLocalhostProtection(true), // guardHost checks Host on every path, not only here
		),
		sse: mcpserver.NewSSEServer(s.mcp,
			mcpserver.WithSSEEndpoint(PathSSE),
			mcpserver.WithMessageEndpoint(PathMessage),
			mcpserver.WithSessionIDGenerator(s.sessions.newSSESession),
			mcpserver.WithKeepAlive(true),
			mcpserver.WithKeepAliveInterval(30*time.Second),
			mcpserver.WithSSECORS(mcpserver.WithCORSAllowedOrigins(noCORSOrigin)),
			mcpserver.WithSSEDisableLocalhostProtection(true),
		),
	}
	s.sessions.setEnd(func(id string) { endStreamableSession(t.streamable, id) })
	browsers := s.browserRules()
	mux := http.NewServeMux()
	handle := func(pattern string, h http.Handler) { // every path through here, so that tests find them all
		mux.Handle(pattern, h)
		t.patterns = append(t.patterns, pattern)
	}
	handle(PathHealth, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("ok"))
	}))
	if o := s.cfg.OAuth; o != nil {
		meta := o.metadataHandler()
		handle(mcpserver.WellKnownProtectedResourcePath, meta)
		handle(mcpserver.ProtectedResourceMetadataPath(o.Resource), meta)
	}
	if s.connector != nil {
		handle(PathConnect, s.connector) // members' browsers carry no bearer token: the page checks who they are
	}
	handle(PathApprove, s.approvalPage) // a human's browser: the page checks its link, the POST's origin and CSRF token
	// Outermost first: the page's origin, the body's type and size, then the caller.
	handle(PathMCP, browsers.guardOrigin(s.limits.limitBody(s.authenticate(s.cancelModernCalls(withPOSTNotifier(t.streamable))))))
	handle(PathSSE, browsers.guardOrigin(s.limits.limitBody(s.authenticate(s.sessions.guardSSEStreams(t.sse)))))
	handle(PathMessage, browsers.guardOrigin(requireJSON(s.limits.limitBody(s.authenticate(s.sessions.guardSSEMessages(withSSENotifier(t.sse, t.sse)))))))
	handle(PathMetrics, browsers.guardOrigin(s.authenticate(s.metrics.handler())))
	t.handler = browsers.guardHost(mux)
	return t
}

// Handler is the server's HTTP handler (streamable HTTP at /mcp, SSE at /sse and /message, /healthz), for
// mounting in a server of one's own. Run serves it with graceful shutdown.
func (s *Server) Handler() http.Handler { return s.newHTTPTransport().handler }

// authenticated reports whether HTTP callers must authenticate (a tokens file, OAuth, or both).
func (s *Server) authenticated() bool { return s.tokens != nil || s.oauth != nil }

// authenticate makes the request's caller: the owner of its bearer token (from the tokens file, or an OAuth
// access token's owner claim; anything else is answered 401) or, with neither configured (on a loopback
// listener), the configured owner; and the session of its X-E2B-MCP-Session header or the configured session.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		owner := s.cfg.Owner
		if s.authenticated() {
			var err error
			if owner, err = s.tokenOwner(r.Context(), bearerToken(r.Header.Get("Authorization"))); err != nil {
				s.refuse(w, r, err)
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

// errNoToken means a request carries no bearer token.
var errNoToken = errors.New("no bearer token")

// tokenOwner is the owner a bearer token names: a token of the tokens file, or an OAuth access token.
func (s *Server) tokenOwner(ctx context.Context, token string) (string, error) {
	if token == "" {
		return "", errNoToken
	}
	if s.tokens != nil {
		if owner, ok := s.tokens.Owner(token); ok {
			return owner, nil
		}
	}
	if s.oauth != nil {
		return s.oauth.owner(ctx, token)
	}
	return "", errTokenRefused
}

// refuse answers 401, telling an OAuth client where to find the authorization server, or 429 to an address past its
// budget of refused tokens (see refusals). The reason is logged, not sent: it may say which checks a forged
// token passed.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, err error) {
	sent := !errors.Is(err, errNoToken)
	if errors.Is(err, errTokenRefused) {
		if wait := s.refusals.refuse(r.RemoteAddr); wait > 0 {
			s.log.Debug("HTTP request refused past its address's budget of refusals", "remote", r.RemoteAddr, "reason", err)
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
			http.Error(w, "too many refused tokens from this address: retry later", http.StatusTooManyRequests)
			return
		}
	}
	if sent {
		level := slog.LevelInfo
		if !errors.Is(err, errTokenRefused) {
			level = slog.LevelError // the authorization server could not be reached: no token can be checked
		}
		s.log.Log(r.Context(), level, "HTTP request refused", "remote", r.RemoteAddr, "reason", err)
	}
	if s.cfg.OAuth != nil {
		w.Header().Set("WWW-Authenticate", s.cfg.OAuth.challenge(sent))
	} else {
		w.Header().Set("WWW-Authenticate", `Bearer realm="e2b-mcp"`)
	}
	http.Error(w, "unauthorized: send Authorization: Bearer <token> (an access token of the team's identity "+
		"provider, or one from `e2b-mcp tokens add`)", http.StatusUnauthorized)
}

// bearerToken is the token of an "Authorization: Bearer <token>" header value, "" for any other.
func bearerToken(h string) string {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}

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

// isLoopback reports whether a listen host is a loopback address (or localhost).
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(strings.Trim(host, "[]"))
	return err == nil && ip.IsLoopback()
}

// checkListen refuses a listener that others can reach when there is no authentication to tell callers apart.
func checkListen(addr string, haveTokens bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address %q: %w", addr, err)
	}
	if !haveTokens && !isLoopback(host) {
		return fmt.Errorf("refusing to listen on %s without --tokens-file or --oauth-issuer: anyone who can reach it would act "+
			"with your E2B key. Listen on 127.0.0.1, ::1 or localhost, or authenticate callers (a tokens file from "+
			"`e2b-mcp tokens add OWNER`, or your identity provider)", addr)
	}
	return nil
}

// sessionOwners binds each HTTP protocol session (the Mcp-Session-Id of streamable HTTP in protocol 2025-11-25
// and earlier, the sessionId of SSE) to the owner that opened it, so that one owner cannot post into, listen to
// or end another owner's session even if it learns the ID. It is mcp-go's session ID manager for /mcp. It also
// ends the calls running in a session when the session ends (see track).
//
// It bounds the sessions of each owner (maxProtocolSessions): every session holds memory until it ends, and a
// streamable one ends only when its client says so or after an idle hour. At the bound, a new session ends the
// owner's least recently used streamable session (its client starts a new one if it comes back); when all of
// them are open SSE streams, a new stream is refused.
type sessionOwners struct {
	mu       sync.Mutex
	sessions map[string]*httpSession // session ID → its owner, use and calls
	perOwner map[string]int
	lastCall uint64
	clock    uint64 // orders uses, for the least recently used
	// end ends a streamable session in mcp-go as its client would (DELETE /mcp), freeing what mcp-go holds.
	end func(id string)
}

// httpSession is one HTTP protocol session: the owner that opened it, its last use and the calls running in it.
type httpSession struct {
	owner    string
	sse      bool
	lastUsed uint64
	calls    map[uint64]context.CancelCauseFunc
}

// maxProtocolSessions bounds the protocol sessions of one owner.
const maxProtocolSessions = 100

func newSessionOwners() *sessionOwners {
	return &sessionOwners{sessions: map[string]*httpSession{}, perOwner: map[string]int{}}
}

const sessionIDPrefix = "mcp-session-"

func newSessionID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand never fails on supported platforms
	return sessionIDPrefix + hex.EncodeToString(b)
}

// errTooManySessions is a new SSE stream of an owner whose sessions are all open streams, at the bound.
var errTooManySessions = fmt.Errorf("too many open sessions: one owner may have %d; close one first", maxProtocolSessions)

// add opens a session for owner, making room at the bound.
func (o *sessionOwners) add(owner string, sse bool) (string, error) {
	id := newSessionID()
	o.mu.Lock()
	evicted, err := o.makeRoomLocked(owner, sse)
	if err == nil {
		o.clock++
		o.sessions[id] = &httpSession{owner: owner, sse: sse, lastUsed: o.clock, calls: map[uint64]context.CancelCauseFunc{}}
		o.perOwner[owner]++
	}
	end := o.end
	o.mu.Unlock()
	if evicted != nil {
		evicted.cancelCalls()
		if end != nil {
			go end(evicted.id) // not under mcp-go's handling of the request that asked for a session
		}
	}
	return id, err
}

// endedSession is a session forgotten under the lock, whose calls are cancelled after it.
type endedSession struct {
	id    string
	calls []context.CancelCauseFunc
}

func (e *endedSession) cancelCalls() {
	if e == nil {
		return
	}
	for _, cancel := range e.calls {
		cancel(errSessionEnded)
	}
}

// makeRoomLocked forgets owner's least recently used streamable session when owner is at the bound, and returns
// it for ending; with none to forget, a new SSE stream is refused (a streamable session is let through: the
// next one finds it to forget, so the bound is passed by one at most).
func (o *sessionOwners) makeRoomLocked(owner string, sse bool) (*endedSession, error) {
	if o.perOwner[owner] < maxProtocolSessions {
		return nil, nil
	}
	victim, oldest := "", uint64(0)
	for id, sess := range o.sessions {
		if sess.owner == owner && !sess.sse && (victim == "" || sess.lastUsed < oldest) {
			victim, oldest = id, sess.lastUsed
		}
	}
	if victim == "" {
		if sse {
			return nil, errTooManySessions
		}
		return nil, nil
	}
	return o.forgetLocked(victim), nil
}

func (o *sessionOwners) setEnd(end func(id string)) {
	o.mu.Lock()
	o.end = end
	o.mu.Unlock()
}

// endStreamableSession ends a streamable session in mcp-go through its own DELETE, as the session's client
// would, so that mcp-go lets go of what it holds for the session at once rather than after an idle hour.
func endStreamableSession(streamable http.Handler, id string) {
	req, err := http.NewRequest(http.MethodDelete, PathMCP, nil)
	if err != nil {
		return
	}
	req.Header.Set(mcpserver.HeaderKeySessionID, id)
	streamable.ServeHTTP(discardResponse{http.Header{}}, req)
}

// discardResponse is a ResponseWriter for answers nobody reads.
type discardResponse struct{ header http.Header }

func (d discardResponse) Header() http.Header       { return d.header }
func (discardResponse) Write(p []byte) (int, error) { return len(p), nil }
func (discardResponse) WriteHeader(int)             {}

// guardSSEStreams refuses (429) a new SSE stream of an owner whose sessions are all open streams, at the bound.
func (o *sessionOwners) guardSSEStreams(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := identityFrom(r.Context())
		if r.Method == http.MethodGet && o.full(c.Owner) {
			http.Error(w, errTooManySessions.Error(), http.StatusTooManyRequests)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// full reports whether owner is at the bound with no streamable session to make room.
func (o *sessionOwners) full(owner string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.perOwner[owner] < maxProtocolSessions {
		return false
	}
	for _, sess := range o.sessions {
		if sess.owner == owner && !sess.sse {
			return false
		}
	}
	return true
}

// use returns the owner of session id and marks it used.
func (o *sessionOwners) use(id string) (string, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	sess, ok := o.sessions[id]
	if !ok {
		return "", false
	}
	o.clock++
	sess.lastUsed = o.clock
	return sess.owner, true
}

// errSessionEnded is why a call ends when its session does.
var errSessionEnded = errors.New("the client's MCP session ended (the client disconnected, or the session was closed)")

// forget ends a session: its calls are cancelled.
func (o *sessionOwners) forget(id string) {
	o.mu.Lock()
	ended := o.forgetLocked(id)
	o.mu.Unlock()
	ended.cancelCalls()
}

// forgetLocked removes a session and returns it, nil when there was none.
func (o *sessionOwners) forgetLocked(id string) *endedSession {
	sess, ok := o.sessions[id]
	if !ok {
		return nil
	}
	delete(o.sessions, id)
	if o.perOwner[sess.owner]--; o.perOwner[sess.owner] <= 0 {
		delete(o.perOwner, sess.owner)
	}
	ended := &endedSession{id: id}
	for _, cancel := range sess.calls {
		ended.calls = append(ended.calls, cancel)
	}
	return ended
}

// track gives a call a context that ends when the call's HTTP protocol session ends; done must be called when
// the call returns. mcp-go runs each message an SSE client posts on a context detached from every HTTP request
// (context.WithoutCancel in SSEServer.handleMessage), so without this a call whose client has disconnected runs
// on to its end, and its command in the sandbox with it. Calls outside the sessions this server issued (stdio,
// in-process clients, streamable HTTP without a session, whose request carries the cancellation) are left as
// they are.
func (o *sessionOwners) track(ctx context.Context) (_ context.Context, done func()) {
	cs := mcpserver.ClientSessionFromContext(ctx)
	if cs == nil || !strings.HasPrefix(cs.SessionID(), sessionIDPrefix) {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	o.mu.Lock()
	sess, ok := o.sessions[cs.SessionID()]
	if !ok {
		// The session ended between the message's arrival and the call's start.
		o.mu.Unlock()
		cancel(errSessionEnded)
		return ctx, func() {}
	}
	o.lastCall++
	key := o.lastCall
	sess.calls[key] = cancel
	o.mu.Unlock()
	return ctx, func() {
		o.mu.Lock()
		delete(sess.calls, key)
		o.mu.Unlock()
		cancel(nil)
	}
}

// ResolveSessionIdManager gives mcp-go a manager that acts for the request's owner. r is nil for mcp-go's own
// housekeeping (the idle sweeper), which may end any session.
func (o *sessionOwners) ResolveSessionIdManager(r *http.Request) mcpserver.SessionIdManager {
	m := ownerSessions{o: o}
	if r != nil {
		c, ok := identityFrom(r.Context())
		m.restricted, m.owner = true, c.Owner
		if !ok {
			m.owner = "" // no identity: matches no session
		}
	}
	return m
}

// ownerSessions is mcp-go's SessionIdManager for one request.
type ownerSessions struct {
	o          *sessionOwners
	restricted bool
	owner      string
}

func (m ownerSessions) Generate() string {
	id, _ := m.o.add(m.owner, false) // never refused: see makeRoomLocked
	return id
}

func (m ownerSessions) Validate(id string) (bool, error) {
	owner, ok := m.o.use(id)
	if !ok || (m.restricted && (m.owner == "" || owner != m.owner)) {
		// The same answer for unknown and foreign sessions: the client starts a new session.
		return false, errors.New("unknown session")
	}
	return false, nil
}

func (m ownerSessions) Terminate(id string) (bool, error) {
	owner, ok := m.o.use(id)
	if !ok {
		return false, nil
	}
	if m.restricted && owner != m.owner {
		return true, nil
	}
	m.o.forget(id)
	return false, nil
}

// newSSESession is the SSE server's session ID generator: the ID is bound to the owner opening the stream.
func (o *sessionOwners) newSSESession(_ context.Context, r *http.Request) (string, error) {
	c, ok := identityFrom(r.Context())
	if !ok {
		return "", errors.New("no authenticated caller")
	}
	return o.add(c.Owner, true)
}

// guardSSEMessages lets a POST to /message through only into an SSE session of the same owner.
func (o *sessionOwners) guardSSEMessages(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _ := identityFrom(r.Context())
		owner, ok := o.use(r.URL.Query().Get("sessionId"))
		if !ok || owner != c.Owner {
			http.Error(w, "unknown session", http.StatusNotFound)
			return
		}
		next.ServeHTTP(w, r)
	})
}
