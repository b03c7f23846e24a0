package tasks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/e2b-mcp/e2b-mcp/internal/jsonrpc"
	"github.com/e2b-mcp/e2b-mcp/internal/rpctest"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
	"github.com/e2b-mcp/e2b-mcp/state"
	"github.com/e2b-mcp/e2b-mcp/tools"
)

// The tools of these tests, named as the server's are, and how each may become a task.
const (
	heldTool    = "e2b_run_code" // tools.TaskOfServer: its calls run until the test ends them
	commandTool = "e2b_exec"     // tools.TaskOfCommand
	plainTool   = "e2b_list_sandboxes"
)

func kindOf(tool string) tools.TaskKind {
	switch tool {
	case heldTool:
		return tools.TaskOfServer
	case commandTool:
		return tools.TaskOfCommand
	}
	return tools.NoTasks
}

// calls are the held tool's calls, each named by its "code" argument: a call runs until the test ends it with a
// text or an error, or until its context ends, whose cause it reports.
type calls struct {
	mu   sync.Mutex
	runs map[string]*heldCall
}

type heldCall struct {
	started chan struct{} // closed when the call starts
	end     chan outcome  // what the call answers
	ended   chan error    // the cause of the call's context when it ended
}

type outcome struct {
	text string
	err  error
}

func (c *calls) of(code string) *heldCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.runs[code]
	if !ok {
		h = &heldCall{started: make(chan struct{}), end: make(chan outcome, 1), ended: make(chan error, 1)}
		c.runs[code] = h
	}
	return h
}

// handle is the held tool: a call whose code starts with "echo " answers at once.
func (c *calls) handle(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	code := req.GetString("code", "")
	if text, ok := strings.CutPrefix(code, "echo "); ok {
		return mcp.NewToolResultText(text), nil
	}
	h := c.of(code)
	close(h.started)
	select {
	case o := <-h.end:
		if o.err != nil {
			return nil, o.err
		}
		return mcp.NewToolResultText(o.text), nil
	case <-ctx.Done():
		h.ended <- context.Cause(ctx)
		return nil, context.Cause(ctx)
	}
}

type callerKey struct{}

