package tools

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/state"
)

const checkpointSandboxName = "e2b_checkpoint_sandbox"
const listCheckpointsName = "e2b_list_checkpoints"
const deleteCheckpointName = "e2b_delete_checkpoint"

type checkpointInfo struct {
	CheckpointID string    `json:"checkpoint_id"`
	SandboxID    string    `json:"sandbox_id" jsonschema_description:"The sandbox it was taken of."`
	Name         string    `json:"name"`
	Step         int       `json:"step" jsonschema_description:"The sandbox's step count when it was taken."`
	Created      time.Time `json:"created"`
}

func checkpointOf(cp state.Checkpoint) checkpointInfo {
	return checkpointInfo{CheckpointID: cp.ID, SandboxID: cp.SandboxID, Name: cp.Name, Step: cp.Step, Created: cp.Created}
}

// lookupCheckpoint returns the caller's checkpoint id; those of other sessions and owners are unknown.
func (b *base) lookupCheckpoint(call Caller, id string) (state.Checkpoint, error) {
	cp, err := state.Checkpoint{}, state.ErrNotFound
	if len(id) <= maxIDBytes {
		cp, err = b.store.Checkpoint(call.Owner, id)
	}
	if err == nil && cp.Session == call.Session {
		return cp, nil
	}
	if err != nil && !errors.Is(err, state.ErrNotFound) {
		return state.Checkpoint{}, err
	}
	all, err := b.store.SessionCheckpoints(call.Owner, call.Session, "")
	if err != nil {
		return state.Checkpoint{}, err
	}
	ids := make([]string, 0, len(all))
	for _, c := range all {
		ids = append(ids, c.ID)
	}
	have := "none"
	if len(ids) > 0 {
		have = strings.Join(ids, ", ")
	}
	return state.Checkpoint{}, userErrorf("Checkpoint '%s' not found in this session. Checkpoints in this session: %s",
		echo(id), have)
}

type checkpointArgs struct {
	SandboxID string `json:"sandbox_id" jsonschema:"minLength=1" jsonschema_description:"The sandbox to checkpoint."`
	Name      string `json:"name,omitempty" jsonschema_description:"A label to recognise the checkpoint by; default 'step N'."`
}

// checkpointSandbox is e2b_checkpoint_sandbox.
type checkpointSandbox struct{ *base }

func (t checkpointSandbox) tool() Tool {
	const desc = "Save a checkpoint of a sandbox: a snapshot of its files and memory that e2b_fork_sandbox can start " +
		"new sandboxes from later, to retry from a known good state or to try alternatives side by side. The sandbox " +
		"pauses for a moment and then carries on. Returns the checkpoint_id."
	return define(t.base, definition[checkpointArgs, checkpointInfo]{
		name: checkpointSandboxName, description: desc,
		hints: hints{readOnly: false, destructive: false, idempotent: false, openWorld: true},
		run:   t.run,
	})
}

func (t checkpointSandbox) run(ctx context.Context, call Caller, a *checkpointArgs) (*checkpointInfo, error) {
	if err := checkName("name", a.Name); err != nil {
		return nil, err
	}
	rec, c, err := t.sandbox(ctx, call, a.SandboxID, true)
	if err != nil {
		return nil, err
	}
	cp, err := t.capture(ctx, c, call, rec, a.Name)
	if err != nil {
		return nil, err
	}
	info := checkpointOf(cp)
	return &info, nil
}

type listCheckpointsArgs struct {
	SandboxID string `json:"sandbox_id,omitempty" jsonschema_description:"Only the checkpoints of this sandbox (it may since have been deleted)."`
	Offset    int    `json:"offset,omitempty" jsonschema:"minimum=0" jsonschema_description:"How many checkpoints to skip: next_offset of a list that did not fit in one result."`
}

type listCheckpointsResult struct {
	Count       int              `json:"count" jsonschema_description:"How many checkpoints there are in all."`
	Truncated   bool             `json:"truncated,omitempty" jsonschema_description:"Set when the rest of the list did not fit in one result: checkpoints holds those from offset on that fit, and a call with offset next_offset lists the next ones."`
	NextOffset  int              `json:"next_offset,omitempty" jsonschema_description:"The offset that continues the list, when truncated."`
	Checkpoints []checkpointInfo `json:"checkpoints" jsonschema_description:"The checkpoints, oldest first, from offset on."`
}

// listCheckpoints is e2b_list_checkpoints.
type listCheckpoints struct{ *base }

func (t listCheckpoints) tool() Tool {
	const desc = "List this session's checkpoints, oldest first. Optionally only those of one sandbox; each has its " +
		"checkpoint_id, the sandbox it was taken of, its name, the step it was taken at and when. A list too long for " +
		"one result comes in parts: truncated and next_offset say when it goes on and where."
	return define(t.base, definition[listCheckpointsArgs, listCheckpointsResult]{
		name: listCheckpointsName, description: desc,
		hints: hints{readOnly: true, destructive: false, idempotent: true, openWorld: false},
		run:   t.run,
	})
}

func (t listCheckpoints) run(ctx context.Context, call Caller, a *listCheckpointsArgs) (*listCheckpointsResult, error) {
	cps, err := t.store.SessionCheckpoints(call.Owner, call.Session, a.SandboxID)
	if err != nil {
		return nil, err
	}
	all := make([]checkpointInfo, 0, len(cps))
	for _, cp := range cps {
		all = append(all, checkpointOf(cp))
	}
	return listPage(ctx, t.base, all, a.Offset, func(page []checkpointInfo, next int) *listCheckpointsResult {
		return &listCheckpointsResult{Count: len(all), Truncated: next > 0, NextOffset: next, Checkpoints: page}
	}), nil
}

type deleteCheckpointArgs struct {
	CheckpointID string `json:"checkpoint_id" jsonschema:"minLength=1" jsonschema_description:"The checkpoint to delete."`
}

type deleteCheckpointResult struct {
	CheckpointID string `json:"checkpoint_id"`
	Success      bool   `json:"success"`
}

// deleteCheckpoint is e2b_delete_checkpoint.
type deleteCheckpoint struct{ *base }

func (t deleteCheckpoint) tool() Tool {
	const desc = "Delete a checkpoint of this session and its snapshot at E2B. Sandboxes already forked from it are " +
		"not affected; no new ones can be forked from it."
	return define(t.base, definition[deleteCheckpointArgs, deleteCheckpointResult]{
		name: deleteCheckpointName, description: desc,
		hints: hints{readOnly: false, destructive: true, idempotent: true, openWorld: true},
		run:   t.run,
	})
}

func (t deleteCheckpoint) run(ctx context.Context, call Caller,
	a *deleteCheckpointArgs) (*deleteCheckpointResult, error) {
	cp, err := t.lookupCheckpoint(call, a.CheckpointID)
	if err != nil {
		return nil, err
	}
	c, err := t.client(ctx, call.Owner)
	if err != nil {
		return nil, err
	}
	if err := c.DeleteSnapshot(ctx, cp.SnapshotID); err != nil && !errors.Is(err, e2b.ErrNotFound) {
		return nil, err
	}
	if err := t.store.DeleteCheckpoint(call.Owner, cp.ID); err != nil && !errors.Is(err, state.ErrNotFound) {
		return nil, err
	}
	return &deleteCheckpointResult{CheckpointID: cp.ID, Success: true}, nil
}
