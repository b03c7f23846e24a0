package mcphttp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	mcpserver "github.com/mark3labs/mcp-go/server"
)

// Sessions binds each HTTP protocol session (the Mcp-Session-Id of streamable HTTP in protocol 2025-11-25
// and earlier, the sessionId of SSE) to the owner that opened it, so that one owner cannot post into, listen to
// or end another owner's session even if it learns the ID. It is mcp-go's session ID manager for /mcp. It also
// ends the calls running in a session when the session ends (see Track).
//
// It bounds each owner's streamable sessions (maxProtocolSessions) and SSE streams (maxSSEStreams) apart: every
// session holds memory until it ends, and a streamable one ends only when its client says so or after an idle
// hour. At its bound, a new streamable session ends the owner's least recently used streamable session (its
// client starts a new one if it comes back), and a new SSE stream ends the owner's least recently used stream
// with no call running that is at least minStreamAge old; when there is none, a new stream is refused (429, with
// Retry-After), so that clients reconnecting past the bound cannot end each other's streams in a loop. Neither
// kind ends the other: idle SSE streams never end a live streamable client's session.
type Sessions struct {
	mu       sync.Mutex
	sessions map[string]*httpSession // session ID → its owner, use and calls
	perOwner map[sessionKind]int
	lastCall uint64
	clock    uint64 // orders uses, for the least recently used
	// end ends a streamable session in mcp-go as its client would (DELETE /mcp), freeing what mcp-go holds.
	end func(id string)
	now func() time.Time // when a stream opens, and how old it is
	// ownerOf is the owner of a request's authenticated caller.
	ownerOf func(context.Context) (string, bool)
}

// httpSession is one HTTP protocol session: the owner that opened it, its last use and the calls running in it.
type httpSession struct {
	owner    string
	sse      bool
	lastUsed uint64
	opened   time.Time
	calls    map[uint64]context.CancelCauseFunc
	// endStream ends an SSE stream (its GET request's context), nil for a streamable session.
	endStream func()
}

// sessionKind is what the bounds count: one owner's streamable sessions, or its SSE streams.
type sessionKind struct {
	owner string
	sse   bool
}

// The bounds of one owner's protocol sessions, each kind apart.
const (
	maxProtocolSessions = 100 // streamable HTTP sessions (protocol 2025-11-25 and earlier)
	maxSSEStreams       = 100 // SSE streams
	// minStreamAge is how long an SSE stream is kept from being ended to make room for another.
	minStreamAge = 5 * time.Second
)

func (k sessionKind) bound() int {
	if k.sse {
		return maxSSEStreams
	}
	return maxProtocolSessions
}

// NewSessions makes the sessions of one server. ownerOf gives the owner of a request's caller, whom the server
// authenticated before the request reaches the transports (false: none).
func NewSessions(ownerOf func(context.Context) (string, bool)) *Sessions {
	return &Sessions{sessions: map[string]*httpSession{}, perOwner: map[sessionKind]int{}, now: time.Now,
		ownerOf: ownerOf}
}

const sessionIDPrefix = "mcp-session-"

func newSessionID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand never fails on supported platforms
	return sessionIDPrefix + hex.EncodeToString(b)
}

// errTooManyStreams is a new SSE stream of an owner at the bound whose streams all have a call running or opened
// within minStreamAge.
var errTooManyStreams = fmt.Errorf("too many open SSE streams, each with a call running or just opened: one owner "+
	"may have %d; close one first, or try again after the time Retry-After gives", maxSSEStreams)

// add opens a session for owner, making room at the bound; endStream ends an SSE stream (nil for a streamable
// session).
func (o *Sessions) add(owner string, sse bool, endStream func()) (string, error) {
	id := newSessionID()
	kind := sessionKind{owner, sse}
	o.mu.Lock()
	evicted, err := o.makeRoomLocked(kind)
	if err == nil {
		o.clock++
		o.sessions[id] = &httpSession{owner: owner, sse: sse, lastUsed: o.clock, opened: o.now(),
			calls: map[uint64]context.CancelCauseFunc{}, endStream: endStream}
		o.perOwner[kind]++
	}
	end := o.end
	o.mu.Unlock()
	if evicted != nil {
		evicted.cancelCalls()
		switch {
		case evicted.endStream != nil:
			evicted.endStream()
		case end != nil:
			go end(evicted.id) // not under mcp-go's handling of the request that asked for a session
		}
	}
	return id, err
}

// endedSession is a session forgotten under the lock, whose calls are cancelled after it.
type endedSession struct {
	id        string
	calls     []context.CancelCauseFunc
	endStream func()
}

func (e *endedSession) cancelCalls() {
	if e == nil {
		return
	}
	for _, cancel := range e.calls {
		cancel(errSessionEnded)
	}
}

// makeRoomLocked forgets the least recently used session of kind that may be ended (any streamable session, an SSE
// stream with no call running, minStreamAge old) when kind is at its bound, and returns it for ending. Only SSE streams
// can all be unendable, so a new streamable session is never refused.
func (o *Sessions) makeRoomLocked(kind sessionKind) (*endedSession, error) {
	if o.perOwner[kind] < kind.bound() {
		return nil, nil
	}
	victim := o.endableLocked(kind)
	if victim == "" {
		return nil, errTooManyStreams
	}
	return o.forgetLocked(victim), nil
}