// fixture is a Tasks in front of a real mcp-go server with the held tool, on a real state store. A request's
// bearer token names its session of owner alice, or, as "mallory", the owner mallory; a request without one has
// no caller.
type fixture struct {
	store state.Store
	calls *calls
	mcp   *mcpserver.MCPServer
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	key := bytes.Repeat([]byte{7}, state.DataKeySize)
	st, err := state.Open(t.TempDir(), state.Options{Keys: state.StaticKeySource(key)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &fixture{store: st, calls: &calls{runs: map[string]*heldCall{}}}
	f.mcp = mcpserver.NewMCPServer("tasks-test", "1")
	f.mcp.AddTool(mcp.NewTool(heldTool, mcp.WithString("code", mcp.Required())), f.calls.handle)
	f.mcp.AddTool(mcp.NewTool(plainTool), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("none"), nil
	})
	return f
}

// options are the Tasks options of f, held calls becoming tasks after wait and time going by now.
func (f *fixture) options(wait time.Duration, now func() time.Time) Options {
	return Options{
		Calls:    f.mcp,
		Records:  f.store,
		Commands: nil, // no task here follows a command
		Kind:     kindOf,
		Caller: func(ctx context.Context) (tools.Caller, error) {
			c, ok := ctx.Value(callerKey{}).(tools.Caller)
			if !ok {
				return tools.Caller{}, errors.New("the call carries no caller")
			}
			return c, nil
		},
		Client: func(context.Context) tools.Client { return tools.Client{} },
		Wait:   wait,
		Now:    now,
	}
}

// serve serves ts's HTTP front, before mcp-go's streamable transport, and returns its /mcp.
func (f *fixture) serve(t *testing.T, ts *Tasks) string {
	t.Helper()
	mcpHTTP := mcpserver.NewStreamableHTTPServer(f.mcp, mcpserver.WithStateLess(true))
	front := ts.HTTP(mcpHTTP, func(w http.ResponseWriter, answer []byte) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			c := tools.Caller{Owner: "alice", Session: token}
			if token == "mallory" {
				c.Owner = "mallory"
			}
			r = r.WithContext(context.WithValue(r.Context(), callerKey{}, c))
		}
		front.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

// requestMeta is a request's _meta of protocol 2026-07-28; tasks declares the Tasks extension.
func requestMeta(declare bool) map[string]any {
	caps := map[string]any{}
	if declare {
		caps["extensions"] = map[string]any{tools.TasksExtension: map[string]any{}}
	}
	return map[string]any{mcp.MetaKeyProtocolVersion: mcp.ProtocolVersion20260728, mcp.MetaKeyClientCapabilities: caps}
}

// client posts requests to a front as session of alice (or as mallory).
type client struct {
	url, session string
	next         int
}

func (c *client) send(t *testing.T, method string, params map[string]any) (res, rpcErr map[string]any) {
	t.Helper()
	c.next++
	return rpctest.Post(t, c.url, c.session, c.next, method, params)
}

func (c *client) call(t *testing.T, declare bool, code string) (res, rpcErr map[string]any) {
	t.Helper()
	return c.send(t, string(mcp.MethodToolsCall), map[string]any{"name": heldTool,
		"arguments": map[string]any{"code": code}, "_meta": requestMeta(declare)})
}

func (c *client) task(t *testing.T, method, id string) (res, rpcErr map[string]any) {
	t.Helper()
	return c.send(t, method, map[string]any{"taskId": id, "_meta": requestMeta(true)})
}

// startTask calls the held tool with code, which runs on, and returns the task it becomes.
func (c *client) startTask(t *testing.T, code string) string {
	t.Helper()
	res, rpcErr := c.call(t, true, code)
	id, _ := res["taskId"].(string)
	if rpcErr != nil || res["resultType"] != "task" || res["status"] != "working" || !strings.HasPrefix(id, "task-") {
		t.Fatalf("a held call that outlives the wait answered %v, %v; want a working task", res, rpcErr)
	}
	return id
}

// textOf is the text of a tool result.
func textOf(res map[string]any) string {
	content, _ := res["content"].([]any)
	if len(content) != 1 {
		return fmt.Sprint(content)
	}
	text, _ := content[0].(map[string]any)["text"].(string)
	return text
}

// Which messages the extension answers: tools/call of protocol 2026-07-28 declaring it, of a tool that can answer
// with a task, and that protocol's tasks/ requests. Everything else is mcp-go's.
func TestWhichMessagesAreTheExtensions(t *testing.T) {
	ts := New(Options{Kind: kindOf})
	modern := `"_meta":{"` + mcp.MetaKeyProtocolVersion + `":"` + mcp.ProtocolVersion20260728 + `"`
	declared := modern + `,"` + mcp.MetaKeyClientCapabilities + `":{"extensions":{"` + tools.TasksExtension + `":{}}}}`
	for _, c := range []struct {
		what, raw string
		ours      bool
	}{
		{"a held tool's call declaring tasks", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` +
			heldTool + `",` + declared + `}}`, true},
		{"a command tool's call declaring tasks", `{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"` +
			commandTool + `",` + declared + `}}`, true},
		{"a call not declaring tasks", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + heldTool +
			`",` + modern + `}}}`, false},
		{"a call of a tool without tasks", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` +
			plainTool + `",` + declared + `}}`, false},
		{"a call of protocol 2025-11-25", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` +
			heldTool + `","_meta":{"` + mcp.MetaKeyProtocolVersion + `":"2025-11-25"}}}`, false},
		{"tasks/get", `{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"taskId":"x",` + declared + `}}`, true},
		{"tasks/get not declaring tasks (answered with an error)", `{"jsonrpc":"2.0","id":2,"method":"tasks/get",` +
			`"params":{"taskId":"x",` + modern + `}}}`, true},
		{"tasks/cancel", `{"jsonrpc":"2.0","id":2,"method":"tasks/cancel","params":{` + declared + `}}`, true},
		{"tasks/update", `{"jsonrpc":"2.0","id":2,"method":"tasks/update","params":{` + declared + `}}`, true},
		{"tasks/result, of 2025-11-25's tasks", `{"jsonrpc":"2.0","id":2,"method":"tasks/result","params":{` +
			declared + `}}`, false},
		{"tasks/get of protocol 2025-11-25", `{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"taskId":"x"}}`,
			false},
		{"a notification", `{"jsonrpc":"2.0","method":"tasks/get","params":{` + declared + `}}`, false},
		{"not JSON", `{"method":"tasks/get"`, false},
		{"a tools/call whose name is no string", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":5,` +
			declared + `}}`, false},
		{"a tasks/get whose taskId is no string", `{"jsonrpc":"2.0","id":2,"method":"tasks/get","params":{"taskId":5,` +
			declared + `}}`, false},
	} {
		if _, ours := ts.take(posted(t, c.raw)); ours != c.ours {
			t.Errorf("%s: taken %v, want %v", c.what, ours, c.ours)
		}
	}
}

// posted is raw as the HTTP front reads a POST of it.
func posted(t *testing.T, raw string) *jsonrpc.Posted {
	t.Helper()
	p, _, err := jsonrpc.ReadPosted(httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(raw)))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The HTTP front reads the message a handler before it read (the cancels of protocol 2026-07-28 read every
// POST), not the body again: a megabyte's call is read and parsed once in front of mcp-go. What it hands on has
// the body whole, for mcp-go.
func TestHTTPFrontReadsTheMessageOnce(t *testing.T) {
	ts := New(newFixture(t).options(time.Minute, nil))
	meta := `"_meta":{"` + mcp.MetaKeyProtocolVersion + `":"` + mcp.ProtocolVersion20260728 + `","` +
		mcp.MetaKeyClientCapabilities + `":{"extensions":{"` + tools.TasksExtension + `":{}}}}`
	readBefore := func(raw string) *http.Request {
		_, r, err := jsonrpc.ReadPosted(httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(raw)))
		if err != nil {
			t.Fatal(err)
		}
		r.Body = rpctest.UnreadBody(t)
		return r
	}
	var answer []byte
	respond := func(_ http.ResponseWriter, b []byte) { answer = b }
	notOurs := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("a tasks/get went past the front") })
	raw := `{"jsonrpc":"2.0","id":41,"method":"tasks/get","params":{"taskId":"none",` + meta + `}}`
	ts.HTTP(notOurs, respond).ServeHTTP(httptest.NewRecorder(), readBefore(raw))
	if !strings.Contains(string(answer), `"id":41`) {
		t.Fatalf("the front's answer to a tasks/get read before it: %s", answer)
	}

	raw = `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"` + plainTool + `",` + meta + `}}`
	handedOn := false
	mcpGo := http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		handedOn = true
		if body, err := io.ReadAll(r.Body); err != nil || string(body) != raw {
			t.Errorf("mcp-go got the body %q (%v), want %q", body, err, raw)
		}
	})
	r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(raw))
	ts.HTTP(mcpGo, respond).ServeHTTP(httptest.NewRecorder(), r)
	if !handedOn {
		t.Fatal("a call of a tool without tasks was not handed on")
	}
}

