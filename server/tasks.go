package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/server/mcphttp"
	"github.com/e2b-mcp/e2b-mcp/state"
	"github.com/e2b-mcp/e2b-mcp/tools"
)

// MCP tasks: the Tasks extension (io.modelcontextprotocol/tasks, SEP-2663) of protocol 2026-07-28. A client that
// declares the extension in a request's client capabilities may get a task instead of a tool's result: the call
// waits tools.Config.TaskWait for its command, and a command still running then goes on in the background while
// the client follows it with tasks/get and may stop it with tasks/cancel.
//
// mcp-go v1.6.0 serves only the tasks of 2025-11-25 (requested with params.task, kept in its memory, read with
// tasks/result), so all of this is ours, in front of mcp-go: the transports hand each message to taskMessageOf first,
// and answerTask answers those it takes (stdio: stdioFront; HTTP: serveTasks). It takes the tools/call requests that
// declare the extension for a tool that can answer with a task, and the extension's tasks/get, tasks/update and
// tasks/cancel; every other message goes to mcp-go as before. A tools/call it takes still goes through mcp-go and the
// whole call pipeline (policy, approval, audit: one call), with a tools.TaskOffer on its context. A task is a record in
// the state store, and its command's output and exit code are in files in the sandbox, so any server sharing the store
// answers for it, after a restart too.

const (
	// taskTTL is how long a task is kept from its creation; its command is not bounded by it.
	taskTTL = 24 * time.Hour
	// taskPollInterval is the polling interval tasks suggest: each tasks/get of a working task asks the sandbox.
	taskPollInterval = time.Second
	// codeMissingCapability is the JSON-RPC error of a request that needs a capability the client did not declare.
	codeMissingCapability = -32021
)

// taskMessage is what taskMessageOf reads of a JSON-RPC message.
type taskMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params taskParams      `json:"params"`
}

// taskParams are what taskMessageOf reads of a message's params.
type taskParams struct {
	Name           string          `json:"name"`
	TaskID         *string         `json:"taskId"`
	InputResponses json.RawMessage `json:"inputResponses"`
	Meta           *mcp.Meta       `json:"_meta"`
}

// modern reports whether the message is of protocol 2026-07-28, which carries the client's capabilities on
// every request; declares whether they name the Tasks extension.
func (m taskMessage) modern() bool {
	return m.Params.Meta != nil && mcp.IsModernProtocol(m.Params.Meta.ProtocolVersion())
}

