package mcphttp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/internal/jsonrpc"
	"github.com/e2b-mcp/e2b-mcp/internal/rpctest"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
	"github.com/e2b-mcp/e2b-mcp/tools"
)

// modernMeta is the _meta of a request of protocol 2026-07-28.
var modernMeta = map[string]any{mcp.MetaKeyProtocolVersion: mcp.ProtocolVersion20260728,
	mcp.MetaKeyClientInfo:         map[string]any{"name": "mcphttp-test", "version": "1"},
	mcp.MetaKeyClientCapabilities: map[string]any{}}

// startWait POSTs a call of the tool "wait" of protocol 2026-07-28 with request ID id (a number, or its JSON) as
// owner, and returns the channel of its answer's status (or the error of the POST).
func startWait(t *testing.T, x *served, owner string, id any) <-chan error {
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call",
		"params": map[string]any{"name": "wait", "arguments": map[string]any{}, "_meta": modernMeta}})
	if err != nil {
		t.Fatal(err)
	}
	answered := make(chan error, 1)
	go func() {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, x.base+PathMCP, strings.NewReader(string(body)))
		if err != nil {
			answered <- err
			return
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(mcp.HeaderProtocolVersion, mcp.ProtocolVersion20260728)
		req.Header.Set(mcp.HeaderMethod, "tools/call")
		req.Header.Set(mcp.HeaderName, "wait")
		req.Header.Set("Authorization", "Bearer "+owner)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		answered <- err
	}()
	return answered
}

// cancel sends notifications/cancelled of protocol 2026-07-28 for request id as owner.
func cancel(t *testing.T, x *served, owner string, id any) {
	t.Helper()
	rpctest.Exchange(t, x.base+PathMCP, owner, nil, "notifications/cancelled",
		map[string]any{"requestId": id, "reason": "the user pressed Stop", "_meta": modernMeta})
}

// Over streamable HTTP in protocol 2026-07-28 (no protocol session), notifications/cancelled cancels the sender's
// own call of that ID, not another owner's call that has the same ID, and a cancel that arrives before its call
// (separate POSTs, in either order) still stops it.
func TestModernCancelIsTheCallersOwn(t *testing.T) {
	x := serve(t, nil)
	answered := startWait(t, x, "alice", 7)
	waitfor.Until(t, 30*time.Second, "alice's call 7 to start", func() bool {
		x.tr.modern.mu.Lock()
		defer x.tr.modern.mu.Unlock()
		return len(x.tr.modern.calls) == 1
	})
	cancel(t, x, "bob", 7)
	select {
	case err := <-x.ended:
		t.Fatalf("bob's notifications/cancelled for his request 7 ended alice's call 7: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	cancel(t, x, "alice", 7)
	if err := waitfor.Recv(t, x.ended, 30*time.Second, "alice's cancelled call to end"); !errors.Is(err,
		errCancelledByClient) {
		t.Errorf("alice's call 7 ended with %v, want %v", err, errCancelledByClient)
	}
	waitfor.Recv(t, answered, 30*time.Second, "the answer to the cancelled call 7")

	cancel(t, x, "alice", 8)
	answered = startWait(t, x, "alice", 8)
	if err := waitfor.Recv(t, x.ended, 30*time.Second, "the call whose cancel came first to end"); !errors.Is(err,
		errCancelledByClient) {
		t.Errorf("alice's call 8, whose cancel came first, ended with %v, want %v", err, errCancelledByClient)
	}
	waitfor.Recv(t, answered, 30*time.Second, "the answer to call 8")
}

// The front behind the cancels (the Tasks extension's) finds the message the cancels read and parsed on its
// request (jsonrpc.ReadPosted) rather than reading the body again, and mcp-go behind it gets the body whole.
func TestFrontGetsTheMessageTheCancelsRead(t *testing.T) {
	fronted := 0
	front := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fronted++
			body := r.Body
			r.Body = rpctest.UnreadBody(t)
			p, r, err := jsonrpc.ReadPosted(r)
			if err != nil || p.Err != nil || p.Envelope.Method != "tools/call" {
				t.Errorf("the front read %+v, %v; want the cancels' tools/call", p, err)
			}
			r.Body = body
			next.ServeHTTP(w, r)
		})
	}
	x := serveFront(t, nil, front)
	res, rpcErr := rpctest.Post(t, x.base+PathMCP, "alice", 3, "tools/call",
		map[string]any{"name": "echo", "arguments": map[string]any{}, "_meta": modernMeta})
	if rpcErr != nil || !strings.Contains(fmt.Sprint(res), "echo") {
		t.Fatalf("a call through the front: %v, %v; want echo's result", res, rpcErr)
	}
	if fronted != 1 {
		t.Fatalf("the front saw %d requests, want the call", fronted)
	}
}