// A held call answers with its result when it ends within the wait; one that runs on becomes a task, which its
// caller follows to its result, and which no other session or owner can see. A client that does not declare the
// extension gets the call's result however long it takes. The extension's requests are checked.
func TestHeldCallBecomesATask(t *testing.T) {
	f := newFixture(t)
	waiting := &client{url: f.serve(t, New(f.options(time.Minute, nil))), session: "s1"}
	if res, rpcErr := waiting.call(t, true, "echo quick"); rpcErr != nil || res["resultType"] == "task" ||
		textOf(res) != "quick" {
		t.Fatalf("a call that ends within the wait: %v, %v; want its result", res, rpcErr)
	}

	url := f.serve(t, New(f.options(10*time.Millisecond, nil)))
	c := &client{url: url, session: "s1"}
	id := c.startTask(t, "long")
	if task, rpcErr := c.task(t, "tasks/get", id); rpcErr != nil || task["status"] != "working" ||
		task["resultType"] != "complete" {
		t.Fatalf("tasks/get of a running held task: %v, %v", task, rpcErr)
	}
	for _, other := range []*client{{url: url, session: "s2"}, {url: url, session: "mallory"}} {
		if _, rpcErr := other.task(t, "tasks/get", id); rpcErr == nil || rpcErr["code"] != float64(mcp.INVALID_PARAMS) {
			t.Errorf("tasks/get of another caller's task (%s): %v; want not found", other.session, rpcErr)
		}
		if _, rpcErr := other.task(t, "tasks/cancel", id); rpcErr == nil {
			t.Errorf("tasks/cancel of another caller's task (%s) was accepted", other.session)
		}
	}
	if _, rpcErr := (&client{url: url}).task(t, "tasks/get", id); rpcErr == nil ||
		rpcErr["code"] != float64(mcp.INVALID_REQUEST) {
		t.Errorf("tasks/get without a caller: %v; want an invalid request", rpcErr)
	}
	f.calls.of("long").end <- outcome{text: "done at last"}
	var task map[string]any
	waitfor.Until(t, time.Minute, "the held task to complete", func() bool {
		var rpcErr map[string]any
		if task, rpcErr = c.task(t, "tasks/get", id); rpcErr != nil {
			t.Fatalf("tasks/get: %v", rpcErr)
		}
		return task["status"] != "working"
	})
	result, _ := task["result"].(map[string]any)
	if task["status"] != "completed" || textOf(result) != "done at last" {
		t.Fatalf("the held task after its call ended: %v", task)
	}

	go func() { f.calls.of("patient").end <- outcome{text: "patience"} }()
	if res, rpcErr := c.call(t, false, "patient"); rpcErr != nil || res["resultType"] == "task" ||
		textOf(res) != "patience" {
		t.Fatalf("a call not declaring tasks: %v, %v; want its result", res, rpcErr)
	}

	res, rpcErr := c.send(t, "tasks/get", map[string]any{"taskId": id, "_meta": requestMeta(false)})
	data, _ := rpcErr["data"].(map[string]any)
	if res != nil || rpcErr["code"] != float64(CodeMissingCapability) || data["requiredCapabilities"] == nil {
		t.Errorf("tasks/get not declaring the extension: %v, %v; want a missing capability", res, rpcErr)
	}
	if _, rpcErr := c.send(t, "tasks/get", map[string]any{"_meta": requestMeta(true)}); rpcErr == nil ||
		rpcErr["code"] != float64(mcp.INVALID_PARAMS) {
		t.Errorf("tasks/get without a taskId: %v; want invalid params", rpcErr)
	}
	if _, rpcErr := c.send(t, "tasks/update", map[string]any{"taskId": id, "inputResponses": []any{1},
		"_meta": requestMeta(true)}); rpcErr == nil || rpcErr["code"] != float64(mcp.INVALID_PARAMS) {
		t.Errorf("tasks/update with inputResponses not an object: %v; want invalid params", rpcErr)
	}
	if res, rpcErr := c.send(t, "tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{},
		"_meta": requestMeta(true)}); rpcErr != nil || res["resultType"] != "complete" {
		t.Errorf("tasks/update: %v, %v", res, rpcErr)
	}
	if res, rpcErr := c.send(t, string(mcp.MethodToolsCall), map[string]any{"name": plainTool,
		"_meta": requestMeta(true)}); rpcErr != nil || res["resultType"] == "task" || textOf(res) != "none" {
		t.Errorf("a call of a tool without tasks, through mcp-go: %v, %v", res, rpcErr)
	}
}