func (m taskMessage) declares() bool {
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

// mayBeTask is a cheap look at a line before it is parsed: only tools/call and tasks/ requests can be ours.
func mayBeTask(raw []byte) bool {
	s := string(raw)
	return strings.Contains(s, `"tasks/`) || strings.Contains(s, `"tools/call"`)
}

// taskMessageOf reads raw, and says whether it is the extension's to answer: a tools/call of protocol 2026-07-28
// that declares the extension, of a tool that can answer with a task; or a request of the extension's methods
// of that protocol (the earlier one's tasks/ requests are mcp-go's).
func (s *Server) taskMessageOf(raw []byte) (m taskMessage, ours bool) {
	if !mayBeTask(raw) || json.Unmarshal(raw, &m) != nil {
		return m, false
	}
	return m, s.takesTask(m)
}

// takesTask is taskMessageOf's decision, for a message read already.
func (s *Server) takesTask(m taskMessage) bool {
	if len(m.ID) == 0 || !m.modern() {
		return false
	}
	switch m.Method {
	case string(mcp.MethodToolsCall):
		return m.declares() && s.tools[m.Params.Name].Tasks != tools.NoTasks
	case string(mcp.MethodTasksGet), string(mcp.MethodTasksCancel), methodTasksUpdate:
		return true
	}
	return false
}

// answerTask answers a message taskMessageOf took.
func (s *Server) answerTask(ctx context.Context, m taskMessage, raw []byte) []byte {
	if m.Method == string(mcp.MethodToolsCall) {
		return s.callMayBeTask(ctx, m, raw)
	}
	if !m.declares() {
		return rpcError(m.ID, codeMissingCapability, "Missing required client capability: "+m.Method+" is of the "+
			tools.TasksExtension+" extension, which this request did not declare",
			map[string]any{"requiredCapabilities": map[string]any{
				"extensions": map[string]any{tools.TasksExtension: map[string]any{}},
			}})
	}
	if m.Params.TaskID == nil || *m.Params.TaskID == "" {
		return rpcError(m.ID, mcp.INVALID_PARAMS, m.Method+" needs params.taskId", nil)
	}
	caller, err := s.callerFor(ctx)
	if err != nil {
		return rpcError(m.ID, mcp.INVALID_REQUEST, err.Error(), nil)
	}
	t, err := s.findTask(caller, *m.Params.TaskID)
	if err != nil {
		code := mcp.INTERNAL_ERROR
		if errors.Is(err, errNoTask) {
			code = mcp.INVALID_PARAMS
		}
		return rpcError(m.ID, code, "Failed to retrieve task: "+err.Error(), nil)
	}
	switch m.Method {
	case string(mcp.MethodTasksGet):
		t = s.followTask(ctx, caller, t)
		return rpcResult(m.ID, taskAnswer(t, mcp.ResultTypeComplete))
	case string(mcp.MethodTasksCancel):
		if err := s.cancelTask(ctx, caller, t); err != nil {
			return rpcError(m.ID, mcp.INTERNAL_ERROR, "The task's command could not be stopped: "+err.Error(), nil)
		}
		return rpcResult(m.ID, map[string]any{"resultType": mcp.ResultTypeComplete})
	default: // tasks/update
		// No task of this server asks for input (an approval is asked before the call becomes a task), so no
		// response is to a request outstanding, and the extension says to ignore those.
		if len(m.Params.InputResponses) > 0 && !strings.HasPrefix(strings.TrimSpace(string(m.Params.InputResponses)), "{") {
			return rpcError(m.ID, mcp.INVALID_PARAMS, "tasks/update needs params.inputResponses to be an object", nil)
		}
		return rpcResult(m.ID, map[string]any{"resultType": mcp.ResultTypeComplete})
	}
}

// methodTasksUpdate is the Tasks extension's method for input to a task; mcp-go has no name for it.
const methodTasksUpdate = "tasks/update"

// callMayBeTask runs a tools/call offered a task through mcp-go, and answers with a task when the call took the
// offer, else with the call's own response.
func (s *Server) callMayBeTask(ctx context.Context, m taskMessage, raw []byte) []byte {
	if s.tools[m.Params.Name].Tasks == tools.TaskOfServer {
		return s.holdAsTask(ctx, m, raw)
	}
	offer := &tools.TaskOffer{}
	resp := s.mcp.HandleMessage(tools.WithTaskOffer(ctx, offer), raw)
	plain := func() []byte { return plainAnswer(m.ID, resp) }
	cmd, taken := offer.Taken()
	if _, ok := resp.(mcp.JSONRPCResponse); !taken || !ok {
		return plain()
	}
	caller, err := s.callerFor(ctx)
	if err != nil {
		return plain()
	}
	now := s.cfg.Now()
	t := state.Task{ID: newTaskID(), Owner: caller.Owner, Session: caller.Session, Tool: m.Params.Name,
		SandboxID: cmd.SandboxID, PID: cmd.PID, LogFile: cmd.LogFile, Head: cmd.Head, Status: state.TaskWorking,
		StatusMessage: workingMessage(cmd), Created: now, Updated: now, Expires: now.Add(taskTTL)}
	// The task is answered only once a tasks/get of any server would find it; without the record the call
	// answers as it does for a client without tasks (running, with the pid for e2b_read_output).
	if err := s.store.PutTask(t); err != nil {
		s.log.Warn("a call's task could not be recorded; the call answers without one", "tool", m.Params.Name, "error", err)
		return plain()
	}
	return rpcResult(m.ID, taskAnswer(t, resultTypeTask))
}

// resultTypeTask is the result type of a result that is a task.
const resultTypeTask mcp.ResultType = "task"

func workingMessage(c tools.TaskCommand) string {
	return fmt.Sprintf("The command runs in sandbox %s as process %d; its output goes to %s.",
		c.SandboxID, c.PID, c.LogFile)
}

// errNoTask is the error of a task ID the caller has no task of.
var errNoTask = errors.New("task not found")

// findTask is the caller's task id: not another owner's or session's, not one expired.
func (s *Server) findTask(caller tools.Caller, id string) (state.Task, error) {
	t, err := s.store.Task(caller.Owner, id)
	switch {
	case errors.Is(err, state.ErrNotFound):
		return state.Task{}, errNoTask
	case err != nil:
		return state.Task{}, err
	case t.Session != caller.Session:
		return state.Task{}, errNoTask
	case !s.cfg.Now().Before(t.Expires):
		return state.Task{}, errors.New("task has expired")
	}
	return t, nil
}

// followTask brings a working task up to date from its sandbox: completed, with the call's result, once its
// command ended. A sandbox it cannot reach now leaves it working (the next poll asks again).
func (s *Server) followTask(ctx context.Context, caller tools.Caller, t state.Task) state.Task {
	if t.Terminal() {
		return t
	}
	if t.PID == 0 {
		return s.followHeldTask(t)
	}
	// The result is sized to the client that asks for it, as the call's would have been.
	res, done, err := s.taskCommands.Outcome(tools.WithClient(ctx, s.client(ctx)), caller, t)
	if err != nil {
		s.log.Warn("a task's command could not be checked", "task", t.ID, "sandbox", t.SandboxID, "error", err)
		return t
	}
	if !done {
		return t
	}
	result, err := json.Marshal(res)
	if err != nil {
		s.log.Warn("a task's result could not be encoded", "task", t.ID, "error", err)
		return t
	}
	updated, err := s.store.UpdateTask(t.Owner, t.ID, func(r *state.Task) error {
		if !r.Terminal() { // a cancel may have come first
			r.Status, r.StatusMessage, r.Result = state.TaskCompleted, "The command ended.", result
		}
		return nil
	})
	if err != nil {
		s.log.Warn("a task's result could not be recorded", "task", t.ID, "error", err)
		t.Status, t.StatusMessage, t.Result = state.TaskCompleted, "The command ended.", result
		return t
	}
	return updated
}

// cancelTask stops a working task's command and everything it started, and marks the task cancelled; a task
// that already ended is left as it is.
func (s *Server) cancelTask(ctx context.Context, caller tools.Caller, t state.Task) error {
	if t.Terminal() {
		return nil
	}
	if t.PID == 0 { // held by a server: it stops the call when it sees the task cancelled
		defer s.taskRunners.cancel(t.ID)
	} else if err := s.taskCommands.Stop(ctx, caller, t); err != nil {
		return err
	}
	_, err := s.store.UpdateTask(t.Owner, t.ID, func(r *state.Task) error {
		if !r.Terminal() {
			r.Status, r.StatusMessage = state.TaskCancelled, "Cancelled: the command and everything it started were stopped."
		}
		return nil
	})
	return err
}

// taskAnswer is a task as the extension shows it: a task's result (resultType task) or tasks/get's (complete),
// with the call's result once completed. The TTL and polling interval go out in both spellings the extension's
// revisions used (ttlMs and pollIntervalMs now; ttlSeconds and pollIntervalMilliseconds before), as clients
// read one or the other.
func taskAnswer(t state.Task, kind mcp.ResultType) map[string]any {
	a := map[string]any{
		"resultType":               kind,
		"taskId":                   t.ID,
		"status":                   t.Status,
		"createdAt":                t.Created.UTC().Format(time.RFC3339Nano),
		"lastUpdatedAt":            t.Updated.UTC().Format(time.RFC3339Nano),
		"ttlMs":                    t.Expires.Sub(t.Created).Milliseconds(),
		"ttlSeconds":               int64(t.Expires.Sub(t.Created).Seconds()),
		"pollIntervalMs":           taskPollInterval.Milliseconds(),
		"pollIntervalMilliseconds": taskPollInterval.Milliseconds(),
	}
	if t.StatusMessage != "" {
		a["statusMessage"] = t.StatusMessage
	}
	switch t.Status {
	case state.TaskCompleted:
		a["result"] = json.RawMessage(t.Result)
	case state.TaskFailed: // a call that failed with a JSON-RPC error keeps it as its result
		a["error"] = json.RawMessage(t.Result)
	}
	return a
}

// newTaskID is a task's ID: 128 random bits, which is what guards a task (the extension lets a task ID act as a
// bearer token), in printable ASCII.
func newTaskID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return "task-" + hex.EncodeToString(b)
}