// endableLocked is the least recently used session of kind that may be ended to make room, "" when there is none.
func (o *Sessions) endableLocked(kind sessionKind) string {
	victim, oldest := "", uint64(0)
	for id, sess := range o.sessions {
		if (sessionKind{sess.owner, sess.sse}) != kind || (kind.sse && !o.endableStreamLocked(sess)) {
			continue
		}
		if victim == "" || sess.lastUsed < oldest {
			victim, oldest = id, sess.lastUsed
		}
	}
	return victim
}

// endableStreamLocked reports whether an SSE stream may be ended to make room: no call runs in it, and it has
// been open minStreamAge.
func (o *Sessions) endableStreamLocked(sess *httpSession) bool {
	return len(sess.calls) == 0 && o.now().Sub(sess.opened) >= minStreamAge
}

func (o *Sessions) setEnd(end func(id string)) {
	o.mu.Lock()
	o.end = end
	o.mu.Unlock()
}

// guardStreams opens an SSE stream's session, bound to the request's owner, or refuses the stream (429,
// Retry-After saying when a stream may be ended) when the owner is at the bound with no stream to end; the
// stream's request gets a context that ends the stream when it is made to make room.
func (o *Sessions) guardStreams(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		owner, ok := o.ownerOf(r.Context())
		if r.Method != http.MethodGet {
			next.ServeHTTP(w, r)
			return
		}
		if !ok {
			http.Error(w, "no authenticated caller", http.StatusInternalServerError)
			return
		}
		// The stream's session is made here, where a stream that finds no room can still be answered 429: mcp-go
		// answers a failure of its session ID generator with 500. mcp-go ends a stream when its request's
		// context does.
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		id, err := o.add(owner, true, cancel)
		if err != nil {
			wait := o.streamWait(owner)
			w.Header().Set("Retry-After", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
			http.Error(w, err.Error(), http.StatusTooManyRequests)
			return
		}
		defer o.Forget(id) // mcp-go forgets it at the stream's end too, once it has registered it
		next.ServeHTTP(w, r.WithContext(context.WithValue(ctx, streamIDKey{}, id)))
	})
}

// streamIDKey carries an SSE stream's session ID, from guardStreams to newSSESession.
type streamIDKey struct{}

// streamWait is how long until one of owner's SSE streams may be ended to make room: until the oldest idle stream
// is minStreamAge old, or minStreamAge when a call runs in every stream; at least a second, Retry-After's unit.
func (o *Sessions) streamWait(owner string) time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	wait := minStreamAge
	for _, sess := range o.sessions {
		if sess.owner == owner && sess.sse && len(sess.calls) == 0 {
			wait = min(wait, minStreamAge-o.now().Sub(sess.opened))
		}
	}
	return max(wait, time.Second)
}

// use returns the owner of session id and marks it used.
func (o *Sessions) use(id string) (string, bool) {
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

// Forget ends a session: its calls are cancelled. The server calls it when mcp-go unregisters a session.
func (o *Sessions) Forget(id string) {
	o.mu.Lock()
	ended := o.forgetLocked(id)
	o.mu.Unlock()
	ended.cancelCalls()
}

// forgetLocked removes a session and returns it, nil when there was none.
func (o *Sessions) forgetLocked(id string) *endedSession {
	sess, ok := o.sessions[id]
	if !ok {
		return nil
	}
	delete(o.sessions, id)
	kind := sessionKind{sess.owner, sess.sse}
	if o.perOwner[kind]--; o.perOwner[kind] <= 0 {
		delete(o.perOwner, kind)
	}
	ended := &endedSession{id: id, endStream: sess.endStream}
	for _, cancel := range sess.calls {
		ended.calls = append(ended.calls, cancel)
	}
	return ended
}

// Track gives a call a context that ends when the call's HTTP protocol session ends; done must be called when
// the call returns. mcp-go runs each message an SSE client posts on a context detached from every HTTP request
// (context.WithoutCancel in SSEServer.handleMessage), so without this a call whose client has disconnected runs
// on to its end, and its command in the sandbox with it. Calls outside the sessions this server issued (stdio,
// in-process clients, streamable HTTP without a session, whose request carries the cancellation) are left as
// they are.
func (o *Sessions) Track(ctx context.Context) (_ context.Context, done func()) {
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
func (o *Sessions) ResolveSessionIdManager(r *http.Request) mcpserver.SessionIdManager {
	m := ownerSessions{o: o}
	if r != nil {
		owner, ok := o.ownerOf(r.Context())
		m.restricted, m.owner = true, owner
		if !ok {
			m.owner = "" // no identity: matches no session
		}
	}
	return m
}

// ownerSessions is mcp-go's SessionIdManager for one request.
type ownerSessions struct {
	o          *Sessions
	restricted bool
	owner      string
}

func (m ownerSessions) Generate() string {
	id, _ := m.o.add(m.owner, false, nil) // never refused: see makeRoomLocked
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
	m.o.Forget(id)
	return false, nil
}

// newSSESession is the SSE server's session ID generator: the ID guardStreams made, bound to the owner opening
// the stream.
func (o *Sessions) newSSESession(_ context.Context, r *http.Request) (string, error) {
	id, ok := r.Context().Value(streamIDKey{}).(string)
	if !ok {
		return "", errors.New("an SSE stream opened outside guardStreams")
	}
	return id, nil
}

// guardMessages lets a POST to /message through only into an SSE session of the same owner.
func (o *Sessions) guardMessages(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		caller, _ := o.ownerOf(r.Context())
		owner, ok := o.use(r.URL.Query().Get("sessionId"))
		if !ok || owner != caller {
			http.Error(w, "unknown session", http.StatusNotFound)
			return
		}
		next.ServeHTTP(w, r)
	})
}
