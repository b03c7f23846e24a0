package mcphttp

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/internal/jsonrpc"
	"github.com/e2b-mcp/e2b-mcp/tools"
)

// Protocol 2026-07-28 has no protocol session, and mcp-go keys the calls that notifications/cancelled may cancel
// on the session and the request ID: over streamable HTTP every such call has the same empty session, so a
// cancel for ID 3 cancelled whichever client's call 3 was registered last (another owner's too), and a call whose
// ID another started meanwhile could not be cancelled at all. So the transport keeps those calls itself, by
// caller (owner, and the session the server's X-E2B-MCP-Session header named) and request ID, and answers their
// notifications/cancelled without mcp-go. A cancel
// that comes before its call (the two are separate POSTs, which may arrive in either order) is remembered a while,
// and the call is cancelled as it starts.

// errCancelledByClient is why a call ends when its client sent notifications/cancelled for it.
var errCancelledByClient = errors.New("the client cancelled the call (notifications/cancelled)")

// earlyCancelTTL is how long a cancel is kept for a call that has not arrived yet.
const earlyCancelTTL = time.Minute

// Clients may send any number of cancels for calls that never come. Each owner keeps at most
// maxEarlyCancelsPerOwner of them, and all owners together maxEarlyCancels: past either bound the oldest cancel of
// the owner with the most goes, so that one member's flood costs only that member's cancels.
const (
	maxEarlyCancelsPerOwner = 256
	maxEarlyCancels         = 4096
)

// callKey names a call of protocol 2026-07-28 over streamable HTTP.
type callKey struct {
	caller tools.Caller
	id     string // the request ID's jsonrpc.RequestKey: IDs match as mcp-go matches them, and a long one is kept small
}

// keyOf is the key of caller's request id (its JSON); false for what is no request ID.
func keyOf(caller tools.Caller, id []byte) (callKey, bool) {
	k, ok := jsonrpc.RequestKey(id)
	return callKey{caller: caller, id: k}, ok
}

// modernCalls are the calls of protocol 2026-07-28 in flight over streamable HTTP, and the cancels that came
// before their calls.
type modernCalls struct {
	mu    sync.Mutex
	calls map[callKey]context.CancelCauseFunc
	early earlyCancels
}

func newModernCalls() *modernCalls {
	return &modernCalls{calls: map[callKey]context.CancelCauseFunc{},
		early: earlyCancels{byOwner: map[string][]earlyCancel{}}}
}

// earlyCancels are the cancels that came before their calls, by owner, each owner's oldest first. Not safe for
// concurrent use (modernCalls.mu guards it).
type earlyCancels struct {
	byOwner map[string][]earlyCancel
	total   int
}

type earlyCancel struct {
	key callKey
	at  time.Time
}

// take removes k's cancel and reports whether there was one.
func (e *earlyCancels) take(k callKey) bool {
	list := e.byOwner[k.caller.Owner]
	for i, c := range list {
		if c.key == k {
			e.set(k.caller.Owner, append(list[:i:i], list[i+1:]...))
			return true
		}
	}
	return false
}

// add remembers k's cancel, made at now, within the bounds (see maxEarlyCancels).
func (e *earlyCancels) add(k callKey, now time.Time) {
	owner := k.caller.Owner
	list := e.byOwner[owner]
	expired := 0
	for expired < len(list) && now.Sub(list[expired].at) > earlyCancelTTL {
		expired++
	}
	list = list[expired:]
	if len(list) >= maxEarlyCancelsPerOwner {
		list = list[1:]
	}
	e.set(owner, append(list, earlyCancel{key: k, at: now}))
	if e.total > maxEarlyCancels {
		most := ""
		for o, l := range e.byOwner {
			if len(l) > len(e.byOwner[most]) {
				most = o
			}
		}
		e.set(most, e.byOwner[most][1:])
	}
}

// set makes list owner's cancels, keeping the total.
func (e *earlyCancels) set(owner string, list []earlyCancel) {
	e.total += len(list) - len(e.byOwner[owner])
	if len(list) == 0 {
		delete(e.byOwner, owner)
		return
	}
	e.byOwner[owner] = list
}

// start registers a call and returns its context, cancelled at once if its cancel came first; done unregisters it.
func (m *modernCalls) start(ctx context.Context, k callKey) (_ context.Context, done func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	m.mu.Lock()
	early := m.early.take(k)
	if !early {
		m.calls[k] = cancel
	}
	m.mu.Unlock()
	if early {
		cancel(errCancelledByClient)
		return ctx, func() {}
	}
	return ctx, func() {
		m.mu.Lock()
		delete(m.calls, k)
		m.mu.Unlock()
		cancel(nil)
	}
}

// cancel cancels the call k, or remembers the cancel until the call comes.
func (m *modernCalls) cancel(k callKey, now time.Time) {
	m.mu.Lock()
	cancel, ok := m.calls[k]
	if ok {
		delete(m.calls, k)
	} else {
		m.early.add(k, now)
	}
	m.mu.Unlock()
	if ok {
		cancel(errCancelledByClient)
	}
}

// cancelModernCalls registers the tool calls of protocol 2026-07-28 POSTed to /mcp and answers their
// notifications/cancelled itself (202), cancelling the caller's call of that ID. Messages of the earlier protocol
// go to mcp-go as they are: their protocol session, bound to its owner, keys their cancels. The message it reads
// goes on with the request (jsonrpc.ReadPosted), for the front behind it.
func (t *Transport) cancelModernCalls(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		caller, ok := t.callerOf(r.Context())
		if r.Method != http.MethodPost || r.Body == nil || !ok {
			next.ServeHTTP(w, r)
			return
		}
		posted, r, err := jsonrpc.ReadPosted(r)
		if err != nil {
			next.ServeHTTP(w, r) // mcp-go answers the unreadable body
			return
		}
		msg := &posted.Envelope
		if posted.Err != nil ||
			!(mcp.IsModernProtocol(r.Header.Get(mcp.HeaderProtocolVersion)) ||
				mcp.IsModernProtocol(msg.Params.Meta.ProtocolVersion())) {
			next.ServeHTTP(w, r)
			return
		}
		switch {
		case msg.Method == string(mcp.MethodNotificationCancelled) && len(msg.ID) == 0:
			if k, ok := keyOf(caller, msg.Params.RequestID); ok {
				t.modern.cancel(k, t.now())
			}
			w.WriteHeader(http.StatusAccepted)
		case msg.Method == string(mcp.MethodToolsCall) && len(msg.ID) > 0:
			k, ok := keyOf(caller, msg.ID)
			if !ok {
				next.ServeHTTP(w, r) // mcp-go refuses the ID
				return
			}
			ctx, done := t.modern.start(r.Context(), k)
			defer done()
			next.ServeHTTP(w, r.WithContext(ctx))
		default:
			next.ServeHTTP(w, r)
		}
	})
}