func rpcResult(id json.RawMessage, result any) []byte {
	b, err := json.Marshal(map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "id": id, "result": result})
	if err != nil {
		return rpcError(id, mcp.INTERNAL_ERROR, "the result could not be encoded: "+err.Error(), nil)
	}
	return b
}

func rpcError(id json.RawMessage, code int, message string, data any) []byte {
	e := map[string]any{"code": code, "message": message}
	if data != nil {
		e["data"] = data
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "id": id, "error": e}) // plain values
	return b
}

// serveTasks is the front of the streamable HTTP transport: it answers a POST of one of the Tasks extension's
// messages itself, on the POST's own stream when a notification of the call has made it one.
func (s *Server) serveTasks(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			next.ServeHTTP(w, r) // mcp-go answers the unreadable body
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		m, ours := s.taskMessageOf(body)
		if !ours {
			next.ServeHTTP(w, r)
			return
		}
		mcphttp.Respond(w, s.answerTask(r.Context(), m, body))
	})
}

// Tasks of calls that only the server running them can finish (tools.TaskOfServer): the call runs on, detached
// from its request, on the server that took it, which records its result in the task when it ends, and keeps the
// task's lastUpdatedAt fresh meanwhile. Another server answers tasks/get from the record; one that finds the
// record stale (its server stopped) completes the task with a result saying the call's outcome is lost. A cancel
// on another server marks the record, which the running server reads at its next beat.

