package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/internal/jsonrpc"
	"github.com/e2b-mcp/e2b-mcp/server/tasks"
)

// The stdio transport's front. mcp-go's stdio transport parses every line five times before its handler parses it
// again: once to check it, three times to ask whether it answers one of the server's requests (sampling,
// elicitation, roots) and once for its method and ID; an e2b_write_file of 1 MiB paid each pass over the
// megabyte. So the front reads the client's lines itself, parses each once (method, ID, what the Tasks extension
// and a cancel need of its params, and a tool call's arguments) and hands requests and notifications to mcp-go's
// handler (MCPServer.HandleMessage) directly, on the context of mcp-go's stdio session. Only what must reach
// mcp-go's transport goes there: the client's answers to the server's requests (an approval asked by elicitation),
// which its session waits for, and the lines the front cannot read, which mcp-go answers as it always did. A tool
// call's arguments are kept out of what mcp-go's handler parses (jsonrpc.TakeArguments).

// Tool calls are served by stdioToolWorkers at once, and up to stdioToolQueue more wait for one, as mcp-go's
// stdio transport serves them; past that the front reads no more lines until a call ends.
const (
	stdioToolWorkers = 5
	stdioToolQueue   = 100
)

// stdioMessage is what the front reads of a line.
type stdioMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		tasks.Params
		RequestID json.RawMessage `json:"requestId"` // a notifications/cancelled's
		Cursor    json.RawMessage `json:"cursor"`    // a list's
		Arguments any             `json:"arguments"` // a tools/call's, decoded once (see jsonrpc.TakeArguments)
	} `json:"params"`
}

// task is the message as the Tasks extension reads it.
func (m *stdioMessage) task() tasks.Message {
	return tasks.Message{ID: m.ID, Method: m.Method, Params: m.Params.Params}
}

// request reports whether the message is a request the front can hand on: a method and an ID that is a string
// or a number (anything else is mcp-go's to refuse).
func (m *stdioMessage) request() bool {
	return m.Method != "" && validID(m.ID)
}

// notification reports whether the message is a notification: a method and no ID.
func (m *stdioMessage) notification() bool {
	id := bytes.TrimSpace(m.ID)
	return m.Method != "" && (len(id) == 0 || bytes.Equal(id, []byte("null")))
}

func validID(raw json.RawMessage) bool {
	_, ok := jsonrpc.RequestKey(raw)
	return ok
}

// stdioFront serves the lines of a stdio client (see above).
type stdioFront struct {
	s     *Server
	out   *stdioOut
	toMCP *io.PipeWriter // mcp-go's stdio transport

	// The requests in flight, by jsonrpc.RequestKey, so that a cancel that follows its request at once finds it:
	// mcp-go registers a request for its cancels only once its handler starts, on another goroutine.
	mu      sync.Mutex
	running map[string]context.CancelFunc

	toolCalls chan func()
	requests  sync.WaitGroup // every request's goroutine, the workers' included
	lists     toolLists
}

func newStdioFront(s *Server, out *stdioOut, toMCP *io.PipeWriter) *stdioFront {
	return &stdioFront{s: s, out: out, toMCP: toMCP, running: map[string]context.CancelFunc{},
		toolCalls: make(chan func(), stdioToolQueue)}
}

// serve reads the client's lines from in until it ends or ctx does, on ctx (mcp-go's, which holds the stdio
// session). Then the requests in flight are cancelled and waited for, as mcp-go's transport does when its input
// ends, and mcp-go's transport is told the input ended.
func (f *stdioFront) serve(ctx context.Context, in io.Reader) {
	calls, cancelCalls := context.WithCancel(ctx)
	for range stdioToolWorkers {
		f.requests.Go(func() {
			for call := range f.toolCalls {
				call()
			}
		})
	}
	input := readLines(ctx, in)
	var err error
read:
	for {
		select {
		case line, ok := <-input.lines:
			if !ok {
				err = input.err
				break read
			}
			if !f.handle(ctx, calls, line) {
				break read // mcp-go stopped listening
			}
		case <-ctx.Done():
			err = ctx.Err()
			break read
		}
	}
	cancelCalls()
	close(f.toolCalls)
	f.requests.Wait()
	f.toMCP.CloseWithError(err) // io.EOF reads as the end of input
}

// handle hands on one line; false when mcp-go's transport no longer reads.
func (f *stdioFront) handle(ctx, calls context.Context, line []byte) bool {
	var m stdioMessage
	switch {
	case json.Unmarshal(line, &m) != nil:
		return f.forward(line)
	case m.notification():
		f.notify(ctx, m, line)
	case !m.request():
		return f.forward(line) // an answer to the server's request, or a message mcp-go refuses
	case f.s.tasks.Takes(m.task()):
		// The extension's calls are not mcp-go's: they end with their task, not with the input.
		f.requests.Go(func() { f.write(f.s.tasks.Answer(ctx, m.task(), line)) })
	default:
		f.start(calls, m, line)
	}
	return true
}

