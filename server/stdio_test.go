package server

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// rawStdio is a stdio server's client that writes lines as they are and reads the server's lines.
type rawStdio struct {
	in     *io.PipeWriter
	lines  chan []byte
	served chan struct{} // closed when ServeStdio returned, with err
	err    error
}

func newRawStdio(t *testing.T, srv *Server) *rawStdio {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, stop := context.WithCancel(context.Background())
	r := &rawStdio{in: inW, lines: make(chan []byte, 64), served: make(chan struct{})}
	go func() {
		r.err = srv.ServeStdio(ctx, inR, outW)
		close(r.served)
	}()
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			r.lines <- append([]byte(nil), sc.Bytes()...)
		}
	}()
	t.Cleanup(func() {
		stop()
		inW.Close()
		outR.Close()
		waitfor.Recv(t, r.served, 30*time.Second, "the stdio server to stop")
	})
	return r
}

func (r *rawStdio) write(t *testing.T, lines ...string) {
	t.Helper()
	if _, err := r.in.Write([]byte(strings.Join(lines, "\n") + "\n")); err != nil {
		t.Fatal(err)
	}
}

// answer waits for the server's answer to request id (a JSON number) and returns it.
func (r *rawStdio) answer(t *testing.T, id int) map[string]any {
	t.Helper()
	for {
		line := waitfor.Recv(t, r.lines, time.Minute, "the answer to request "+strconv.Itoa(id))
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("the server wrote %q: %v", line, err)
		}
		if got, ok := m["id"].(float64); ok && int(got) == id {
			return m
		}
	}
}

// initialize makes the stdio session's handshake of protocol 2025-11-25.
func (r *rawStdio) initialize(t *testing.T) {
	t.Helper()
	r.write(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",`+
		`"capabilities":{},"clientInfo":{"name":"stdio-test","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if a := r.answer(t, 1); a["result"] == nil {
		t.Fatalf("initialize: %v", a)
	}
}

// waitingTool adds a tool to srv that waits for its call's context to end, and says when a call started and when
// its context ended.
func waitingTool(srv *Server) (started, ended chan struct{}) {
	started, ended = make(chan struct{}, 8), make(chan struct{}, 8)
	srv.mcp.AddTool(mcp.NewTool("test_wait"), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		started <- struct{}{}
		select {
		case <-ctx.Done():
			ended <- struct{}{}
			return nil, ctx.Err()
		case <-time.After(2 * time.Minute):
			return mcp.NewToolResultText("not cancelled"), nil
		}
	})
	return started, ended
}

// A notifications/cancelled that comes right behind its call, in the same write, cancels the call: the stdio
// front hands the call to mcp-go's handler on another goroutine, which may not have registered it for cancels yet.
func TestStdioCancelRightBehindItsCall(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	started, ended := waitingTool(f.srv)
	r := newRawStdio(t, f.srv)
	r.initialize(t)
	for id := 2; id < 12; id++ {
		r.write(t, `{"jsonrpc":"2.0","id":`+strconv.Itoa(id)+`,"method":"tools/call","params":{"name":"test_wait"}}`,
			`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":`+strconv.Itoa(id)+`}}`)
		waitfor.Recv(t, started, time.Minute, "call "+strconv.Itoa(id)+" to start")
		waitfor.Recv(t, ended, time.Minute, "call "+strconv.Itoa(id)+" to be cancelled by the cancel behind it")
	}
}

// A cancel names its call by the ID as the protocol reads it, not by its spelling (7 and 7.0, "a" and "\u0061"),
// as mcp-go matches them, whether it comes right behind its call or once the call runs.
func TestStdioCancelMatchesTheIDNotItsSpelling(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	started, ended := waitingTool(f.srv)
	r := newRawStdio(t, f.srv)
	r.initialize(t)
	for i, ids := range [][2]string{{`7`, `7.0`}, {`"a"`, `"\u0061"`}, {`90e-1`, `9`},
		{`8`, `8.0`}, {`"b"`, `"\u0062"`}, {`100e-1`, `10`}} {
		call := `{"jsonrpc":"2.0","id":` + ids[0] + `,"method":"tools/call","params":{"name":"test_wait"}}`
		cancel := `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` + ids[1] + `}}`
		if i < 3 {
			r.write(t, call, cancel)
		} else {
			r.write(t, call)
		}
		waitfor.Recv(t, started, time.Minute, "call "+ids[0]+" to start")
		if i >= 3 {
			r.write(t, cancel)
		}
		waitfor.Recv(t, ended, time.Minute, "call "+ids[0]+" to be cancelled by the cancel of "+ids[1])
	}
}