const (
	// heldTaskBeat is how often the server running a held task renews its record and reads it for a cancel.
	heldTaskBeat = 5 * time.Second
	// heldTaskStale is how old a held task's record must be for its server to be taken as gone.
	heldTaskStale = 6 * heldTaskBeat
)

// taskRunners are the held tasks this server runs, and how to stop each.
type taskRunners struct {
	mu   sync.Mutex
	runs map[string]context.CancelCauseFunc
}

func newTaskRunners() *taskRunners { return &taskRunners{runs: map[string]context.CancelCauseFunc{}} }

func (r *taskRunners) add(id string, stop context.CancelCauseFunc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.runs[id] = stop
}

func (r *taskRunners) remove(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.runs, id)
}

// running reports whether this server runs the task.
func (r *taskRunners) running(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.runs[id]
	return ok
}

// cancel stops the task's call if this server runs it.
func (r *taskRunners) cancel(id string) {
	r.mu.Lock()
	stop, ok := r.runs[id]
	r.mu.Unlock()
	if ok {
		stop(errTaskCancelled)
	}
}

var errTaskCancelled = errors.New("the task was cancelled (tasks/cancel)")

// holdAsTask runs a tools/call of a TaskOfServer tool, and answers its response if it comes within the task wait;
// else the call goes on detached from its request, as a task.
func (s *Server) holdAsTask(ctx context.Context, m taskMessage, raw []byte) []byte {
	caller, err := s.callerFor(ctx)
	if err != nil {
		return plainAnswer(m.ID, s.mcp.HandleMessage(ctx, raw))
	}
	// Until it is a task the call is the request's (a cancel of the request ends it); after, only a task's cancel.
	detached, mute := tools.MuteLater(context.WithoutCancel(ctx))
	runCtx, stop := context.WithCancelCause(detached)
	following := context.AfterFunc(ctx, func() { stop(context.Cause(ctx)) })
	done := make(chan mcp.JSONRPCMessage, 1)
	go func() { done <- s.mcp.HandleMessage(runCtx, raw) }()
	wait := s.cfg.Tools.TaskWait
	if wait <= 0 {
		wait = tools.DefaultTaskWait
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case resp := <-done:
		following()
		stop(nil)
		return plainAnswer(m.ID, resp)
	case <-timer.C:
	}
	if !following() { // the request ended as the wait did: the call ends with it
		resp := <-done
		stop(nil)
		return plainAnswer(m.ID, resp)
	}
	mute()
	now := s.cfg.Now()
	t := state.Task{ID: newTaskID(), Owner: caller.Owner, Session: caller.Session, Tool: m.Params.Name,
		Status: state.TaskWorking, StatusMessage: "The call runs on.", Created: now, Updated: now, Expires: now.Add(taskTTL)}
	if err := s.store.PutTask(t); err != nil {
		s.log.Warn("a call's task could not be recorded; the call answers without one", "tool", m.Params.Name, "error", err)
		resp := <-done
		stop(nil)
		return plainAnswer(m.ID, resp)
	}
	s.taskRunners.add(t.ID, stop)
	go s.runHeldTask(t, done, stop)
	return rpcResult(m.ID, taskAnswer(t, resultTypeTask))
}

