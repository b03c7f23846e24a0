// Package tasks answers MCP's Tasks extension (io.modelcontextprotocol/tasks, SEP-2663) of protocol 2026-07-28 in
// front of mcp-go. A client that declares the extension in a request's client capabilities may get a task instead
// of a tool's result: the call waits tools.Config.TaskWait for its command, and a command still running then goes
// on in the background while the client follows it with tasks/get and may stop it with tasks/cancel.
//
// mcp-go v1.6.0 serves only the tasks of 2025-11-25 (requested with params.task, kept in its memory, read with
// tasks/result), so all of this is ours: the transports show each message to Tasks first (stdio: the server's
// front asks Takes, and has Answer answer; HTTP: the HTTP handler), which answers those it takes. It takes the
// tools/call requests that declare the extension for a tool that can answer with a task, and the extension's
// tasks/get, tasks/update and tasks/cancel; every other message goes to mcp-go as before. A tools/call it takes
// still goes through mcp-go and the whole call pipeline (policy, approval, audit: one call), with a
// tools.TaskOffer on its context. A task is a record in the state store, and its command's output and exit code
// are in files in the sandbox, so any server sharing the store answers for it, after a restart too. A call that
// only its server can finish (tools.TaskOfServer) is held by that server (held.go).
package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/internal/jsonrpc"
	"github.com/e2b-mcp/e2b-mcp/state"
	"github.com/e2b-mcp/e2b-mcp/tools"
)

const (
	// taskTTL is how long a task is kept from its creation; its command is not bounded by it.
	taskTTL = 24 * time.Hour
	// pollInterval is the polling interval tasks suggest: each tasks/get of a working task asks the sandbox.
	pollInterval = time.Second
	// CodeMissingCapability is the JSON-RPC error of a request that needs a capability the client did not declare.
	CodeMissingCapability = -32021
	// methodUpdate is the Tasks extension's method for input to a task; mcp-go has no name for it.
	methodUpdate = "tasks/update"
	// resultTypeTask is the result type of a result that is a task.
	resultTypeTask mcp.ResultType = "task"
)

// Calls run a JSON-RPC message through mcp-go, and so through the server's call pipeline
// (mcpserver.MCPServer).
type Calls interface {
	HandleMessage(ctx context.Context, raw json.RawMessage) mcp.JSONRPCMessage
}

// Records are the tasks' records in the state store (state.Store).
type Records interface {
	PutTask(t state.Task) error
	Task(owner, id string) (state.Task, error)
	UpdateTask(owner, id string, fn func(*state.Task) error) (state.Task, error)
}

// Commands answer for the commands that tasks of tools.TaskOfCommand follow, from the sandbox they run in
// (tools.TaskCommands).
type Commands interface {
	Outcome(ctx context.Context, call tools.Caller, t state.Task) (res *mcp.CallToolResult, done bool, err error)
	Stop(ctx context.Context, call tools.Caller, t state.Task) error
}

// Options are what Tasks need. All are required but Wait, Now and Log.
type Options struct {
	Calls    Calls
	Records  Records
	Commands Commands
	// Kind says how a tool's calls may become tasks (tools.Tool.Tasks); tools.NoTasks for a name it does not know.
	Kind func(tool string) tools.TaskKind
	// Caller is the caller of a request, an error when it carries none it may act for.
	Caller func(ctx context.Context) (tools.Caller, error)
	// Client is the client of a request, whose size a task's result is cut to as the call's would have been.
	Client func(ctx context.Context) tools.Client
	Wait   time.Duration    // how long a held call runs before it becomes a task; 0: tools.DefaultTaskWait
	Now    func() time.Time // default time.Now
	Log    *slog.Logger     // default slog.Default()
}

// Tasks answer the Tasks extension's messages.
type Tasks struct {
	o       Options
	runners *runners
}

// New makes the Tasks of o.
func New(o Options) *Tasks {
	if o.Wait <= 0 {
		o.Wait = tools.DefaultTaskWait
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return &Tasks{o: o, runners: newRunners()}
}

// Message is what the Tasks read of a JSON-RPC message.
type Message struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params Params          `json:"params"`
}

// Params are what the Tasks read of a message's params.
type Params struct {
	Name           string          `json:"name"`
	TaskID         *string         `json:"taskId"`
	InputResponses json.RawMessage `json:"inputResponses"`
	Meta           *mcp.Meta       `json:"_meta"`
}

// modern reports whether the message is of protocol 2026-07-28, which carries the client's capabilities on
// every request; declares whether they name the Tasks extension.
func (m Message) modern() bool {
	return m.Params.Meta != nil && mcp.IsModernProtocol(m.Params.Meta.ProtocolVersion())
}

