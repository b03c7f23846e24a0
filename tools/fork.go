package tools

import (
	"context"
	"fmt"

	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/egress"
	"github.com/e2b-mcp/e2b-mcp/state"
)

const forkSandboxName = "e2b_fork_sandbox"

// maxForks bounds count of e2b_fork_sandbox.
const maxForks = 10

type forkArgs struct {
	SandboxID    string `json:"sandbox_id,omitempty" jsonschema_description:"Fork this running sandbox as it is now. Give this or checkpoint_id, not both."`
	CheckpointID string `json:"checkpoint_id,omitempty" jsonschema_description:"Fork from this checkpoint (see e2b_list_checkpoints). Give this or sandbox_id, not both."`
	Count        int    `json:"count,omitempty" policy:"count" jsonschema:"minimum=1,maximum=10" jsonschema_description:"How many new sandboxes to start."`
	Title        string `json:"title,omitempty" jsonschema_description:"Title of the new sandboxes; default: the source's title with ' (fork)'."`
}

type forkedSandbox struct {
	SandboxID      string `json:"sandbox_id"`
	Title          string `json:"title"`
	Status         string `json:"status"`
	Template       string `json:"template"`
	WorkspacePath  string `json:"workspace_path"`
	TimeoutSeconds int    `json:"timeout_seconds"`
}

type forkSource struct {
	SandboxID    string `json:"sandbox_id" jsonschema_description:"The sandbox forked, or the one the checkpoint was taken of."`
	CheckpointID string `json:"checkpoint_id,omitempty"`
}

type forkResult struct {
	Sandboxes []forkedSandbox `json:"sandboxes"`
	Count     int             `json:"count"`
	Source    forkSource      `json:"source"`
	Egress    *egress.Summary `json:"egress,omitempty" jsonschema_description:"The credentials (by name and domain) and egress limits in force in the new sandboxes, as for e2b_create_sandbox; set by the server's operator."`
	Warning   string          `json:"warning,omitempty" jsonschema_description:"Set when fewer sandboxes than asked for could be started."`
}

// forkSandbox is e2b_fork_sandbox.
type forkSandbox struct{ *base }

func (t forkSandbox) tool() Tool {
	desc := fmt.Sprintf("Start new sandboxes as copies of a running sandbox or of a checkpoint. Give exactly one of "+
		"sandbox_id (its files and memory as they are now) or checkpoint_id (as it was when e2b_checkpoint_sandbox took "+
		"it). count copies (default 1, at most %d) join this session, each with its own sandbox_id and a timeout of %d "+
		"seconds; the source is not changed.", maxForks, t.cfg.DefaultTimeoutSeconds)
	return define(t.base, definition[forkArgs, forkResult]{
		name: forkSandboxName, description: desc, readsEgress: true,
		hints:    hints{readOnly: false, destructive: false, idempotent: false, openWorld: true},
		defaults: forkArgs{Count: 1},
		run:      t.run,
	})
}

func (t forkSandbox) run(ctx context.Context, call Caller, a *forkArgs) (*forkResult, error) {
	switch {
	case a.SandboxID == "" && a.CheckpointID == "":
		return nil, userErrorf("Missing required parameter: sandbox_id or checkpoint_id")
	case a.SandboxID != "" && a.CheckpointID != "":
		return nil, userErrorf("Give exactly one of sandbox_id and checkpoint_id, not both.")
	}
	if err := checkName("title", a.Title); err != nil {
		return nil, err
	}
	if a.SandboxID != "" {
		return t.fromSandbox(ctx, call, a, a.Count)
	}
	return t.fromCheckpoint(ctx, call, a, a.Count)
}

func (t forkSandbox) fromSandbox(ctx context.Context, call Caller, a *forkArgs, count int) (*forkResult, error) {
	src, c, err := t.sandbox(ctx, call, a.SandboxID, false)
	if err != nil {
		return nil, err
	}
	held, err := t.reserveForks(call, src.ID, count)
	if err != nil {
		return nil, err
	}
	// Each fork's record takes a place; those of forks E2B did not start are given back.
	defer held.release()
	results, err := c.ForkSandbox(ctx, src.ID, e2b.ForkRequest{Timeout: t.cfg.DefaultTimeoutSeconds, Count: count})
	if err != nil {
		return nil, t.sandboxFailure(ctx, c, call, src, err)
	}
	res := forkResult{Sandboxes: []forkedSandbox{}, Source: forkSource{SandboxID: src.ID}}
	var failures []string
	for i, r := range results {
		if r.Sandbox == nil {
			msg := "unknown error"
			if r.Error != nil {
				msg = r.Error.Error()
			}
			failures = append(failures, msg)
			continue
		}
		// E2B's fork keeps the source's lifecycle.
		fs, err := t.record(held, call, c, r.Sandbox, src.Template, forkTitle(a.Title, src, i, count), src, src.OnTimeout)
		if err != nil {
			failures = append(failures, t.unrecorded(ctx, c, call, forkSandboxName, r.Sandbox.SandboxID,
				t.cfg.DefaultTimeoutSeconds, err))
			continue
		}
		res.Sandboxes = append(res.Sandboxes, fs)
		// A live fork starts with whatever E2B copied of the source's egress; it gets its owner's as it is now.
		summary, warning := t.applyEgress(ctx, c, call, fs.SandboxID)
		if summary != nil {
			res.Egress = summary
		}
		failures = append(failures, warning)
	}
	return t.finish(res, count, failures, held.warning)
}

