package tools

import (
	"context"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/egress"
	"github.com/e2b-mcp/e2b-mcp/lifecycle"
	"github.com/e2b-mcp/e2b-mcp/state"
)

const listSandboxesName = "e2b_list_sandboxes"

type listArgs struct{}

type sandboxInfo struct {
	SandboxID      string    `json:"sandbox_id"`
	Title          string    `json:"title"`
	Template       string    `json:"template"`
	State          string    `json:"state" jsonschema:"enum=running,enum=paused,enum=gone"`
	GoneReason     string    `json:"gone_reason,omitempty" jsonschema_description:"Why the sandbox is gone, for state gone."`
	Created        time.Time `json:"created"`
	TimeoutSeconds int       `json:"timeout_seconds"`
	Steps          int       `json:"steps" jsonschema_description:"How many e2b_exec and e2b_write_file calls it has had."`
}

type listResult struct {
	Sandboxes []sandboxInfo `json:"sandboxes"`
	Count     int           `json:"count"`
	Warning   string        `json:"warning,omitempty" jsonschema_description:"Set when E2B could not be asked; the list is then the last known state."`
}

// listSandboxes is e2b_list_sandboxes.
type listSandboxes struct{ *base }

func (t listSandboxes) tool() Tool {
	const desc = "List this session's sandboxes, checked with E2B. Shows running and paused ones, and gone ones " +
		"(killed or timed out) with the reason, each with its sandbox_id, title, template, state, creation time and " +
		"step count. Sandboxes of other sessions are not shown."
	return define(t.base, definition[listArgs, listResult]{
		name: listSandboxesName, description: desc,
		hints: hints{readOnly: true, destructive: false, idempotent: true, openWorld: true},
		run:   t.run,
	})
}

func (t listSandboxes) run(ctx context.Context, call Caller, _ *listArgs) (any, error) {
	c, err := t.client(ctx, call.Owner)
	if err != nil {
		return nil, err
	}
	res := listResult{Sandboxes: []sandboxInfo{}}
	if _, err := lifecycle.Reconcile(ctx, c, t.store, call.Owner, call.Session, t.onAdopt(c)); err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		t.log.Warn("reconciling the session with E2B", "owner", call.Owner, "session", call.Session, "err", err)
		if localFailure(err) {
			res.Warning = "e2b-mcp could not update its records of these sandboxes (" +
				t.errorText(ctx, call, listSandboxesName, err) + "); this is the last known state."
		} else {
			res.Warning = "E2B could not be reached to check these sandboxes (" +
				t.errorText(ctx, call, listSandboxesName, err) + "); this is the last known state."
		}
	}
	recs, err := t.store.SessionSandboxes(call.Owner, call.Session)
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		res.Sandboxes = append(res.Sandboxes, describe(r))
	}
	res.Count = len(res.Sandboxes)
	return res, nil
}

func describe(r state.SandboxRecord) sandboxInfo {
	return sandboxInfo{
		SandboxID: r.ID, Title: r.Title, Template: r.Template, State: r.State, GoneReason: r.GoneReason,
		Created: r.Created, TimeoutSeconds: r.TimeoutSeconds, Steps: r.Steps,
	}
}

// onAdopt gives sandboxes the reconciliation adopts their owner's egress configuration, when there is an egress
// source.
func (t listSandboxes) onAdopt(c *e2b.Client) lifecycle.AdoptHook {
	if t.egress == nil {
		return nil
	}
	return egress.OnAdopt(c, t.egress, t.log)
}
