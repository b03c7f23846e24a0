package tools

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/egress"
	"github.com/e2b-mcp/e2b-mcp/imagesafe"
	"github.com/e2b-mcp/e2b-mcp/lifecycle"
	"github.com/e2b-mcp/e2b-mcp/policy"
	"github.com/e2b-mcp/e2b-mcp/state"
)

// base is what every tool handler shares: the dependencies and the steps common to sandbox calls (finding the
// caller's sandbox, reaching E2B, counting steps, automatic checkpoints, wording failures).
type base struct {
	clients ClientSource
	egress  egress.Source
	store   state.Store
	cfg     Config
	log     *slog.Logger
	now     func() time.Time
	// scaling shares out the decoding of images being scaled down: each takes up to a core and maxImageDecodeBytes
	// of memory, so calls take turns, each owner's behind its own.
	scaling *imagesafe.Slots
	// extended throttles the extensions of sandboxes' timeouts (keepalive.go).
	extended *extensions
	// previews makes private preview links (get_url.go); nil: sandbox ports are public.
	previews Previews
	// limitsOf is the owner's limits of the policy in force (limits.go); nil: none.
	limitsOf func(owner string) policy.Limits
}

func newBase(d Deps) *base {
	b := &base{clients: d.Clients, egress: d.Egress, store: d.Store, cfg: d.Config.withDefaults(),
		log: d.Logger, now: d.Now,
		scaling: imagesafe.NewSlots(imagesafe.SlotsTotal, imagesafe.SlotsWait), extended: newExtensions(),
		previews: d.Previews, limitsOf: d.Limits}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	if b.now == nil {
		b.now = time.Now
	}
	// Absolute roots make "absolute path inside a root" a plain prefix question, whatever the working directory.
	roots := make([]string, 0, len(b.cfg.StorageRoots))
	for _, r := range b.cfg.StorageRoots {
		if abs, err := filepath.Abs(r); err == nil {
			r = abs
		}
		roots = append(roots, r)
	}
	b.cfg.StorageRoots = roots
	workspaces := make([]string, 0, len(b.cfg.Workspaces))
	for _, w := range b.cfg.Workspaces {
		if abs, err := filepath.Abs(w); err == nil {
			w = abs
		}
		workspaces = append(workspaces, w)
	}
	b.cfg.Workspaces = workspaces
	return b
}

// client returns the owner's E2B client; without a key the error wraps ErrNoAPIKey.
func (b *base) client(ctx context.Context, owner string) (*e2b.Client, error) {
	if b.clients == nil {
		return nil, fmt.Errorf("%w: the server has no source of E2B keys", ErrNoAPIKey)
	}
	c, err := b.clients.Client(ctx, owner)
	if err != nil {
		var stored *state.Error
		if errors.Is(err, ErrNoAPIKey) || errors.As(err, &stored) {
			return nil, err // the keys are kept in the state store, and errorText names its failure as such
		}
		return nil, userErrorf("Could not get the E2B API key of %s: %s", owner, state.PublicText(err))
	}
	if c == nil {
		return nil, fmt.Errorf("%w for %s", ErrNoAPIKey, owner)
	}
	return c, nil
}

// errorText words err for the model.
func (b *base) errorText(ctx context.Context, call Caller, tool string, err error) string {
	var te *toolError
	var ae *e2b.APIError
	var ce *e2b.Error
	var ue *url.Error
	var ne net.Error
	var se *state.Error
	switch {
	case errors.As(err, &te):
		return te.text
	case errors.As(err, &se):
		// Ahead of the network cases: the database is reached over the network too, and is not E2B.
		b.log.Error("the state store failed", "tool", tool, "owner", call.Owner, "session", call.Session, "err", err)
		return "e2b-mcp's state store failed (on this server's side): " + se.Public() + ". Call again in a moment."
	case errors.Is(err, ErrNoAPIKey):
		return ConnectionRequired(call.Owner)
	case errors.As(err, &ae):
		return ae.Error()
	case ctx.Err() != nil && errors.Is(err, context.Canceled):
		return "The call was cancelled before it finished."
	case localFailure(err):
		// Ahead of the network cases: a *fs.PathError passes for a net.Error (it has Timeout and Temporary).
		return "e2b-mcp's state store failed (on this server, not at E2B): " + err.Error()
	case errors.As(err, &ue):
		// The URL's query could carry a signed /files parameter; the path names the operation well enough.
		u := ue.URL
		if p, perr := url.Parse(u); perr == nil {
			p.RawQuery = ""
			u = p.String()
		}
		return fmt.Sprintf("E2B API error (no answer from %s: %s): %v", ue.Op, u, ue.Err)
	case errors.As(err, &ne):
		return "E2B API error (no answer from E2B): " + err.Error()
	case errors.As(err, &ce):
		// The E2B client's own failures (no answer, a cut stream, an answer it cannot read, a request it would not
		// make) carry no status. The whole text is kept: what wraps the failure says what it was part of.
		return "E2B API error (no usable answer from E2B): " + strings.TrimPrefix(err.Error(), "e2b: ")
	}
	b.log.Error("tool failed", "tool", tool, "owner", call.Owner, "session", call.Session, "err", err)
	return "Internal error in " + tool + ": " + err.Error()
}