// tasks/cancel stops a held call (its context ends, for the task's cancel) and the task stays cancelled when the
// call then ends; a call that fails after it became a task leaves the task failed with its error.
func TestHeldTaskCancelledOrFailed(t *testing.T) {
	f := newFixture(t)
	ts := New(f.options(10*time.Millisecond, nil))
	c := &client{url: f.serve(t, ts), session: "s1"}
	id := c.startTask(t, "endless")
	for range 2 { // a repeat is no error
		if res, rpcErr := c.task(t, "tasks/cancel", id); rpcErr != nil || res["resultType"] != "complete" {
			t.Fatalf("tasks/cancel: %v, %v", res, rpcErr)
		}
	}
	cause := waitfor.Recv(t, f.calls.of("endless").ended, time.Minute, "the cancelled call to end")
	if !errors.Is(cause, errCancelled) {
		t.Fatalf("the cancelled call ended for %v, want the task's cancel", cause)
	}
	waitfor.Until(t, time.Minute, "the cancelled call's runner to end", func() bool { return !ts.runners.running(id) })
	if task, rpcErr := c.task(t, "tasks/get", id); rpcErr != nil || task["status"] != "cancelled" ||
		task["result"] != nil || task["error"] != nil {
		t.Fatalf("a cancelled task once its call ended: %v, %v", task, rpcErr)
	}

	id = c.startTask(t, "failing")
	f.calls.of("failing").end <- outcome{err: errors.New("the kernel died")}
	var task map[string]any
	waitfor.Until(t, time.Minute, "the failing task to end", func() bool {
		task, _ = c.task(t, "tasks/get", id)
		return task["status"] != "working"
	})
	taskErr, _ := task["error"].(map[string]any)
	if task["status"] != "failed" || !strings.Contains(fmt.Sprint(taskErr["message"]), "the kernel died") ||
		task["result"] != nil {
		t.Fatalf("a task whose call failed: %v", task)
	}
}