func (m Message) declares() bool {
	if !m.modern() {
		return false
	}
	caps := m.Params.Meta.ClientCapabilities()
	if caps == nil {
		return false
	}
	_, ok := caps.Extensions[tools.TasksExtension]
	return ok
}

// take reads the envelope of a POSTed message, and says whether the Tasks answer it (Takes). A message whose
// params.name or params.taskId is of the wrong type is not theirs: mcp-go refuses it.
func (ts *Tasks) take(p *jsonrpc.Posted) (m Message, ours bool) {
	if p.Err != nil {
		return m, false
	}
	e := &p.Envelope
	m = Message{ID: e.ID, Method: e.Method, Params: Params{InputResponses: e.Params.InputResponses, Meta: e.Params.Meta}}
	if len(e.Params.Name) > 0 && json.Unmarshal(e.Params.Name, &m.Params.Name) != nil ||
		len(e.Params.TaskID) > 0 && json.Unmarshal(e.Params.TaskID, &m.Params.TaskID) != nil {
		return m, false
	}
	return m, ts.Takes(m)
}

// Takes says whether m is the extension's to answer: a tools/call of protocol 2026-07-28 that declares the
// extension, of a tool that can answer with a task; or a request of the extension's methods of that protocol (the
// earlier one's tasks/ requests are mcp-go's).
func (ts *Tasks) Takes(m Message) bool {
	if len(m.ID) == 0 || !m.modern() {
		return false
	}
	switch m.Method {
	case string(mcp.MethodToolsCall):
		return m.declares() && ts.o.Kind(m.Params.Name) != tools.NoTasks
	case string(mcp.MethodTasksGet), string(mcp.MethodTasksCancel), methodUpdate:
		return true
	}
	return false
}

// Answer answers m, a message the Tasks take, whose bytes are raw, on the context of its request.
func (ts *Tasks) Answer(ctx context.Context, m Message, raw []byte) []byte {
	if m.Method == string(mcp.MethodToolsCall) {
		return ts.callMayBeTask(ctx, m, raw)
	}
	if !m.declares() {
		return jsonrpc.Error(m.ID, CodeMissingCapability, "Missing required client capability: "+m.Method+" is of the "+
			tools.TasksExtension+" extension, which this request did not declare",
			map[string]any{"requiredCapabilities": map[string]any{
				"extensions": map[string]any{tools.TasksExtension: map[string]any{}},
			}})
	}
	if m.Params.TaskID == nil || *m.Params.TaskID == "" {
		return jsonrpc.Error(m.ID, mcp.INVALID_PARAMS, m.Method+" needs params.taskId", nil)
	}
	caller, err := ts.o.Caller(ctx)
	if err != nil {
		return jsonrpc.Error(m.ID, mcp.INVALID_REQUEST, err.Error(), nil)
	}
	t, err := ts.find(caller, *m.Params.TaskID)
	if err != nil {
		code := mcp.INTERNAL_ERROR
		if errors.Is(err, errNoTask) {
			code = mcp.INVALID_PARAMS
		}
		return jsonrpc.Error(m.ID, code, "Failed to retrieve task: "+err.Error(), nil)
	}
	switch m.Method {
	case string(mcp.MethodTasksGet):
		t = ts.follow(ctx, caller, t)
		return jsonrpc.Result(m.ID, answerOf(t, mcp.ResultTypeComplete))
	case string(mcp.MethodTasksCancel):
		if err := ts.cancel(ctx, caller, t); err != nil {
			return jsonrpc.Error(m.ID, mcp.INTERNAL_ERROR, "The task's command could not be stopped: "+err.Error(), nil)
		}
		return jsonrpc.Result(m.ID, map[string]any{"resultType": mcp.ResultTypeComplete})
	default: // tasks/update
		// No task of this server asks for input (an approval is asked before the call becomes a task), so no
		// response is to a request outstanding, and the extension says to ignore those.
		if len(m.Params.InputResponses) > 0 && !strings.HasPrefix(strings.TrimSpace(string(m.Params.InputResponses)), "{") {
			return jsonrpc.Error(m.ID, mcp.INVALID_PARAMS, "tasks/update needs params.inputResponses to be an object", nil)
		}
		return jsonrpc.Result(m.ID, map[string]any{"resultType": mcp.ResultTypeComplete})
	}
}