// maxKeptID bounds what the transport keeps of a request ID it holds for later, a cancel for a call it has not
// seen.
const maxKeptID = 64

// A client may give a call any JSON-RPC ID, however long: the protocol sets no bound. What the transport keeps of a
// cancel that comes before its call is small whatever the ID's length: an owner's early cancels are bounded in
// number (maxEarlyCancelsPerOwner), and a bound in number is a bound in memory only so.
func TestLongIDsKeptSmall(t *testing.T) {
	x := serve(t, nil)
	for _, id := range []json.RawMessage{
		json.RawMessage(`"` + strings.Repeat("x", 100_000) + `"`),
		json.RawMessage(strings.Repeat("7", 100_000)),
	} {
		cancel(t, x, "alice", id)
	}
	x.tr.modern.mu.Lock()
	defer x.tr.modern.mu.Unlock()
	kept := x.tr.modern.early.byOwner["alice"]
	if len(kept) != 2 {
		t.Fatalf("%d cancels kept of 2 sent before their calls", len(kept))
	}
	for _, c := range kept {
		if len(c.key.id) > maxKeptID {
			t.Errorf("a cancel for a call not seen yet keeps %d bytes of its ID", len(c.key.id))
		}
	}
}

// One member's flood of cancels for calls that never come cannot drop another owner's: alice's Stop that arrived
// before her call still cancels the call when it comes, after bob has sent cancels past every bound, and bob's
// flood costs only bob's oldest cancels.
func TestEarlyCancelsBoundedPerOwner(t *testing.T) {
	m := newModernCalls()
	now := time.Now()
	alice := mustKey(t, tools.Caller{Owner: "alice", Session: "s"}, []byte("7"))
	m.cancel(alice, now)
	bob := func(i int) callKey {
		return mustKey(t, tools.Caller{Owner: "bob", Session: "s"}, strconv.AppendInt(nil, int64(i), 10))
	}
	const flood = 3 * maxEarlyCancels
	for i := range flood {
		m.cancel(bob(i), now)
	}
	ctx, done := m.start(t.Context(), alice)
	defer done()
	if context.Cause(ctx) != errCancelledByClient {
		t.Fatalf("alice's call after bob's flood of %d cancels: %v, want cancelled", flood, context.Cause(ctx))
	}
	bobsLast, doneLast := m.start(t.Context(), bob(flood-1))
	defer doneLast()
	if context.Cause(bobsLast) != errCancelledByClient {
		t.Errorf("bob's newest cancel was dropped")
	}
	bobsFirst, doneFirst := m.start(t.Context(), bob(0))
	defer doneFirst()
	if bobsFirst.Err() != nil {
		t.Errorf("bob's oldest cancel of %d was kept: the bound does not hold", flood)
	}
}

func mustKey(t *testing.T, caller tools.Caller, id []byte) callKey {
	t.Helper()
	k, ok := keyOf(caller, id)
	if !ok {
		t.Fatalf("%s is no request ID", id)
	}
	return k
}