// A server sharing the store answers a held task from its record: working while its server renews it, completed
// with a result saying the outcome is lost once the record is stale (its server gone), and the running server
// then answers so too, keeping that answer when the call ends after all.
func TestHeldTaskOfAGoneServer(t *testing.T) {
	f := newFixture(t)
	ts := New(f.options(10*time.Millisecond, nil))
	c := &client{url: f.serve(t, ts), session: "s1"}
	replica := &client{url: f.serve(t, New(f.options(time.Minute, nil))), session: "s1"}
	late := &client{url: f.serve(t, New(f.options(time.Minute, func() time.Time {
		return time.Now().Add(2 * HeldStale)
	}))), session: "s1"}
	id := c.startTask(t, "forever")
	if task, rpcErr := replica.task(t, "tasks/get", id); rpcErr != nil || task["status"] != "working" {
		t.Fatalf("another server's tasks/get of a held task whose server runs: %v, %v", task, rpcErr)
	}
	lost, rpcErr := late.task(t, "tasks/get", id)
	result, _ := lost["result"].(map[string]any)
	if rpcErr != nil || lost["status"] != "completed" || result["isError"] != true ||
		!strings.Contains(textOf(result), "outcome is lost") || !strings.Contains(textOf(result), heldTool) {
		t.Fatalf("a held task whose record is stale: %v, %v", lost, rpcErr)
	}
	f.calls.of("forever").end <- outcome{text: "too late"}
	waitfor.Until(t, time.Minute, "the late call's runner to end", func() bool { return !ts.runners.running(id) })
	task, rpcErr := c.task(t, "tasks/get", id)
	if result, _ := task["result"].(map[string]any); rpcErr != nil || task["status"] != "completed" ||
		!strings.Contains(textOf(result), "outcome is lost") {
		t.Fatalf("the running server's task, completed as lost by another, after its call ended: %v, %v", task, rpcErr)
	}
}