// callMayBeTask runs a tools/call offered a task through mcp-go, and answers with a task when the call took the
// offer, else with the call's own response.
func (ts *Tasks) callMayBeTask(ctx context.Context, m Message, raw []byte) []byte {
	if ts.o.Kind(m.Params.Name) == tools.TaskOfServer {
		return ts.hold(ctx, m, raw)
	}
	offer := &tools.TaskOffer{}
	resp := ts.o.Calls.HandleMessage(tools.WithTaskOffer(ctx, offer), raw)
	plain := func() []byte { return jsonrpc.Encode(m.ID, resp) }
	cmd, taken := offer.Taken()
	if _, ok := resp.(mcp.JSONRPCResponse); !taken || !ok {
		return plain()
	}
	caller, err := ts.o.Caller(ctx)
	if err != nil {
		return plain()
	}
	t := ts.newTask(caller, m.Params.Name, workingMessage(cmd))
	t.SandboxID, t.PID, t.LogFile, t.Head = cmd.SandboxID, cmd.PID, cmd.LogFile, cmd.Head
	// The task is answered only once a tasks/get of any server would find it; without the record the call
	// answers as it does for a client without tasks (running, with the pid for e2b_read_output).
	if err := ts.o.Records.PutTask(t); err != nil {
		ts.o.Log.Warn("a call's task could not be recorded; the call answers without one", "tool", m.Params.Name,
			"error", err)
		return plain()
	}
	return jsonrpc.Result(m.ID, answerOf(t, resultTypeTask))
}

// newTask is a new working task of the caller's call of tool.
func (ts *Tasks) newTask(caller tools.Caller, tool, status string) state.Task {
	now := ts.o.Now()
	return state.Task{ID: newTaskID(), Owner: caller.Owner, Session: caller.Session, Tool: tool,
		Status: state.TaskWorking, StatusMessage: status, Created: now, Updated: now, Expires: now.Add(taskTTL)}
}

func workingMessage(c tools.TaskCommand) string {
	return fmt.Sprintf("The command runs in sandbox %s as process %d; its output goes to %s.",
		c.SandboxID, c.PID, c.LogFile)
}

// errNoTask is the error of a task ID the caller has no task of.
var errNoTask = errors.New("task not found")

// find is the caller's task id: not another owner's or session's, not one expired.
func (ts *Tasks) find(caller tools.Caller, id string) (state.Task, error) {
	t, err := ts.o.Records.Task(caller.Owner, id)
	switch {
	case errors.Is(err, state.ErrNotFound):
		return state.Task{}, errNoTask
	case err != nil:
		return state.Task{}, err
	case t.Session != caller.Session:
		return state.Task{}, errNoTask
	case !ts.o.Now().Before(t.Expires):
		return state.Task{}, errors.New("task has expired")
	}
	return t, nil
}

// follow brings a working task up to date from its sandbox: completed, with the call's result, once its command
// ended. A sandbox it cannot reach now leaves it working (the next poll asks again).
func (ts *Tasks) follow(ctx context.Context, caller tools.Caller, t state.Task) state.Task {
	if t.Terminal() {
		return t
	}
	if t.PID == 0 {
		return ts.followHeld(t)
	}
	// The result is sized to the client that asks for it, as the call's would have been.
	res, done, err := ts.o.Commands.Outcome(tools.WithClient(ctx, ts.o.Client(ctx)), caller, t)
	if err != nil {
		ts.o.Log.Warn("a task's command could not be checked", "task", t.ID, "sandbox", t.SandboxID, "error", err)
		return t
	}
	if !done {
		return t
	}
	result, err := json.Marshal(res)
	if err != nil {
		ts.o.Log.Warn("a task's result could not be encoded", "task", t.ID, "error", err)
		return t
	}
	updated, err := ts.o.Records.UpdateTask(t.Owner, t.ID, func(r *state.Task) error {
		if !r.Terminal() { // a cancel may have come first
			r.Status, r.StatusMessage, r.Result = state.TaskCompleted, "The command ended.", result
		}
		return nil
	})
	if err != nil {
		ts.o.Log.Warn("a task's result could not be recorded", "task", t.ID, "error", err)
		t.Status, t.StatusMessage, t.Result = state.TaskCompleted, "The command ended.", result
		return t
	}
	return updated
}

// cancel stops a working task's command and everything it started, and marks the task cancelled; a task that
// already ended is left as it is.
func (ts *Tasks) cancel(ctx context.Context, caller tools.Caller, t state.Task) error {
	if t.Terminal() {
		return nil
	}
	if t.PID == 0 { // held by a server: it stops the call when it sees the task cancelled
		defer ts.runners.cancel(t.ID)
	} else if err := ts.o.Commands.Stop(ctx, caller, t); err != nil {
		return err
	}
	_, err := ts.o.Records.UpdateTask(t.Owner, t.ID, func(r *state.Task) error {
		if !r.Terminal() {
			r.Status, r.StatusMessage = state.TaskCancelled, "Cancelled: the command and everything it started were stopped."
		}
		return nil
	})
	return err
}