// When the client closes stdin, the calls in flight are cancelled and ServeStdio returns, as mcp-go's stdio
// transport has it.
func TestStdioEndOfInputCancelsTheCalls(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	started, ended := waitingTool(f.srv)
	r := newRawStdio(t, f.srv)
	r.initialize(t)
	r.write(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test_wait"}}`)
	waitfor.Recv(t, started, time.Minute, "the call to start")
	r.in.Close()
	waitfor.Recv(t, ended, time.Minute, "the call to be cancelled at the end of input")
	waitfor.Recv(t, r.served, time.Minute, "ServeStdio to return at the end of input")
	if r.err != nil {
		t.Fatal(r.err)
	}
}

// The front hands the client's requests and notifications to mcp-go's handler itself, each line parsed once
// (mcp-go's stdio transport parses a line five times before its handler parses it again): only the client's
// answers to the server's requests and the lines the front cannot read go to mcp-go's transport, which answers a
// line that is not JSON as it always did.
func TestStdioFrontPassesOnlyAnswersToTheTransport(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	out := &recordedLines{}
	toMCP, fromFront := io.Pipe()
	forwarded := &recordedLines{}
	go func() {
		sc := bufio.NewScanner(toMCP)
		for sc.Scan() {
			forwarded.add(sc.Text())
		}
	}()
	front := newStdioFront(f.srv, &stdioOut{w: out}, fromFront)
	answerToServer := `{"jsonrpc":"2.0","id":7,"result":{"action":"accept"}}`
	notJSON := `{"jsonrpc":"2.0","id":8,"method":`
	badID := `{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}`
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},` +
			`"clientInfo":{"name":"front-test","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":"four","method":"tools/call","params":{"name":"e2b_list_sandboxes","arguments":{}}}`,
		answerToServer, notJSON, badID,
	}, "\n") + "\n"
	served := make(chan struct{})
	go func() { front.serve(context.Background(), strings.NewReader(in)); close(served) }()
	waitfor.Recv(t, served, time.Minute, "the front to serve its input")
	waitfor.Until(t, time.Minute, "the transport to read what the front passed on", func() bool {
		return len(forwarded.get()) >= 3
	})
	if got, want := forwarded.get(), []string{answerToServer, notJSON, badID}; strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("passed on to mcp-go's transport:\n%s\nwant only:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	ids := map[string]bool{}
	for _, line := range out.get() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
		}
		if json.Unmarshal([]byte(line), &m) != nil || m.Result == nil {
			t.Errorf("the front wrote %.200q", line)
		}
		ids[string(m.ID)] = true
	}
	for _, id := range []string{`1`, `2`, `3`, `"four"`} {
		if !ids[id] {
			t.Errorf("no answer to request %s; the front wrote %d lines", id, len(out.get()))
		}
	}
}

// recordedLines are the lines written to it.
type recordedLines struct {
	mu    sync.Mutex
	lines []string
}

func (r *recordedLines) Write(p []byte) (int, error) {
	for l := range strings.SplitSeq(strings.TrimSuffix(string(p), "\n"), "\n") {
		r.add(l)
	}
	return len(p), nil
}

func (r *recordedLines) add(l string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, l)
}

func (r *recordedLines) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.lines...)
}

// argumentsTool adds a tool to srv that keeps each call's request, and a hook that keeps the first tools/call
// messages mcp-go's handler was given.
func argumentsTool(srv *Server) (calls chan mcp.CallToolRequest, handed chan []byte) {
	calls, handed = make(chan mcp.CallToolRequest, 16), make(chan []byte, 16)
	srv.mcp.GetHooks().AddOnRequestInitialization(func(_ context.Context, _ any, message any) error {
		if raw, ok := message.(json.RawMessage); ok && strings.Contains(string(raw), `"tools/call"`) {
			select {
			case handed <- append([]byte(nil), raw...):
			default: // a test that does not read them
			}
		}
		return nil
	})
	srv.mcp.AddTool(mcp.NewTool("test_args"), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		calls <- req
		return mcp.NewToolResultText("ok"), nil
	})
	return calls, handed
}

// A tool call's arguments are decoded once, by the front, and mcp-go's handler parses the call without them: it
// is given the line with the arguments' value replaced by a small stand-in, and the tool gets the arguments back
// (decoded, and their JSON as the client sent it) before the call pipeline reads them.
func TestStdioFrontDecodesTheArgumentsOnce(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	calls, handed := argumentsTool(f.srv)
	r := newRawStdio(t, f.srv)
	r.initialize(t)
	big := strings.Repeat(`line \"quoted\"\t<&>\n`, 1<<14)
	args := `{"content":"` + big + `","n":9007199254740993}`
	r.write(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"test_args","arguments":`+args+`}}`)
	if a := r.answer(t, 2); a["error"] != nil {
		t.Fatalf("the call failed: %v", a)
	}
	req := waitfor.Recv(t, calls, time.Minute, "the tool's call")
	if string(req.Params.RawArguments) != args {
		t.Errorf("the tool got the arguments' JSON %.200q, want the client's", req.Params.RawArguments)
	}
	var want any
	if err := json.Unmarshal([]byte(args), &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(req.Params.Arguments, want) {
		t.Errorf("the tool got the arguments %.200v, want them as encoding/json decodes them", req.Params.Arguments)
	}
	if msg := waitfor.Recv(t, handed, time.Minute, "mcp-go's handler to get the call"); len(msg) > 1024 {
		t.Errorf("mcp-go's handler was given %d bytes, the arguments too: %.200q", len(msg), msg)
	}
}

// Whatever shape a tool call has, the tool gets what mcp-go's own decoding of the line gives, and a call that
// mcp-go refuses is refused as mcp-go refuses it when handed the whole line.
func TestStdioToolCallsAsMCPGoDecodesThem(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	calls, _ := argumentsTool(f.srv)
	r := newRawStdio(t, f.srv)
	r.initialize(t)
	checkToolCallShapes(t, f, calls, func(id int, line string) map[string]any {
		r.write(t, line)
		return r.answer(t, id)
	})
}

// checkToolCallShapes sends tool calls of every shape through send (request id, the message) to a server with
// argumentsTool, and checks that the tool gets what mcp-go's own decoding of each gives, and that a call mcp-go
// refuses is refused as mcp-go's handler refuses it when handed the whole message.
func checkToolCallShapes(t *testing.T, f *fixture, calls chan mcp.CallToolRequest,
	send func(id int, line string) map[string]any) {
	t.Helper()
	refused := map[string]bool{
		`{"name":"test_args","arguments":{"a":1},"arguments":{"a":2}}`: true,
		`{"name":"test_args","Arguments":{"a":1}}`:                     true,
		`{"name":"no_such_tool","arguments":{"a":1}}`:                  true,
		`{"name":"test_args","argumentſ":{"a":1}}`:                     true,
	}
	params := []string{
		`{"name":"test_args","arguments":{"a":1,"b":[true,null,{"c":"d"}]}}`,
		`{"arguments" : { "s" : "\u00e9\"\\\t<>&\ud83d\ude00" , "n":-0.5e3 } ,"name":"test_args"}`,
		`{"_meta":{"k":{"x":1}},"name":"test_args","arguments":{"x":1}}`,
		`{"name":"test_args","arguments":{"x":"` + "bad \xff utf-8" + `"}}`,
		`{"name":"test_args","arguments":{"n":12345678901234567890}}`,
		`{"name":"test_args","arguments":{}}`,
		`{"name":"test_args","arguments":[1,2]}`,
		`{"name":"test_args","arguments":"text"}`,
		`{"name":"test_args","arguments":null}`,
		`{"name":"test_args"}`,
		`{"name":"test_args","arguments":{"e2b-mcp":"the arguments are kept by the server's front"}}`,
		`{"name":"test_args","arguments":{"a":1},"task":{"ttl":1000}}`,
		`{"name":"test_args","argument\u0073":{"a":1}}`,
		`{"name":"test_args","é":1,"arguments":{"a":1}}`,
		`{"name":"test_args","arguments":{"a":[1,{"b":"}]\\"},-2e-3,"\\\"{"],"c":true,"d":null}}`,
		`{"name":"test_args","arguments":{"a":"x"}` + "\t\r " + `}`,
	}
	for p := range refused {
		params = append(params, p)
	}
	for i, p := range params {
		id := 10 + i
		line := `{"jsonrpc":"2.0","id":` + strconv.Itoa(id) + `,"method":"tools/call","params":` + p + `}`
		got := send(id, line)
		if refused[p] {
			direct, _ := json.Marshal(f.srv.mcp.HandleMessage(t.Context(), []byte(line)))
			var want map[string]any
			if err := json.Unmarshal(direct, &want); err != nil {
				t.Fatal(err)
			}
			if got["error"] == nil || !reflect.DeepEqual(got["error"], want["error"]) {
				t.Errorf("%s: answered %v, mcp-go refuses the line with %v", p, got, want["error"])
			}
			continue
		}
		if got["error"] != nil {
			t.Errorf("%s: refused with %v", p, got["error"])
			continue
		}
		var want mcp.CallToolRequest
		if err := json.Unmarshal([]byte(line), &want); err != nil {
			t.Fatal(err)
		}
		req := waitfor.Recv(t, calls, time.Minute, "the tool's call of "+p)
		if !reflect.DeepEqual(req.Params, want.Params) {
			t.Errorf("%s: the tool got\n%+v\nmcp-go decodes\n%+v", p, req.Params, want.Params)
		}
	}
}

// countedReader counts the reads made of it.
type countedReader struct {
	r     io.Reader
	reads atomic.Int32
}

func (c *countedReader) Read(p []byte) (int, error) {
	c.reads.Add(1)
	return c.r.Read(p)
}

// A line of a megabyte is read in a few reads of the input (each of them a system call on a pipe), not hundreds.
func TestReadLinesReadsABigLineInFewReads(t *testing.T) {
	big := strings.Repeat("x", 1<<20) + "\n"
	in := &countedReader{r: strings.NewReader(big)}
	lines := readLines(t.Context(), in)
	if line := waitfor.Recv(t, lines.lines, time.Minute, "the line"); string(line) != big {
		t.Fatalf("read %d bytes, want the %d of the line", len(line), len(big))
	}
	if n := in.reads.Load(); n > 20 {
		t.Errorf("the line took %d reads", n)
	}
}

// mcp-go's hooks that are given a tool call's message or request run before the call pipeline puts back the
// arguments a front took out of it (jsonrpc.TakeArguments): they would see the stand-in. The server installs none.
func TestNoMCPGoHookSeesATakenCall(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	h := f.srv.mcp.GetHooks()
	for name, n := range map[string]int{
		"OnBeforeAny": len(h.OnBeforeAny), "OnSuccess": len(h.OnSuccess), "OnError": len(h.OnError),
		"OnRequestInitialization": len(h.OnRequestInitialization), "OnBeforeCallTool": len(h.OnBeforeCallTool),
		"OnAfterCallTool": len(h.OnAfterCallTool),
	} {
		if n > 0 {
			t.Errorf("the server installs %d %s hooks, which would see a tool call without its arguments", n, name)
		}
	}
}

// heldCalls is a tool that holds each call until the test releases it, and keeps the order the calls started in.
type heldCalls struct {
	mu      sync.Mutex
	started []int // each call's argument n, in the order they started
	release map[int]chan struct{}
}

func holdingTool(srv *Server) *heldCalls {
	h := &heldCalls{release: map[int]chan struct{}{}}
	srv.mcp.AddTool(mcp.NewTool("test_hold"), func(ctx context.Context,
		req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		n := req.GetInt("n", -1)
		h.mu.Lock()
		h.started = append(h.started, n)
		release := h.gate(n)
		h.mu.Unlock()
		select {
		case <-release:
			return mcp.NewToolResultText("released"), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	return h
}

// gate is call n's release; h.mu is held.
func (h *heldCalls) gate(n int) chan struct{} {
	if h.release[n] == nil {
		h.release[n] = make(chan struct{})
	}
	return h.release[n]
}

func (h *heldCalls) free(n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	close(h.gate(n))
}

func (h *heldCalls) startedCalls() []int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]int(nil), h.started...)
}

// Tool calls are served by five workers at once and up to a hundred more wait for one, as mcp-go's stdio
// transport serves them; past that the front reads no more lines until a call ends, so that a client cannot make
// the server hold any number of calls (back-pressure). Ordinary requests are served beside the tool calls.
func TestStdioToolCallsTakeTurns(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	held := holdingTool(f.srv)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	toMCP, fromFront := io.Pipe()
	go func() { _, _ = io.Copy(io.Discard, toMCP) }()
	front := newStdioFront(f.srv, &stdioOut{w: outW}, fromFront)
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { front.serve(ctx, inR); close(served) }()
	answers := make(chan int, 256)
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			var m struct{ ID int }
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				answers <- m.ID
			}
		}
	}()
	t.Cleanup(func() {
		stop()
		inW.Close()
		waitfor.Recv(t, served, time.Minute, "the front to stop")
		outR.Close()
	})
	send := func(lines ...string) {
		t.Helper()
		if _, err := inW.Write([]byte(strings.Join(lines, "\n") + "\n")); err != nil {
			t.Fatal(err)
		}
	}
	call := func(n int) string {
		return `{"jsonrpc":"2.0","id":` + strconv.Itoa(n) + `,"method":"tools/call","params":{"name":"test_hold",` +
			`"arguments":{"n":` + strconv.Itoa(n) + `}}}`
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},`+
		`"clientInfo":{"name":"turns-test","version":"1"}}}`, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if id := waitfor.Recv(t, answers, time.Minute, "the answer to initialize"); id != 1 {
		t.Fatalf("answered %d before initialize", id)
	}

	// Six calls: five run, the sixth waits.
	for n := 1001; n <= 1006; n++ {
		send(call(n))
	}
	waitfor.Until(t, time.Minute, "five calls to run and a sixth to run or wait", func() bool {
		running := len(held.startedCalls())
		return running >= 5 && running+len(front.toolCalls) >= 6
	})
	if got := held.startedCalls(); len(got) != 5 || len(front.toolCalls) != 1 {
		t.Fatalf("of six calls %d run at once (%v) and %d wait; want 5 and 1", len(got), got, len(front.toolCalls))
	}
	// A ping is answered beside them, as is any request that is not a tool call.
	send(`{"jsonrpc":"2.0","id":2,"method":"ping"}`)
	if id := waitfor.Recv(t, answers, time.Minute, "the answer to a ping beside the calls"); id != 2 {
		t.Fatalf("answered %d, want the ping's 2", id)
	}

	// Ninety-nine more fill the queue; the next call holds the front, and the ping behind it is read only once a
	// call ends and a waiting one starts.
	for n := 1007; n <= 1105; n++ {
		send(call(n))
	}
	waitfor.Until(t, time.Minute, "a hundred calls to wait", func() bool { return len(front.toolCalls) >= 100 })
	if len(front.toolCalls) != 100 {
		t.Fatalf("%d calls wait, want 100", len(front.toolCalls))
	}
	send(call(1106), `{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	first := held.startedCalls()[0]
	held.free(first)
	if id := waitfor.Recv(t, answers, time.Minute, "the answer to the released call"); id != first {
		t.Fatalf("answered %d before the released call %d: the front read past a full queue", id, first)
	}
	if id := waitfor.Recv(t, answers, time.Minute, "the answer to the ping behind the full queue"); id != 3 {
		t.Fatalf("answered %d, want the ping's 3", id)
	}
	waitfor.Until(t, time.Minute, "the first waiting call to start", func() bool {
		return len(held.startedCalls()) > 5
	})
	if got := held.startedCalls(); len(got) != 6 || got[5] != 1006 {
		t.Fatalf("after one call ended the calls started were %v; want the five first, then 1006", got)
	}
	waitfor.Until(t, time.Minute, "the call that held the front to wait", func() bool {
		return len(front.toolCalls) == 100
	})
}

// A stdio client's session ends as a server process's does when it exits: the client reads the end of the server's
// output (io.EOF), which mcp-go's client takes as the session's end, not as an error it logs ("Error reading from
// stdout"), as it does io.ErrClosedPipe.
func TestStdioClientReadsTheEndOfOutput(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	var ended <-chan error
	t.Run("session", func(t *testing.T) {
		var c *client.Client
		c, ended = stdioClientEnding(t, f.srv)
		if _, err := c.ListTools(t.Context(), mcp.ListToolsRequest{}); err != nil {
			t.Fatal(err)
		}
	})
	if err := waitfor.Recv(t, ended, time.Minute, "the client's reading to end"); err != io.EOF {
		t.Errorf("the client's reading of the server's output ended with %v, want io.EOF", err)
	}
}
