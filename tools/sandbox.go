package tools

import (
	"context"
	"errors"
	"strings"

	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/lifecycle"
	"github.com/e2b-mcp/e2b-mcp/state"
)

// The caller's sandbox as a call finds it: looked up in this session only (another session's is unknown), refused
// when it cannot serve the call (gone, paused), and brought up to date when E2B says it is no longer running.

// lookup returns the caller's sandbox id from the store. Sandboxes of other sessions and owners are reported as
// unknown, so that their IDs reveal nothing.
func (b *base) lookup(call Caller, id string) (state.SandboxRecord, error) {
	if len(id) > maxIDBytes {
		return state.SandboxRecord{}, b.sandboxNotFound(call, id)
	}
	rec, err := b.store.Sandbox(call.Owner, id)
	if err == nil && rec.Session == call.Session {
		return rec, nil
	}
	if err != nil && !errors.Is(err, state.ErrNotFound) {
		return state.SandboxRecord{}, err
	}
	return state.SandboxRecord{}, b.sandboxNotFound(call, id)
}

func (b *base) sandboxNotFound(call Caller, id string) error {
	recs, err := b.store.SessionSandboxes(call.Owner, call.Session)
	if err != nil {
		return err
	}
	var ids []string
	for _, r := range recs {
		if r.State != state.StateGone {
			ids = append(ids, r.ID)
		}
	}
	have := "none"
	if len(ids) > 0 {
		have = strings.Join(ids, ", ")
	}
	return userErrorf("Sandbox '%s' not found in this session. Sandboxes in this session: %s", echo(id), have)
}

// UnknownTarget reports whether a call names a sandbox or checkpoint that the caller's session does not have, with
// the answer the tool itself would give ("Sandbox 'x' not found in this session..."). The server asks before it
// queues a call for a human's approval: a human is never asked about a call that cannot run, and made-up IDs
// cannot fill the approval queue. It reads only the store.
func UnknownTarget(store state.Store, call Caller, args map[string]any) (string, bool, error) {
	b := &base{store: store}
	var err error
	if id, _ := args["sandbox_id"].(string); id != "" {
		_, err = b.lookup(call, id)
	} else if id, _ := args["checkpoint_id"].(string); id != "" {
		_, err = b.lookupCheckpoint(call, id)
	}
	var te *toolError
	if errors.As(err, &te) {
		return te.text, true, nil
	}
	return "", false, err
}

// sandbox opens a call on one of the caller's sandboxes: its record (another session's or owner's is not found),
// refused when usable says it cannot serve the call, and the owner's E2B client. The order decides which
// failure the model hears first: an unknown sandbox, then its state, then a missing key. A call that needs the
// sandbox running uses it (running), which keeps it alive.
func (b *base) sandbox(ctx context.Context, call Caller, id string,
	needRunning bool) (state.SandboxRecord, *e2b.Client, error) {
	if needRunning {
		u, err := b.running(ctx, call, id)
		return u.rec, u.c, err
	}
	rec, err := b.lookup(call, id)
	if err != nil {
		return state.SandboxRecord{}, nil, err
	}
	if err := b.usable(call, rec, false); err != nil {
		return state.SandboxRecord{}, nil, err
	}
	c, err := b.client(ctx, call.Owner)
	if err != nil {
		return state.SandboxRecord{}, nil, err
	}
	return rec, c, nil
}

// inUse is a sandbox a call runs in: its record, the owner's client, whether the call resumed it first (and a
// warning from that resume).
type inUse struct {
	rec     state.SandboxRecord
	c       *e2b.Client
	resumed bool
	warning string
}

// running opens a call that needs the sandbox running, as sandbox does, and keeps the sandbox alive for it
// (keepAlive): its timeout is extended, and one E2B paused at its timeout is resumed.
func (b *base) running(ctx context.Context, call Caller, id string) (inUse, error) {
	rec, err := b.lookup(call, id)
	if err != nil {
		return inUse{}, err
	}
	if err := b.usable(call, rec, true); err != nil {
		return inUse{}, err
	}
	c, err := b.client(ctx, call.Owner)
	if err != nil {
		return inUse{}, err
	}
	rec, resumed, warning, err := b.keepAlive(ctx, c, call, rec)
	if err != nil {
		return inUse{}, err
	}
	return inUse{rec: rec, c: c, resumed: resumed, warning: warning}, nil
}

// usable refuses sandboxes that cannot run anything: gone ones always, paused ones when running is needed, unless
// E2B paused them at their timeout (they are resumed on use).
func (b *base) usable(call Caller, rec state.SandboxRecord, needRunning bool) error {
	switch {
	case rec.State == state.StateGone:
		return goneError(rec.ID, rec.GoneReason)
	case needRunning && rec.State == state.StatePaused && !resumable(rec):
		return b.pausedError(call, rec)
	}
	return nil
}

