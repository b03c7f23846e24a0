package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/e2b-mcp/e2b-mcp/tools"
)

// RunStdio builds the server with build and serves MCP over stdio, answering from the first moment. Building
// takes the state store, the policy, the approvals and the audit log, and the local backend's emulator and
// store: hundreds of milliseconds on a loaded machine, after which a client has already picked an older
// protocol or started without the server's tools. So while it builds, a client's initialize, server/discover,
// ping and tools/list are answered by a server of the same name, version, capabilities, instructions and tools,
// fitted to the client alike, that holds nothing else (earlyMethods, newEarlyServer); every other message waits
// for the server. The server is then handed the client's messages in their order, the early requests included
// (but for ping and tools/list, which change nothing), so that it knows the client (its protocol version and
// clientInfo) as if it had answered them itself; its answers to them, which the client has had, are dropped.
func RunStdio(ctx context.Context, cfg Config, stdin io.Reader, stdout io.Writer,
	build func(Config) (*Server, error)) error {
	checked, err := cfg.Check()
	if err != nil {
		return err
	}
	early := newEarlyServer(checked)
	earlyCtx := early.WithContext(ctx, &earlySession{})
	out := &stdioOut{w: stdout}
	answered := &droppedAnswers{w: out, ids: map[string]bool{}}

	// The build starts once the client has its tool list, or at its first message that needs the server: on a
	// loaded machine it would otherwise take the CPU the first answers need. A client that says nothing of either
	// for buildAfter does not hold it back further (the server's background work, a sweep of lapsed sessions,
	// starts with it).
	built := make(chan buildResult, 1)
	startBuild := sync.OnceFunc(func() {
		go func() {
			s, err := build(cfg)
			built <- buildResult{s, err}
		}()
	})
	timer := time.AfterFunc(buildAfter, startBuild)
	defer timer.Stop()
	input := readLines(ctx, stdin)
	lines := input.lines

	var pending [][]byte // the client's messages so far, for the server, in their order
	inputDone := false
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				lines, inputDone = nil, true
				startBuild()
				continue
			}
			if id, method, ok := requestOf(line); ok && earlyMethods[method] {
				answer := early.HandleMessage(earlyCtx, line)
				b, err := json.Marshal(answer)
				if err != nil {
					return err
				}
				if _, err := out.Write(append(b, '\n')); err != nil {
					return err
				}
				switch method {
				case string(mcp.MethodToolsList):
					startBuild()
					continue // the server need not see it
				case string(mcp.MethodPing):
					continue
				}
				answered.drop(id)
				pending = append(pending, line)
				continue
			}
			pending = append(pending, line)
			if _, _, ok := requestOf(line); ok {
				startBuild()
			}
		case b := <-built:
			if b.err != nil {
				return b.err
			}
			defer b.s.Close()
			toServer, fromFront := io.Pipe()
			go func() {
				for _, line := range pending {
					if _, err := fromFront.Write(line); err != nil {
						return
					}
				}
				if !inputDone {
					for line := range lines {
						if _, err := fromFront.Write(line); err != nil {
							return
						}
					}
				}
				fromFront.CloseWithError(input.err) // nil and io.EOF alike read as the end of input
			}()
			return b.s.Run(ctx, toServer, answered)
		case <-ctx.Done():
			go func() {
				if b := <-built; b.s != nil {
					b.s.Close()
				}
			}()
			return nil
		}
	}
}

// buildAfter is how long the build waits for a client's first message.
const buildAfter = 200 * time.Millisecond

type buildResult struct {
	s   *Server
	err error
}

// earlyMethods are the requests answered while the server is built: they depend on nothing but its identity and
// its tools.
var earlyMethods = map[string]bool{"initialize": true, "server/discover": true, "ping": true, "tools/list": true}

// newEarlyServer is the server that answers earlyMethods while the server of cfg is built: its identity, and its
// tools fitted to the client as the server fits them (toolsFor), with handlers that are never called.
func newEarlyServer(cfg Config) *mcpserver.MCPServer {
	all := tools.All(tools.Deps{Config: cfg.Tools})
	images := make(map[string]bool, len(all))
	for _, t := range all {
		images[t.Tool.Name] = t.Images
	}
	fit := func(ctx context.Context, list []mcp.Tool) []mcp.Tool {
		return fitTools(ctx, cfg, func(name string) bool { return images[name] }, list)
	}
	m := mcpserver.NewMCPServer(cfg.Name, cfg.Version, append(identityOptions(), mcpserver.WithToolFilter(fit))...)
	m.AddTools(tools.ServerTools(all)...)
	return m
}

// earlySession is the early server's session of the client: it keeps what the client's initialize says it is,
// which the tool list is fitted to.
type earlySession struct {
	mu   sync.Mutex
	info mcp.Implementation
	caps mcp.ClientCapabilities
}

func (*earlySession) Initialize()                                         {}
func (*earlySession) Initialized() bool                                   { return true }
func (*earlySession) NotificationChannel() chan<- mcp.JSONRPCNotification { return nil }
func (*earlySession) SessionID() string                                   { return "stdio-early" }

func (e *earlySession) GetClientInfo() mcp.Implementation {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.info
}

func (e *earlySession) SetClientInfo(info mcp.Implementation) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.info = info
}

func (e *earlySession) GetClientCapabilities() mcp.ClientCapabilities {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.caps
}

func (e *earlySession) SetClientCapabilities(caps mcp.ClientCapabilities) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.caps = caps
}

// identityOptions are what an initialize or server/discover answer is made of: the same for the server and for
// the answers given while it is built.
func identityOptions() []mcpserver.ServerOption {
	return []mcpserver.ServerOption{
		mcpserver.WithRecovery(),
		mcpserver.WithToolCapabilities(false),
		mcpserver.WithInstructions(instructions),
		mcpserver.WithResourceRecovery(),
		mcpserver.WithResourceCapabilities(false, false),
		mcpserver.WithExtensions(map[string]any{tools.TasksExtension: map[string]any{}}),
	}
}

// requestOf reads a JSON-RPC request's id and method; ok is false for anything else (a notification, an answer).
func requestOf(line []byte) (id, method string, ok bool) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal(line, &m) != nil || len(m.ID) == 0 || m.Method == "" {
		return "", "", false
	}
	return string(bytes.TrimSpace(m.ID)), m.Method, true
}

// droppedAnswers writes the server's messages to w, but for its answers to the requests answered early: each of
// those ids is dropped once. The server writes each message with one Write (see stdioOut).
type droppedAnswers struct {
	w   io.Writer
	mu  sync.Mutex
	ids map[string]bool
}

func (d *droppedAnswers) drop(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ids[id] = true
}

func (d *droppedAnswers) Write(p []byte) (int, error) {
	d.mu.Lock()
	waiting := len(d.ids) > 0
	d.mu.Unlock()
	if waiting {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(p, &m) == nil && m.Method == "" && len(m.ID) > 0 {
			id := string(bytes.TrimSpace(m.ID))
			d.mu.Lock()
			dropped := d.ids[id]
			delete(d.ids, id)
			d.mu.Unlock()
			if dropped {
				return len(p), nil
			}
		}
	}
	return d.w.Write(p)
}
