package tools

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/state"
)

// The steps a sandbox has taken (calls that change it), and the automatic checkpoints its policy takes of them.

// countStep adds one step to the sandbox's count and returns the record after it. The count is written with the
// store's next batch unless a checkpoint every n steps acts on it (afterStep), which needs it exact.
func (b *base) countStep(call Caller, id string) (state.SandboxRecord, error) {
	rec, err := b.store.CountStep(call.Owner, id, func(r state.SandboxRecord) bool {
		return b.policy(r).EverySteps > 0
	})
	if errors.Is(err, state.ErrNotFound) {
		return rec, b.sandboxNotFound(call, id)
	}
	return rec, err
}

// policy is the sandbox's own checkpoint policy, or else the session's.
func (b *base) policy(rec state.SandboxRecord) state.CheckpointPolicy {
	if rec.Checkpoint != nil {
		return *rec.Checkpoint
	}
	return b.cfg.Checkpoints
}

// capture snapshots the sandbox at E2B and records the snapshot as a checkpoint of this session.
func (b *base) capture(ctx context.Context, c *e2b.Client, call Caller, rec state.SandboxRecord,
	name string) (state.Checkpoint, error) {
	info, err := c.CreateSnapshot(ctx, rec.ID, "")
	if errors.Is(err, e2b.ErrNotFound) {
		// E2B snapshots running sandboxes only: a paused one is "not found" too.
		return state.Checkpoint{}, b.notRunning(ctx, c, call, rec, err)
	}
	if err != nil {
		return state.Checkpoint{}, b.sandboxFailure(ctx, c, call, rec, err)
	}
	if name == "" {
		name = fmt.Sprintf("step %d", rec.Steps)
	}
	cp := state.Checkpoint{
		ID: newCheckpointID(), Owner: call.Owner, Session: call.Session, SandboxID: rec.ID,
		SnapshotID: info.SnapshotID, Name: name, Step: rec.Steps, Created: b.now().UTC(),
	}
	if err := b.store.PutCheckpoint(cp); err != nil {
		// An unrecorded snapshot would be a leak nobody can name; remove it.
		if derr := c.DeleteSnapshot(context.WithoutCancel(ctx), info.SnapshotID); derr != nil &&
			!errors.Is(derr, e2b.ErrNotFound) {
			b.log.Warn("removing an unrecorded snapshot", "snapshot", info.SnapshotID, "err", derr)
		}
		return state.Checkpoint{}, err
	}
	return cp, nil
}

// afterStep applies the every_steps policy to a step just counted. It returns the checkpoint taken, or a warning
// when the capture failed (the call's own result stands either way).
func (b *base) afterStep(ctx context.Context, c *e2b.Client, call Caller, rec state.SandboxRecord,
	tool string) (checkpointID, warning string) {
	p := b.policy(rec)
	if p.EverySteps <= 0 || rec.Steps%p.EverySteps != 0 || ctx.Err() != nil {
		return "", ""
	}
	cp, err := b.capture(ctx, c, call, rec, fmt.Sprintf("auto: every %d steps, step %d", p.EverySteps, rec.Steps))
	if err != nil {
		return "", fmt.Sprintf("The automatic checkpoint after step %d failed: %s", rec.Steps,
			b.errorText(ctx, call, tool, err))
	}
	return cp.ID, ""
}

func newCheckpointID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "ckpt_" + hex.EncodeToString(b[:])
}
