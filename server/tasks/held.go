package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/internal/jsonrpc"
	"github.com/e2b-mcp/e2b-mcp/state"
	"github.com/e2b-mcp/e2b-mcp/tools"
)

// Tasks of calls that only the server running them can finish (tools.TaskOfServer): the call runs on, detached
// from its request, on the server that took it, which records its result in the task when it ends, and keeps the
// task's lastUpdatedAt fresh meanwhile. Another server answers tasks/get from the record; one that finds the
// record stale (its server stopped) completes the task with a result saying the call's outcome is lost. A cancel
// on another server marks the record, which the running server reads at its next beat.

const (
	// heldBeat is how often the server running a held task renews its record and reads it for a cancel.
	heldBeat = 5 * time.Second
	// HeldStale is how old a held task's record must be for its server to be taken as gone.
	HeldStale = 6 * heldBeat
)

// runners are the held tasks this server runs, and how to stop each.
type runners struct {
	mu   sync.Mutex
	runs map[string]context.CancelCauseFunc
}

func newRunners() *runners { return &runners{runs: map[string]context.CancelCauseFunc{}} }

func (r *runners) add(id string, stop context.CancelCauseFunc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.runs[id] = stop
}

func (r *runners) remove(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.runs, id)
}

// running reports whether this server runs the task.
func (r *runners) running(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.runs[id]
	return ok
}

// cancel stops the task's call if this server runs it.
func (r *runners) cancel(id string) {
	r.mu.Lock()
	stop, ok := r.runs[id]
	r.mu.Unlock()
	if ok {
		stop(errCancelled)
	}
}

var errCancelled = errors.New("the task was cancelled (tasks/cancel)")

// hold runs a tools/call of a TaskOfServer tool, and answers its response if it comes within the task wait; else
// the call goes on detached from its request, as a task.
func (ts *Tasks) hold(ctx context.Context, m Message, raw []byte) []byte {
	caller, err := ts.o.Caller(ctx)
	if err != nil {
		return jsonrpc.Encode(m.ID, ts.o.Calls.HandleMessage(ctx, raw))
	}
	// Until it is a task the call is the request's (a cancel of the request ends it); after, only a task's cancel.
	detached, mute := tools.MuteLater(context.WithoutCancel(ctx))
	runCtx, stop := context.WithCancelCause(detached)
	following := context.AfterFunc(ctx, func() { stop(context.Cause(ctx)) })
	done := make(chan mcp.JSONRPCMessage, 1)
	go func() { done <- ts.o.Calls.HandleMessage(runCtx, raw) }()
	timer := time.NewTimer(ts.o.Wait)
	defer timer.Stop()
	select {
	case resp := <-done:
		following()
		stop(nil)
		return jsonrpc.Encode(m.ID, resp)
	case <-timer.C:
	}
	if !following() { // the request ended as the wait did: the call ends with it
		resp := <-done
		stop(nil)
		return jsonrpc.Encode(m.ID, resp)
	}
	mute()
	t := ts.newTask(caller, m.Params.Name, "The call runs on.")
	if err := ts.o.Records.PutTask(t); err != nil {
		ts.o.Log.Warn("a call's task could not be recorded; the call answers without one", "tool", m.Params.Name,
			"error", err)
		resp := <-done
		stop(nil)
		return jsonrpc.Encode(m.ID, resp)
	}
	ts.runners.add(t.ID, stop)
	go ts.runHeld(t, done, stop)
	return jsonrpc.Result(m.ID, answerOf(t, resultTypeTask))
}

// runHeld keeps a held task's record fresh until its call ends, stops the call when the record says it was
// cancelled, and records the call's result.
func (ts *Tasks) runHeld(t state.Task, done <-chan mcp.JSONRPCMessage, stop context.CancelCauseFunc) {
	defer ts.runners.remove(t.ID)
	defer stop(nil)
	beat := time.NewTicker(heldBeat)
	defer beat.Stop()
	for {
		select {
		case resp := <-done:
			ts.recordHeld(t, resp)
			return
		case <-beat.C:
			r, err := ts.o.Records.UpdateTask(t.Owner, t.ID, func(*state.Task) error { return nil })
			if err != nil {
				ts.o.Log.Warn("a held task's record could not be renewed", "task", t.ID, "error", err)
			} else if r.Status == state.TaskCancelled {
				stop(errCancelled)
			}
		}
	}
}

// recordHeld records a held task's call's response: completed with its result, or failed with its JSON-RPC
// error; a task cancelled meanwhile stays cancelled.
func (ts *Tasks) recordHeld(t state.Task, resp mcp.JSONRPCMessage) {
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
	if _, err := ts.o.Records.UpdateTask(t.Owner, t.ID, func(r *state.Task) error {
		if !r.Terminal() {
			r.Status, r.StatusMessage, r.Result = status, message, result
		}
		return nil
	}); err != nil {
		ts.o.Log.Error("a held task's result could not be recorded", "task", t.ID, "error", err)
	}
}

// followHeld answers a held task that is working: as it is while its server beats, else completed with a result
// that says its outcome is lost.
func (ts *Tasks) followHeld(t state.Task) state.Task {
	if ts.runners.running(t.ID) || ts.o.Now().Sub(t.Updated) < HeldStale {
		return t
	}
	lost := mcp.NewToolResultError(fmt.Sprintf("The server that ran this %s call stopped before the call ended (a "+
		"restart, or a crash), so its outcome is lost. E2B's code interpreter interrupts an execution when the "+
		"request that runs it goes: what the code defined before it remains in its context. Run it again.", t.Tool))
	result, _ := json.Marshal(lost) // a plain result
	updated, err := ts.o.Records.UpdateTask(t.Owner, t.ID, func(r *state.Task) error {
		if !r.Terminal() && ts.o.Now().Sub(r.Updated) >= HeldStale {
			r.Status, r.StatusMessage, r.Result = state.TaskCompleted, "The call's server stopped.", result
		}
		return nil
	})
	if err != nil {
		ts.o.Log.Warn("a lost task could not be recorded", "task", t.ID, "error", err)
		return t
	}
	return updated
}