// runHeldTask keeps a held task's record fresh until its call ends, stops the call when the record says it was
// cancelled, and records the call's result.
func (s *Server) runHeldTask(t state.Task, done <-chan mcp.JSONRPCMessage, stop context.CancelCauseFunc) {
	defer s.taskRunners.remove(t.ID)
	defer stop(nil)
	beat := time.NewTicker(heldTaskBeat)
	defer beat.Stop()
	for {
		select {
		case resp := <-done:
			s.recordHeldResult(t, resp)
			return
		case <-beat.C:
			r, err := s.store.UpdateTask(t.Owner, t.ID, func(*state.Task) error { return nil })
			if err != nil {
				s.log.Warn("a held task's record could not be renewed", "task", t.ID, "error", err)
			} else if r.Status == state.TaskCancelled {
				stop(errTaskCancelled)
			}
		}
	}
}

// recordHeldResult records a held task's call's response: completed with its result, or failed with its
// JSON-RPC error; a task cancelled meanwhile stays cancelled.
func (s *Server) recordHeldResult(t state.Task, resp mcp.JSONRPCMessage) {
	status, message := state.TaskCompleted, "The call ended."
	var body any
	switch r := resp.(type) {
	case mcp.JSONRPCResponse:
		body = r.Result
	case mcp.JSONRPCError:
		status, message, body = state.TaskFailed, "The call failed: "+r.Error.Message, r.Error
	default:
		status, message = state.TaskFailed, "The call ended without an answer."
		body = map[string]any{"code": mcp.INTERNAL_ERROR, "message": "no answer"}
	}
	result, err := json.Marshal(body)
	if err != nil {
		status, message = state.TaskFailed, "The call's result could not be encoded."
		result, _ = json.Marshal(map[string]any{"code": mcp.INTERNAL_ERROR, "message": err.Error()})
	}
	if _, err := s.store.UpdateTask(t.Owner, t.ID, func(r *state.Task) error {
		if !r.Terminal() {
			r.Status, r.StatusMessage, r.Result = status, message, result
		}
		return nil
	}); err != nil {
		s.log.Error("a held task's result could not be recorded", "task", t.ID, "error", err)
	}
}

// followHeldTask answers a held task that is working: as it is while its server beats, else completed with a
// result that says its outcome is lost.
func (s *Server) followHeldTask(t state.Task) state.Task {
	if s.taskRunners.running(t.ID) || s.cfg.Now().Sub(t.Updated) < heldTaskStale {
		return t
	}
	lost := mcp.NewToolResultError(fmt.Sprintf("The server that ran this %s call stopped before the call ended (a "+
		"restart, or a crash), so its outcome is lost. E2B's code interpreter interrupts an execution when the "+
		"request that runs it goes: what the code defined before it remains in its context. Run it again.", t.Tool))
	result, _ := json.Marshal(lost) // a plain result
	updated, err := s.store.UpdateTask(t.Owner, t.ID, func(r *state.Task) error {
		if !r.Terminal() && s.cfg.Now().Sub(r.Updated) >= heldTaskStale {
			r.Status, r.StatusMessage, r.Result = state.TaskCompleted, "The call's server stopped.", result
		}
		return nil
	})
	if err != nil {
		s.log.Warn("a lost task could not be recorded", "task", t.ID, "error", err)
		return t
	}
	return updated
}

// plainAnswer is a response as mcp-go made it.
func plainAnswer(id json.RawMessage, resp mcp.JSONRPCMessage) []byte {
	b, err := json.Marshal(resp)
	if err != nil {
		return rpcError(id, mcp.INTERNAL_ERROR, "the result could not be encoded: "+err.Error(), nil)
	}
	return b
}