// forward writes line to mcp-go's transport.
func (f *stdioFront) forward(line []byte) bool {
	if len(line) == 0 || line[len(line)-1] != '\n' {
		line = append(line, '\n')
	}
	_, err := f.toMCP.Write(line)
	return err == nil
}

// notify hands a notification to mcp-go before the next line is read, as its transport does; a cancel also
// cancels its request here, which mcp-go may not have registered yet.
func (f *stdioFront) notify(ctx context.Context, m stdioMessage, line []byte) {
	if m.Method == string(mcp.MethodNotificationCancelled) {
		if key, ok := jsonrpc.RequestKey(m.Params.RequestID); ok {
			f.mu.Lock()
			cancel := f.running[key]
			f.mu.Unlock()
			if cancel != nil {
				cancel()
			}
		}
	}
	f.recovered(m.ID, func() []byte {
		f.s.mcp.HandleMessage(ctx, line) // nothing to answer
		return nil
	})
}

// start registers a request and serves it on a goroutine of its own, a tool call on one of the workers.
func (f *stdioFront) start(calls context.Context, m stdioMessage, line []byte) {
	key, _ := jsonrpc.RequestKey(m.ID)
	ctx, cancel := context.WithCancel(calls)
	f.mu.Lock()
	_, dup := f.running[key]
	if !dup { // a duplicate ID is mcp-go's to refuse, and must not take the first request's cancel
		f.running[key] = cancel
	}
	f.mu.Unlock()
	answer := func(ctx context.Context) []byte {
		switch m.Method {
		case string(mcp.MethodToolsList):
			return f.lists.answer(ctx, f.s, &m, line)
		case string(mcp.MethodToolsCall):
			ctx, line, _ := jsonrpc.TakeArguments(ctx, line, m.Params.Arguments)
			return answerOf(m.ID, f.s.mcp.HandleMessage(ctx, line))
		}
		return answerOf(m.ID, f.s.mcp.HandleMessage(ctx, line))
	}
	call := func() {
		defer cancel()
		if !dup {
			defer func() {
				f.mu.Lock()
				delete(f.running, key)
				f.mu.Unlock()
			}()
		}
		f.write(f.recovered(m.ID, func() []byte { return answer(ctx) }))
	}
	if m.Method == string(mcp.MethodToolsCall) {
		f.toolCalls <- call
		return
	}
	f.requests.Go(call)
}

// recovered is answer's answer; a panic is answered as an internal error to a request, as mcp-go's transport
// answers it.
func (f *stdioFront) recovered(id json.RawMessage, answer func() []byte) (b []byte) {
	defer func() {
		if r := recover(); r != nil {
			f.s.log.Error("a handler panicked", "panic", r)
			b = nil
			if validID(id) {
				b = jsonrpc.Error(id, mcp.INTERNAL_ERROR, fmt.Sprintf("internal panic: %v", r), nil)
			}
		}
	}()
	return answer()
}

// answerOf is resp as a line's bytes; nil for none.
func answerOf(id json.RawMessage, resp mcp.JSONRPCMessage) []byte {
	if resp == nil {
		return nil
	}
	return jsonrpc.Encode(id, resp)
}

// write writes an answer as one line; nil writes nothing.
func (f *stdioFront) write(answer []byte) {
	if answer == nil {
		return
	}
	if _, err := f.out.Write(append(answer, '\n')); err != nil {
		f.s.log.Warn("writing an answer to stdout", "error", err)
	}
}

// lineReader hands on a reader's lines, each with its '\n' (the last one may have none).
type lineReader struct {
	lines chan []byte // closed at the reader's end or error, or at ctx's end
	err   error       // why the reader ended (io.EOF at its end; nil when ctx ended first); set before lines closes
}

// lineReadSize is how much of the input one read takes: a pipe's capacity on Linux, so that a line of a megabyte
// is read in a few reads rather than hundreds.
const lineReadSize = 64 << 10

// readLines reads r's lines onto a channel until r ends or ctx does. A read of r cannot be interrupted: at ctx's
// end the goroutine is left to return on its own.
func readLines(ctx context.Context, r io.Reader) *lineReader {
	lr := &lineReader{lines: make(chan []byte)}
	go func() {
		defer close(lr.lines)
		br := bufio.NewReaderSize(r, lineReadSize)
		for {
			line, err := br.ReadBytes('\n')
			if len(line) > 0 {
				select {
				case lr.lines <- line:
				case <-ctx.Done():
					return
				}
			}
			if err != nil {
				lr.err = err
				return
			}
		}
	}()
	return lr
}