// A held call whose request ends before the call becomes a task ends with it, and is answered as it ended.
func TestARequestThatEndsEndsItsHeldCall(t *testing.T) {
	f := newFixture(t)
	ts := New(f.options(time.Minute, nil))
	raw := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + heldTool +
		`","arguments":{"code":"abandoned"},"_meta":{"` + mcp.MetaKeyProtocolVersion + `":"` +
		mcp.ProtocolVersion20260728 + `","` + mcp.MetaKeyClientCapabilities + `":{"extensions":{"` +
		tools.TasksExtension + `":{}}}}}}`)
	m, ours := ts.take(posted(t, string(raw)))
	if !ours {
		t.Fatal("a held tool's call declaring tasks was not taken")
	}
	ctx, cancel := context.WithCancel(context.WithValue(t.Context(), callerKey{}, tools.Caller{Owner: "alice",
		Session: "s1"}))
	answered := make(chan []byte, 1)
	go func() { answered <- ts.Answer(ctx, m, raw) }()
	waitfor.Recv(t, f.calls.of("abandoned").started, time.Minute, "the call to start")
	cancel()
	cause := waitfor.Recv(t, f.calls.of("abandoned").ended, time.Minute, "the call to end")
	if !errors.Is(cause, context.Canceled) {
		t.Fatalf("the call ended for %v, want its request's end", cause)
	}
	answer := string(waitfor.Recv(t, answered, time.Minute, "the call's answer"))
	if strings.Contains(answer, `"taskId"`) || !strings.Contains(answer, `"id":7`) {
		t.Fatalf("a call whose request ended answered %s; want its own answer, no task", answer)
	}
}

// failingPuts are a store that cannot record a new task (a full disk); putting one first ends the held call, so
// that the call's answer is there to give.
type failingPuts struct {
	state.Store
	put func()
}

func (s failingPuts) PutTask(state.Task) error {
	s.put()
	return errors.New("no space left on device")
}

// A call whose task cannot be recorded is answered as a call without tasks is: with its result when it ends.
func TestAnUnrecordedTaskAnswersItsCall(t *testing.T) {
	f := newFixture(t)
	o := f.options(10*time.Millisecond, nil)
	o.Records = failingPuts{f.store, func() { f.calls.of("unrecorded").end <- outcome{text: "the answer"} }}
	c := &client{url: f.serve(t, New(o)), session: "s1"}
	if res, rpcErr := c.call(t, true, "unrecorded"); rpcErr != nil || res["resultType"] == "task" ||
		textOf(res) != "the answer" {
		t.Fatalf("a call whose task could not be recorded: %v, %v; want its result", res, rpcErr)
	}
}

// A cancel on another server sharing the store marks the task's record, and the server running the call stops it
// when it next renews the record.
func TestACancelOnAnotherServerStopsTheCall(t *testing.T) {
	f := newFixture(t)
	c := &client{url: f.serve(t, New(f.options(10*time.Millisecond, nil))), session: "s1"}
	replica := &client{url: f.serve(t, New(f.options(time.Minute, nil))), session: "s1"}
	id := c.startTask(t, "elsewhere")
	if res, rpcErr := replica.task(t, "tasks/cancel", id); rpcErr != nil || res["resultType"] != "complete" {
		t.Fatalf("tasks/cancel on another server: %v, %v", res, rpcErr)
	}
	cause := waitfor.Recv(t, f.calls.of("elsewhere").ended, time.Minute, "the call cancelled on another server to end")
	if !errors.Is(cause, errCancelled) {
		t.Fatalf("the call ended for %v, want the task's cancel", cause)
	}
	if task, rpcErr := c.task(t, "tasks/get", id); rpcErr != nil || task["status"] != "cancelled" {
		t.Fatalf("the task cancelled on another server, on its own: %v, %v", task, rpcErr)
	}
}