// localFailure tells a failure of this server's own storage (its state store, a full or read-only disk) from one
// of E2B, so that neither is blamed for the other.
func localFailure(err error) bool {
	return errors.Is(err, state.ErrBusy) || errors.Is(err, state.ErrUnusable) || errors.Is(err, state.ErrClosed) ||
		errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.EROFS) ||
		errors.Is(err, syscall.EIO)
}

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
	if err := usable(rec, false); err != nil {
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
	if err := usable(rec, true); err != nil {
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
func usable(rec state.SandboxRecord, needRunning bool) error {
	switch {
	case rec.State == state.StateGone:
		return goneError(rec.ID, rec.GoneReason)
	case needRunning && rec.State == state.StatePaused && !resumable(rec):
		return pausedError(rec)
	}
	return nil
}

func pausedError(rec state.SandboxRecord) error {
	if resumable(rec) {
		return userErrorf("Sandbox '%s' had been paused by E2B (at its timeout); call again and it is resumed first (or "+
			"resume it with e2b_manage_sandbox action resume).", rec.ID)
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

// newSandbox is the request for a new sandbox of the caller's session, whether made or forked from a checkpoint:
// secure, so that its envd wants the access token only this server keeps, tagged, so that the server finds it
// again and E2B's dashboard shows whose it is, and with its owner's egress configuration.
func newSandbox(call Caller, template, title string, timeout int, env map[string]string,
	net egress.Config) e2b.NewSandbox {
	if env == nil {
		env = map[string]string{}
	}
	return e2b.NewSandbox{
		TemplateID: template,
		Timeout:    timeout,
		Secure:     true,
		Metadata:   lifecycle.Metadata(call.Owner, call.Session, title),
		EnvVars:    env,
		Network:    net.Network,
	}
}

// egressFor is the complete network configuration of the owner's new sandboxes as it is now: the egress
// configuration (credentials read afresh, so a rotated one takes effect at once), with public traffic off when
// previews are private. The error never holds a credential's value.
func (b *base) egressFor(call Caller) (egress.Config, error) {
	cfg := egress.Config{Summary: egress.Summary{Credentials: []egress.Applied{}, Internet: true}}
	if b.egress != nil {
		var err error
		if cfg, err = b.egress.Resolve(call.Owner, call.Session); err != nil {
			return cfg, userErrorf("Could not read the egress credentials of %s: %s", call.Owner, state.PublicText(err))
		}
	}
	if b.previews != nil {
		// Only this server's proxy, which holds the traffic token, reaches the sandbox's ports.
		n := e2b.Network{}
		if cfg.Network != nil {
			n = *cfg.Network
		}
		private := false
		n.AllowPublicTraffic = &private
		cfg.Network = &n
	}
	return cfg, nil
}

// applyEgress gives a running sandbox the complete egress configuration of its owner (E2B's update replaces
// everything), as every path that brings a sandbox alive without a create must: resume, a live fork, adoption.
// Without an egress source nothing is sent. A failure comes back as a warning for the result: the sandbox runs,
// but may still have the rules it had before.
func (b *base) applyEgress(ctx context.Context, c *e2b.Client, call Caller, id string) (*egress.Summary, string) {
	if b.egress == nil {
		return nil, ""
	}
	summary, err := egress.Apply(ctx, c, b.egress, call.Owner, call.Session, id)
	if err != nil {
		b.log.Warn("applying the egress configuration", "sandbox", id, "owner", call.Owner, "session",
			call.Session, "err", err)
		return nil, fmt.Sprintf("The egress configuration of %s could not be brought up to date (%s); credentials changed "+
			"or removed since it last ran may still be in force in it, and new ones may be missing.", id, b.errorText(ctx,
			call, "egress", err))
	}
	return &summary, ""
}

// newRecord is the record of a sandbox just started for the caller, made or forked: running for timeout seconds,
// then paused or killed as onTimeout says, with the domain and envd access token it is reached by.
func (b *base) newRecord(call Caller, c *e2b.Client, sb *e2b.Sandbox, title, template string, timeout int,
	onTimeout string) state.SandboxRecord {
	conn := c.Conn(sb)
	now := b.now().UTC()
	b.extended.done(call.Owner, sb.SandboxID, now)
	return state.SandboxRecord{
		ID: sb.SandboxID, Owner: call.Owner, Session: call.Session, Title: title, Template: template,
		Domain: conn.Domain, EnvdVersion: sb.EnvdVersion, AccessToken: sb.EnvdAccessToken,
		State: state.StateRunning, Created: now, TimeoutSeconds: timeout,
		OnTimeout: onTimeout, ExpiresAt: now.Add(time.Duration(timeout) * time.Second),
	}
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
		return pausedError(rec)
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

// unrecorded deletes a sandbox just started that the store could not record, and says so: no call could reach it,
// and adopting it writes to the same store (a replaced data key fails both), so it would run, billed, until its
// timeout.
func (b *base) unrecorded(ctx context.Context, c *e2b.Client, call Caller, tool, id string,
	timeout int, err error) string {
	b.log.Error("recording a new sandbox", "tool", tool, "sandbox", id, "err", err)
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if kerr := c.KillSandbox(kctx, id); kerr != nil {
		return fmt.Sprintf("The sandbox %s was started but could not be recorded (%s), and deleting it failed too (%s): it "+
			"runs until its timeout of %d seconds.", id, state.PublicText(err), b.errorText(ctx, call, tool, kerr), timeout)
	}
	return fmt.Sprintf("The sandbox %s was started but could not be recorded (%s), so it was deleted again.", id,
		state.PublicText(err))
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

// joinWarnings combines the warnings of one call.
func joinWarnings(ws ...string) string {
	var out []string
	for _, w := range ws {
		if w != "" {
			out = append(out, w)
		}
	}
	return strings.Join(out, " ")
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