// pausedError says how a paused sandbox runs again: by calling again (E2B paused it at its timeout), by a resume,
// or, while the budget that paused it is still used up (a resume is refused until then), when that budget resets.
func (b *base) pausedError(call Caller, rec state.SandboxRecord) error {
	if resumable(rec) {
		return userErrorf("Sandbox '%s' had been paused by E2B (at its timeout); call again and it is resumed first (or "+
			"resume it with e2b_manage_sandbox action resume).", rec.ID)
	}
	if rec.PausedBy == state.PausedByBudget {
		if why := b.hoursUsedUp(call.Owner); why != "" {
			return userErrorf("Sandbox '%s' was paused by this server when its owner's sandbox-hours budget was used "+
				"up: %s. Its files are kept; e2b_manage_sandbox action resume resumes it once the budget has reset.",
				rec.ID, why)
		}
	}
	return userErrorf("Sandbox '%s' is paused%s; resume it with e2b_manage_sandbox action resume", rec.ID,
		pausedByText(rec.PausedBy))
}

// pausedByText says who paused a sandbox, for a message ("" when it is not known).
func pausedByText(by string) string {
	switch by {
	case state.PausedAtTimeout:
		return " (at its timeout)"
	case state.PausedByCall:
		return " (by e2b_manage_sandbox)"
	case state.PausedBySweep:
		return " (by the orphan sweep, after its session's lease lapsed)"
	case state.PausedByBudget:
		return " (by this server, when its owner's sandbox-hours budget was used up)"
	}
	return ""
}

func goneError(id, reason string) error {
	if reason == "" {
		reason = "E2B no longer has it"
	}
	return userErrorf("Sandbox '%s' is gone (%s). Create a new one with e2b_create_sandbox, or fork one of its "+
		"checkpoints with e2b_fork_sandbox.", id, reason)
}

// envd addresses the recorded sandbox's daemon.
func envd(c *e2b.Client, rec state.SandboxRecord) *e2b.Envd {
	domain := rec.Domain
	if domain == "" {
		domain = c.Domain()
	}
	return c.Envd(e2b.SandboxConn{ID: rec.ID, Domain: domain, EnvdVersion: rec.EnvdVersion, AccessToken: rec.AccessToken})
}

// sandboxFailure explains an envd failure that means the sandbox is not running: it asks E2B whether the sandbox
// is paused or gone, brings the record up to date and says so. Other errors pass through.
func (b *base) sandboxFailure(ctx context.Context, c *e2b.Client, call Caller,
	rec state.SandboxRecord, err error) error {
	if !errors.Is(err, e2b.ErrSandboxGone) {
		return err
	}
	return b.notRunning(ctx, c, call, rec, err)
}

// notRunning asks E2B whether a sandbox that a call found not running is paused or gone, brings the record up to
// date and says so; otherwise (E2B says it runs, or cannot be asked) err stands.
func (b *base) notRunning(ctx context.Context, c *e2b.Client, call Caller, rec state.SandboxRecord, err error) error {
	if ctx.Err() != nil {
		return err
	}
	detail, gerr := c.GetSandbox(ctx, rec.ID)
	switch {
	case gerr == nil && detail.State == e2b.StatePaused:
		if rec.State == state.StateRunning {
			rec.PausedBy = lifecycle.PausedByE2B(rec)
		}
		rec.State = state.StatePaused
		b.setPaused(call, rec.ID, rec.PausedBy)
		return b.pausedError(call, rec)
	case errors.Is(gerr, e2b.ErrNotFound):
		b.extended.forget(call.Owner, rec.ID)
		reason := lifecycle.GoneReason(rec, b.now())
		b.setState(call, rec.ID, state.StateGone, reason)
		return goneError(rec.ID, reason)
	}
	return err
}

// setPaused records that a sandbox is paused, and by whom (state.PausedBy...; "" when not known).
func (b *base) setPaused(call Caller, id, by string) {
	_, err := b.store.UpdateSandbox(call.Owner, id, func(r *state.SandboxRecord) error {
		r.State, r.GoneReason, r.PausedBy = state.StatePaused, "", by
		return nil
	})
	if err != nil && !errors.Is(err, state.ErrNotFound) {
		b.log.Warn("recording sandbox state", "sandbox", id, "state", state.StatePaused, "err", err)
	}
}

// setState records what E2B said about a sandbox; the answer to the model does not depend on it, so a store
// failure is only logged.
func (b *base) setState(call Caller, id, st, reason string) {
	_, err := b.store.UpdateSandbox(call.Owner, id, func(r *state.SandboxRecord) error {
		r.State, r.GoneReason = st, reason
		return nil
	})
	if err != nil && !errors.Is(err, state.ErrNotFound) {
		b.log.Warn("recording sandbox state", "sandbox", id, "state", st, "err", err)
	}
}