func (t forkSandbox) fromCheckpoint(ctx context.Context, call Caller, a *forkArgs, count int) (*forkResult, error) {
	cp, err := t.lookupCheckpoint(call, a.CheckpointID)
	if err != nil {
		return nil, err
	}
	// The source sandbox may be long gone; its record, when there is one, lends its title and policy.
	src, err := t.store.Sandbox(call.Owner, cp.SandboxID)
	if err != nil || src.Session != call.Session {
		src = state.SandboxRecord{ID: cp.SandboxID, Template: cp.SnapshotID}
	}
	src.Steps = cp.Step
	c, err := t.client(ctx, call.Owner)
	if err != nil {
		return nil, err
	}
	net, err := t.egressFor(ctx, call)
	if err != nil {
		return nil, err
	}
	held, err := t.reserveForks(call, src.ID, count)
	if err != nil {
		return nil, err
	}
	defer held.release()
	res := forkResult{Sandboxes: []forkedSandbox{}, Source: forkSource{SandboxID: cp.SandboxID, CheckpointID: cp.ID},
		Egress: &net.Summary}
	var failures []string
	for i := range count {
		title := forkTitle(a.Title, src, i, count)
		sb, onTimeout, warning, err := t.createWithLifecycle(ctx, c, newSandbox(call, cp.SnapshotID, title,
			t.cfg.DefaultTimeoutSeconds, nil, net), t.cfg.OnTimeout)
		failures = append(failures, warning)
		if err != nil {
			if len(res.Sandboxes) == 0 {
				return nil, err
			}
			failures = append(failures, t.errorText(ctx, call, forkSandboxName, err))
			break
		}
		fs, err := t.record(held, call, c, sb, src.Template, title, src, onTimeout)
		if err != nil {
			failures = append(failures, t.unrecorded(ctx, c, call, forkSandboxName, sb.SandboxID,
				t.cfg.DefaultTimeoutSeconds, err))
			continue
		}
		res.Sandboxes = append(res.Sandboxes, fs)
	}
	return t.finish(res, count, failures, held.warning)
}

// record adds a new fork to the session. It inherits the source's step count (its history) and checkpoint policy.
func (t forkSandbox) record(held *places, call Caller, c *e2b.Client, sb *e2b.Sandbox, template, title string,
	src state.SandboxRecord, onTimeout string) (forkedSandbox, error) {
	rec := t.newRecord(call, c, sb, title, template, t.cfg.DefaultTimeoutSeconds, onTimeout)
	rec.Steps, rec.Checkpoint, rec.ForkOf = src.Steps, src.Checkpoint, src.ID
	if err := held.record(rec); err != nil {
		return forkedSandbox{}, err
	}
	return forkedSandbox{
		SandboxID: rec.ID, Title: title, Status: state.StateRunning, Template: template,
		WorkspacePath: WorkspacePath, TimeoutSeconds: rec.TimeoutSeconds,
	}, nil
}

// finish words the result of forks of which asked were to start; budget is the owner's sandbox-hours warning.
func (t forkSandbox) finish(res forkResult, asked int, failures []string, budget string) (*forkResult, error) {
	res.Count = len(res.Sandboxes)
	if res.Count == 0 {
		return nil, userErrorf("No fork could be started: %s", joinWarnings(failures...))
	}
	warning := joinWarnings(failures...)
	switch {
	case res.Count < asked:
		res.Warning = fmt.Sprintf("Only %d of %d forks were started: %s", res.Count, asked, warning)
	case warning != "":
		res.Warning = warning
	}
	res.Warning = joinWarnings(res.Warning, budget)
	return &res, nil
}

func forkTitle(asked string, src state.SandboxRecord, i, count int) string {
	title := asked
	if title == "" {
		name := src.Title
		if name == "" {
			name = src.ID
		}
		title = name + " (fork)"
	}
	if count > 1 {
		title = fmt.Sprintf("%s #%d", title, i+1)
	}
	return title
}
