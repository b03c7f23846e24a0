package tools

import (
	"context"
	"errors"
	"fmt"

	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/egress"
	"github.com/e2b-mcp/e2b-mcp/lifecycle"
	"github.com/e2b-mcp/e2b-mcp/state"
)

const manageSandboxName = "e2b_manage_sandbox"

type manageArgs struct {
	SandboxID      string `json:"sandbox_id" jsonschema:"minLength=1" jsonschema_description:"The sandbox to act on."`
	Action         string `json:"action" policy:"action" jsonschema:"enum=pause,enum=resume,enum=delete" jsonschema_description:"pause keeps its memory and files and stops the clock; resume starts a paused sandbox again (or extends a running one's timeout); delete kills it for good."`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty" policy:"timeout_seconds" jsonschema:"minimum=1" jsonschema_description:"For resume: seconds the sandbox then lives."`
}

type manageResult struct {
	SandboxID      string          `json:"sandbox_id"`
	Action         string          `json:"action"`
	Success        bool            `json:"success"`
	TimeoutSeconds int             `json:"timeout_seconds,omitempty" jsonschema_description:"For resume: the sandbox's new timeout."`
	AlreadyPaused  bool            `json:"already_paused,omitempty"`
	CheckpointID   string          `json:"checkpoint_id,omitempty" jsonschema_description:"The checkpoint taken before pausing, by the on_pause policy."`
	Egress         *egress.Summary `json:"egress,omitempty" jsonschema_description:"For resume: the credentials (by name and domain) and egress limits now in force, as for e2b_create_sandbox; set by the server's operator."`
	Warning        string          `json:"warning,omitempty"`
}

// manageSandbox is e2b_manage_sandbox.
type manageSandbox struct{ *base }

func (t manageSandbox) tool() Tool {
	desc := fmt.Sprintf("Pause, resume or delete a sandbox of this session. pause keeps memory and files and stops "+
		"billing for compute (pausing a paused sandbox succeeds); resume brings it back, with timeout_seconds "+
		"(default %d) from now, and also extends a running sandbox; delete kills it and its files for good "+
		"(checkpoints stay usable with e2b_fork_sandbox).", t.cfg.DefaultTimeoutSeconds)
	return define(t.base, definition[manageArgs, manageResult]{
		name: manageSandboxName, description: desc,
		hints:    hints{readOnly: false, destructive: true, idempotent: false, openWorld: true},
		defaults: manageArgs{TimeoutSeconds: t.cfg.DefaultTimeoutSeconds},
		run:      t.run,
	})
}

func (t manageSandbox) run(ctx context.Context, call Caller, a *manageArgs) (*manageResult, error) {
	rec, err := t.lookup(call, a.SandboxID)
	if err != nil {
		return nil, err
	}
	if a.Action != "delete" {
		if err := t.usable(call, rec, false); err != nil {
			return nil, err
		}
	}
	c, err := t.client(ctx, call.Owner)
	if err != nil {
		return nil, err
	}
	switch a.Action {
	case "pause":
		return t.pause(ctx, c, call, rec)
	case "resume":
		return t.resume(ctx, c, call, rec, a.TimeoutSeconds)
	default:
		return t.delete(ctx, c, call, rec)
	}
}

func (t manageSandbox) pause(ctx context.Context, c *e2b.Client, call Caller,
	rec state.SandboxRecord) (*manageResult, error) {
	res := manageResult{SandboxID: rec.ID, Action: "pause", Success: true}
	if t.policy(rec).OnPause && rec.State == state.StateRunning {
		cp, err := t.capture(ctx, c, call, rec, fmt.Sprintf("on pause, step %d", rec.Steps))
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			res.Warning = "The checkpoint before pausing failed: " + t.errorText(ctx, call, manageSandboxName, err)
		} else {
			res.CheckpointID = cp.ID
		}
	}
	already, err := c.PauseSandbox(ctx, rec.ID)
	if err != nil {
		return nil, t.vanished(call, rec, err)
	}
	res.AlreadyPaused = already
	by := state.PausedByCall
	if already && rec.State == state.StatePaused {
		by = rec.PausedBy // it was paused before this call: whoever did it still did
	}
	t.setPaused(call, rec.ID, by)
	return &res, nil
}

func (t manageSandbox) resume(ctx context.Context, c *e2b.Client, call Caller, rec state.SandboxRecord,
	timeout int) (*manageResult, error) {
	if err := t.checkTimeout(call, timeout); err != nil {
		return nil, err
	}
	held := &places{b: t.base}
	if rec.State == state.StatePaused {
		var err error
		if held, err = t.reserve(call, state.SlotResume, 1); err != nil {
			return nil, err
		}
		defer held.release()
	}
	sb, _, err := c.ConnectSandbox(ctx, rec.ID, timeout)
	if err != nil {
		return nil, t.vanished(call, rec, err)
	}
	now := t.now()
	t.extended.done(call.Owner, rec.ID, now)
	_, err = t.connected(call, held, rec.ID, sb, timeout, now)
	held.release()
	if err != nil {
		return nil, err
	}
	// The sandbox may have slept through a rotation or removal of a credential: it gets its owner's as they are.
	summary, warning := t.applyEgress(ctx, c, call, rec.ID)
	return &manageResult{SandboxID: rec.ID, Action: "resume", Success: true, TimeoutSeconds: timeout, Egress: summary,
		Warning: joinWarnings(warning, held.warning)}, nil
}

// delete kills the sandbox and forgets it: the list then shows only what still exists or vanished on its own.
func (t manageSandbox) delete(ctx context.Context, c *e2b.Client, call Caller,
	rec state.SandboxRecord) (*manageResult, error) {
	if err := c.KillSandbox(ctx, rec.ID); err != nil && !errors.Is(err, e2b.ErrNotFound) {
		return nil, err
	}
	t.extended.forget(call.Owner, rec.ID)
	if err := t.store.DeleteSandbox(call.Owner, rec.ID); err != nil && !errors.Is(err, state.ErrNotFound) {
		return nil, err
	}
	return &manageResult{SandboxID: rec.ID, Action: "delete", Success: true}, nil
}

// vanished turns E2B's 404 for a recorded sandbox into a gone record and says so; other errors pass through.
func (t manageSandbox) vanished(call Caller, rec state.SandboxRecord, err error) error {
	if !errors.Is(err, e2b.ErrNotFound) {
		return err
	}
	t.extended.forget(call.Owner, rec.ID)
	reason := lifecycle.GoneReason(rec, t.now())
	t.setState(call, rec.ID, state.StateGone, reason)
	return goneError(rec.ID, reason)
}
