package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/internal/ssetest"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

var orderCalls = flag.Int("order-calls", 1000, "calls with progress per transport in TestProgressBeforeResponse")

// frame is one JSON-RPC message as the server wrote it, on the stream it wrote it.
type frame struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Result json.RawMessage `json:"result"`
	Params struct {
		ProgressToken any `json:"progressToken"`
	} `json:"params"`
}

// orderCheck reads the raw streams a server wrote and finds the notifications that broke the order: one of a call
// written after the call's response, or on a stream that does not carry the call's response.
type orderCheck struct {
	mu         sync.Mutex
	responded  map[string]bool // progress token (= "p-" + the call's ID) → the response is in
	progress   map[string]int  // progress token → notifications seen
	violations []string
}

func newOrderCheck() *orderCheck {
	return &orderCheck{responded: map[string]bool{}, progress: map[string]int{}}
}

// read checks the frames of one stream in the order they were written. want is the progress token of the one call
// whose response the stream carries ("" for stdio, which carries every call's).
func (o *orderCheck) read(stream string, frames []frame, want string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, f := range frames {
		switch {
		case f.Method == string(mcp.MethodNotificationProgress):
			tok := fmt.Sprint(f.Params.ProgressToken)
			o.progress[tok]++
			if o.responded[tok] {
				o.violations = append(o.violations, fmt.Sprintf("%s: a notification of %s after its response", stream, tok))
			}
			if want != "" && tok != want {
				o.violations = append(o.violations, fmt.Sprintf("%s: a notification of %s on the stream of %s", stream, tok, want))
			}
		case len(f.Result) > 0:
			var id string
			if json.Unmarshal(f.ID, &id) == nil && strings.HasPrefix(id, "call-") {
				o.responded["p-"+id] = true
			}
		}
	}
}

// check fails t for every violation, and for calls that got no notification (the test would prove nothing).
func (o *orderCheck) check(t *testing.T, calls int) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	for i, v := range o.violations {
		if i == 20 {
			t.Errorf("... and %d more", len(o.violations)-20)
			break
		}
		t.Error(v)
	}
	total := 0
	for _, n := range o.progress {
		total += n
	}
	if len(o.responded) != calls {
		t.Errorf("%d responses of %d calls", len(o.responded), calls)
	}
	if len(o.progress) < calls {
		t.Errorf("only %d of %d calls sent progress", len(o.progress), calls)
	}
	t.Logf("%d calls, %d progress notifications, %d out of order", calls, total, len(o.violations))
}

// callsWithProgress makes n e2b_exec calls with progress tokens ("p-call-N"), eight at a time, each of them
// printing output just before it ends, when its last notification races its response.
func callsWithProgress(t *testing.T, c *client.Client, version, id string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	work := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range work {
				callID := fmt.Sprintf("call-%d", i)
				res, err := c.GetTransport().SendRequest(t.Context(), transport.JSONRPCRequest{
					JSONRPC: mcp.JSONRPC_VERSION,
					ID:      mcp.NewRequestId(callID),
					Method:  string(mcp.MethodToolsCall),
					Header:  http.Header{mcp.HeaderMethod: {string(mcp.MethodToolsCall)}, mcp.HeaderName: {"e2b_exec"}},
					Params: withProtocolMeta(version, map[string]any{"name": "e2b_exec",
						"arguments": map[string]any{"sandbox_id": id, "command": "echo one; echo two"},
						"_meta":     map[string]any{"progressToken": "p-" + callID}}),
				})
				if err != nil || res.Error != nil {
					t.Errorf("%s: %v %+v", callID, err, res.Error)
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	waitfor.Return(t, 2*time.Minute, "the concurrent calls to be answered", wg.Wait)
}

// withProtocolMeta adds to params the _meta fields that protocol 2026-07-28 wants on every request (the client
// adds them itself to the requests it makes, not to those sent through its transport).
func withProtocolMeta(version string, params map[string]any) map[string]any {
	if version != mcp.ProtocolVersion20260728 {
		return params
	}
	meta := params["_meta"].(map[string]any)
	meta[mcp.MetaKeyProtocolVersion] = mcp.ProtocolVersion20260728
	meta[mcp.MetaKeyClientInfo] = map[string]any{"name": "order-test", "version": "1"}
	meta[mcp.MetaKeyClientCapabilities] = map[string]any{}
	return params
}

// No notification of a call is written after the call's response, nor on a stream that does not carry its
// response: over stdio and SSE (one stream each) and streamable HTTP in both eras (a POST's stream per call, and in
// 2025-11-25 the session's GET stream beside them), read raw as the server wrote them, over many concurrent calls.
func TestProgressBeforeResponse(t *testing.T) {
	t.Run("stdio", func(t *testing.T) {
		f := newFixture(t, fixtureOpts{mutate: func(c *Config, _ *e2btest.Server) { c.Tools.ProgressInterval = time.Millisecond }})
		inR, inW := io.Pipe()
		outR, outW := io.Pipe()
		ctx, stop := context.WithCancel(context.Background())
		served := make(chan error, 1)
		go func() { served <- f.srv.ServeStdio(ctx, inR, outW) }()
		t.Cleanup(func() {
			stop()
			inW.Close()
			waitfor.Recv(t, served, 30*time.Second, "the stdio server to stop")
		})
		check := newOrderCheck()
		clientR, clientW := io.Pipe()
		raw := make(chan struct{})
		go func() {
			// Every line the server wrote, checked in its order, then handed on to the client.
			defer close(raw)
			sc := bufio.NewScanner(outR)
			sc.Buffer(nil, 16<<20)
			for sc.Scan() {
				var fr frame
				if json.Unmarshal(sc.Bytes(), &fr) == nil {
					check.read("stdout", []frame{fr}, "")
				}
				if _, err := clientW.Write(append(sc.Bytes(), '\n')); err != nil {
					return
				}
			}
			clientW.Close()
		}()
		c := client.NewClient(transport.NewIO(clientR, inW, io.NopCloser(strings.NewReader(""))))
		initialize(t, c, mcp.ProtocolVersion20251125)
		id := createSandbox(t, c)
		callsWithProgress(t, c, mcp.ProtocolVersion20251125, id, *orderCalls)
		check.check(t, *orderCalls)
	})

	for _, version := range eras {
		t.Run("http-"+version, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{transport: TransportHTTP, mutate: func(c *Config, _ *e2btest.Server) { c.Tools.ProgressInterval = time.Millisecond }})
			base := serveHTTP(t, f)
			check := newOrderCheck()
			rec := &rawStreams{next: http.DefaultTransport, check: check}
			opts := []transport.StreamableHTTPCOption{transport.WithHTTPBasicClient(&http.Client{Transport: rec})}
			if version != mcp.ProtocolVersion20260728 {
				//lint:ignore SA1019 a 2025-era client opens the standalone GET stream, which is what this era tests
				opts = append(opts, transport.WithContinuousListening())
			}
			tr, err := transport.NewStreamableHTTP(base+PathMCP, opts...)
			if err != nil {
				t.Fatal(err)
			}
			c := client.NewClient(tr, client.WithProtocolVersion(version))
			initialize(t, c, version)
			id := createSandbox(t, c)
			callsWithProgress(t, c, version, id, *orderCalls)
			c.Close()
			rec.wait(t)
			check.check(t, *orderCalls)
		})
	}

	t.Run("sse", func(t *testing.T) {
		f := newFixture(t, fixtureOpts{transport: TransportSSE, mutate: func(c *Config, _ *e2btest.Server) { c.Tools.ProgressInterval = time.Millisecond }})
		base := serveHTTP(t, f)
		check := newOrderCheck()
		rec := &rawStreams{next: http.DefaultTransport, check: check}
		c, err := client.NewSSEMCPClient(base+PathSSE, transport.WithHTTPClient(&http.Client{Transport: rec}))
		if err != nil {
			t.Fatal(err)
		}
		initialize(t, c, mcp.ProtocolVersion20251125)
		id := createSandbox(t, c)
		callsWithProgress(t, c, mcp.ProtocolVersion20251125, id, *orderCalls)
		c.Close()
		rec.wait(t)
		check.check(t, *orderCalls)
	})
}