// A cancel names its call by the ID as the protocol reads it, not by its spelling: mcp-go and the stdio front take
// 7 and 7.0, or "a" and "\u0061", for one ID, and so does a cancel of protocol 2026-07-28, whether it comes while
// its call runs or before the call.
func TestModernCancelMatchesTheIDNotItsSpelling(t *testing.T) {
	x := serve(t, nil)
	for i, ids := range [][2]string{{`7`, `7.0`}, {`"a"`, `"\u0061"`}, {`70e-1`, `7`}} {
		call, spelled := json.RawMessage(ids[0]), json.RawMessage(ids[1])
		answered := startWait(t, x, "alice", call)
		waitfor.Until(t, 30*time.Second, "alice's call "+ids[0]+" to start", func() bool {
			x.tr.modern.mu.Lock()
			defer x.tr.modern.mu.Unlock()
			return len(x.tr.modern.calls) == 1
		})
		cancel(t, x, "alice", spelled)
		err := waitfor.Recv(t, x.ended, 30*time.Second, "call "+ids[0]+" to end at the cancel of "+ids[1])
		if !errors.Is(err, errCancelledByClient) {
			t.Errorf("call %s ended with %v at the cancel of %s, want %v", ids[0], err, ids[1], errCancelledByClient)
		}
		waitfor.Recv(t, answered, 30*time.Second, "the answer to the cancelled call "+ids[0])

		early := json.RawMessage(strconv.Itoa(100 + i))
		cancel(t, x, "alice", json.RawMessage(string(early)+".0"))
		answered = startWait(t, x, "alice", early)
		err = waitfor.Recv(t, x.ended, 30*time.Second, "call "+string(early)+" to end at the cancel that came first")
		if !errors.Is(err, errCancelledByClient) {
			t.Errorf("call %s, whose cancel %s.0 came first, ended with %v", early, early, err)
		}
		waitfor.Recv(t, answered, 30*time.Second, "the answer to call "+string(early))
	}
}

// In protocol 2025-11-25 the session keys a call for its cancels (mcp-go's), and the ID matches as it does in
// protocol 2026-07-28.
func TestSessionCancelMatchesTheIDNotItsSpelling(t *testing.T) {
	x := serve(t, nil)
	_, hdr, body := do(t, http.MethodPost, x.base+PathMCP, "alice", initializeBody, nil)
	session := map[string]string{"Mcp-Session-Id": hdr.Get("Mcp-Session-Id")}
	if session["Mcp-Session-Id"] == "" {
		t.Fatalf("initialize gave no session: %s", body)
	}
	do(t, http.MethodPost, x.base+PathMCP, "alice", `{"jsonrpc":"2.0","method":"notifications/initialized"}`, session)
	for _, ids := range [][2]string{{`7`, `7.0`}, {`"a"`, `"\u0061"`}} {
		answered := make(chan int, 1)
		go func() {
			status, _, _ := do(t, http.MethodPost, x.base+PathMCP, "alice", `{"jsonrpc":"2.0","id":`+ids[0]+
				`,"method":"tools/call","params":{"name":"wait","arguments":{}}}`, session)
			answered <- status
		}()
		waitfor.Recv(t, x.started, 30*time.Second, "alice's call "+ids[0]+" to start")
		do(t, http.MethodPost, x.base+PathMCP, "alice", `{"jsonrpc":"2.0","method":"notifications/cancelled",`+
			`"params":{"requestId":`+ids[1]+`}}`, session)
		err := waitfor.Recv(t, x.ended, 30*time.Second, "call "+ids[0]+" to end at the cancel of "+ids[1])
		if !errors.Is(err, context.Canceled) {
			t.Errorf("call %s ended with %v at the cancel of %s, want it cancelled", ids[0], err, ids[1])
		}
		waitfor.Recv(t, answered, 30*time.Second, "the answer to the cancelled call "+ids[0])
	}
}
