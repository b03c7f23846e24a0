package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"sync"
	"time"

	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/e2b-mcp/e2b-mcp/tools"
)

// RunStdio builds the server with build and serves MCP over stdio, answering from the first moment. Building
// takes the state store, the policy, the approvals and the audit log, and the local backend's emulator and
// store: hundreds of milliseconds on a loaded machine, after which a client has already picked an older
// protocol or started without the server's tools. So while it builds, a client's initialize, server/discover
// and ping are answered by a server of the same name, version, capabilities and instructions that holds nothing
// else (earlyMethods); every other message waits for the server. The server is then handed the client's
// messages in their order, the early requests included, so that it knows the client (its protocol version and
// clientInfo) as if it had answered them itself; its answers to them, which the client has had, are dropped.
func RunStdio(ctx context.Context, cfg Config, stdin io.Reader, stdout io.Writer,
	build func(Config) (*Server, error)) error {
	checked, err := cfg.Check()
	if err != nil {
		return err
	}
	early := mcpserver.NewMCPServer(checked.Name, checked.Version, identityOptions()...)
	out := &stdioOut{w: stdout}
	answered := &droppedAnswers{w: out, ids: map[string]bool{}}

	// The build starts once the client's first message is answered or queued: on a loaded machine it would
	// otherwise take the CPU the first answer needs. A client that says nothing for buildAfter does not hold it
	// back further (the server's background work, a sweep of lapsed sessions, starts with it).
	built := make(chan buildResult, 1)
	startBuild := sync.OnceFunc(func() {
		go func() {
			s, err := build(cfg)
			built <- buildResult{s, err}
		}()
	})
	timer := time.AfterFunc(buildAfter, startBuild)
	defer timer.Stop()
	lines := make(chan []byte)
	var inputErr error // set before lines closes
	go func() {
		defer close(lines)
		r := bufio.NewReader(stdin)
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 {
				select {
				case lines <- line:
				case <-ctx.Done():
					return
				}
			}
			if err != nil {
				inputErr = err
				return
			}
		}
	}()

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
				answer := early.HandleMessage(ctx, line)
				b, err := json.Marshal(answer)
				if err != nil {
					return err
				}
				if _, err := out.Write(append(b, '\n')); err != nil {
					return err
				}
				if method == "ping" {
					continue // the server need not see it
				}
				answered.drop(id)
			}
			pending = append(pending, line)
			startBuild()
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
				fromFront.CloseWithError(inputErr) // nil and io.EOF alike read as the end of input
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

// earlyMethods are the requests answered while the server is built: they depend on nothing but its identity.
var earlyMethods = map[string]bool{"initialize": true, "server/discover": true, "ping": true}

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
