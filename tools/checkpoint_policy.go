package tools

import (
	"context"
	"errors"

	"github.com/e2b-mcp/e2b-mcp/state"
)

const setCheckpointPolicyName = "e2b_set_checkpoint_policy"

// Where the checkpoint policy in force for a sandbox comes from.
const (
	policySourceSandbox = "sandbox"
	policySourceSession = "session"
)

// checkpointPolicyArgs has pointers where leaving a field out (keep its value) must differ from giving 0 or false.
type checkpointPolicyArgs struct {
	SandboxID  string `json:"sandbox_id" jsonschema:"minLength=1" jsonschema_description:"The sandbox whose automatic checkpoints to show or change."`
	EverySteps *int   `json:"every_steps,omitempty" jsonschema:"minimum=0" jsonschema_description:"Take a checkpoint each time the sandbox's step count (its e2b_exec and e2b_write_file calls) reaches a multiple of this; 0 turns it off."`
	OnPause    *bool  `json:"on_pause,omitempty" jsonschema_description:"Take a checkpoint before each pause with e2b_manage_sandbox."`
	Reset      bool   `json:"reset,omitempty" jsonschema_description:"Drop the sandbox's own policy, so that the session's applies again. Give it alone."`
}

type checkpointPolicyResult struct {
	SandboxID  string `json:"sandbox_id"`
	EverySteps int    `json:"every_steps" jsonschema_description:"A checkpoint is taken whenever the step count reaches a multiple of this; 0 means never."`
	OnPause    bool   `json:"on_pause" jsonschema_description:"Whether a checkpoint is taken before each pause."`
	Source     string `json:"source" jsonschema:"enum=sandbox,enum=session" jsonschema_description:"sandbox: the sandbox's own policy is in force; session: the session's, as the server was started with."`
}

// setCheckpointPolicy is e2b_set_checkpoint_policy. It changes only the server's record of the sandbox, so it
// asks nothing of E2B (it works without a key) and is not one of the sandbox's steps.
type setCheckpointPolicy struct{ *base }

func (t setCheckpointPolicy) tool() Tool {
	const desc = "Show or change the automatic checkpoint policy of one sandbox. With every_steps N the server takes " +
		"a checkpoint each time the sandbox's step count (its e2b_exec and e2b_write_file calls) reaches a multiple " +
		"of N (0: never); with on_pause it takes one before each pause with e2b_manage_sandbox. The fields given " +
		"change the sandbox's own policy, starting from the one in force, and the others keep their value; reset " +
		"drops the sandbox's own policy so that the session's applies again; with no field the policy is only " +
		"shown. source says whose policy is in force. Forks of the sandbox inherit its own policy."
	return define(t.base, definition[checkpointPolicyArgs, checkpointPolicyResult]{
		name: setCheckpointPolicyName, description: desc,
		// It changes only the server's record, the same way each time, and asks nothing of E2B.
		hints: hints{readOnly: false, destructive: false, idempotent: true, openWorld: false},
		run:   t.run,
	})
}

func (t setCheckpointPolicy) run(_ context.Context, call Caller,
	a *checkpointPolicyArgs) (*checkpointPolicyResult, error) {
	if a.Reset && (a.EverySteps != nil || a.OnPause != nil) {
		return nil, userErrorf("reset drops the sandbox's own checkpoint policy: give it alone, without " +
			"every_steps or on_pause.")
	}
	rec, err := t.lookup(call, a.SandboxID)
	if err != nil {
		return nil, err
	}
	if !a.Reset && a.EverySteps == nil && a.OnPause == nil {
		return t.policyOf(rec), nil
	}
	// A gone sandbox takes no more checkpoints; saying so beats pretending the change meant something.
	if err := t.usable(call, rec, false); err != nil {
		return nil, err
	}
	// The new policy is worked out inside the update, from the record as it is then, so that two calls changing
	// different fields at once both take effect.
	rec, err = t.store.UpdateSandbox(call.Owner, rec.ID, func(r *state.SandboxRecord) error {
		if a.Reset {
			r.Checkpoint = nil
			return nil
		}
		p := t.policy(*r)
		if a.EverySteps != nil {
			p.EverySteps = *a.EverySteps
		}
		if a.OnPause != nil {
			p.OnPause = *a.OnPause
		}
		r.Checkpoint = &p
		return nil
	})
	if errors.Is(err, state.ErrNotFound) {
		// Deleted since the lookup.
		return nil, t.sandboxNotFound(call, a.SandboxID)
	}
	if err != nil {
		return nil, err
	}
	return t.policyOf(rec), nil
}

// policyOf is the answer for rec: the policy in force and whose it is.
func (t setCheckpointPolicy) policyOf(rec state.SandboxRecord) *checkpointPolicyResult {
	p := t.policy(rec)
	source := policySourceSession
	if rec.Checkpoint != nil {
		source = policySourceSandbox
	}
	return &checkpointPolicyResult{SandboxID: rec.ID, EverySteps: p.EverySteps, OnPause: p.OnPause, Source: source}
}