// rawStreams is an HTTP client transport that hands every response body, as the server wrote it, to an
// orderCheck once it is read to its end.
type rawStreams struct {
	next  http.RoundTripper
	check *orderCheck
	wg    sync.WaitGroup
}

func (r *rawStreams) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		var err error
		if body, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	resp, err := r.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	// The call this POST carries: its stream may hold its notifications only.
	var sent struct {
		ID json.RawMessage `json:"id"`
	}
	want, stream := "", req.Method+" "+req.URL.Path
	if req.Method == http.MethodPost && req.URL.Path == PathMCP && json.Unmarshal(body, &sent) == nil {
		var id string
		if json.Unmarshal(sent.ID, &id) == nil && strings.HasPrefix(id, "call-") {
			want, stream = "p-"+id, "POST of "+id
		} else {
			want = "(none)"
		}
	}
	r.wg.Add(1)
	resp.Body = &teeBody{ReadCloser: resp.Body, done: func(b []byte) {
		defer r.wg.Done()
		r.check.read(stream, framesOf(resp.Header.Get("Content-Type"), b), want)
	}}
	return resp, nil
}

// wait waits for every response body to be read to its end.
func (r *rawStreams) wait(t *testing.T) {
	t.Helper()
	waitfor.Return(t, time.Minute, "every response stream to be read to its end", r.wg.Wait)
}

// framesOf splits a response body into its JSON-RPC messages: the data of each SSE event, or the one JSON body.
func framesOf(contentType string, b []byte) []frame {
	var out []frame
	for _, msg := range ssetest.Messages(contentType, b) {
		var f frame
		if json.Unmarshal(msg, &f) == nil {
			out = append(out, f)
		}
	}
	return out
}

// teeBody keeps what is read of a body and hands it over once, at its end or when it is closed. The client
// closes a body from one goroutine while another still reads it, so buf is guarded.
type teeBody struct {
	io.ReadCloser
	mu   sync.Mutex
	buf  bytes.Buffer
	once sync.Once
	done func([]byte)
}

func (b *teeBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.mu.Lock()
	b.buf.Write(p[:n])
	b.mu.Unlock()
	if err != nil {
		b.handOver()
	}
	return n, err
}

func (b *teeBody) Close() error {
	err := b.ReadCloser.Close()
	b.handOver()
	return err
}

func (b *teeBody) handOver() {
	b.once.Do(func() {
		b.mu.Lock()
		read := bytes.Clone(b.buf.Bytes())
		b.mu.Unlock()
		b.done(read)
	})
}
