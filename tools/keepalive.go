package tools

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"sync"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/lifecycle"
	"github.com/e2b-mcp/e2b-mcp/state"
)

// A sandbox lives as long as it is used. E2B stops a sandbox when its timeout runs out, however busy its session
// is, so every call that uses one (running) keeps its expiry at least its timeout_seconds ahead, and a command that
// runs longer than that keeps extending it while it runs. The extension is E2B's connect, which never shortens a
// longer expiry (POST .../timeout would) and, for a sandbox E2B paused at its timeout, resumes it: the call then
// goes on as if it had been running, and says it resumed it.
//
// Extensions are throttled to one per sandbox per tenth of its timeout: a sandbox extended that recently has at
// least nine tenths of its timeout left, so no call can find it timed out in between, and E2B sees one request per
// six minutes of a busy default sandbox rather than one per call.
//
// Background processes (e2b_exec background) do not hold their sandbox awake. Sandboxes are created to pause at
// their timeout with their memory, so such a process is frozen with its sandbox, not lost, and goes on when the
// sandbox is next used (or, with E2B's autoResume, when traffic reaches one of its ports, which wakes a server left
// running in it). Extending for them would keep a sandbox billed for as long as a forgotten `sleep infinity` or a
// dev server runs, after its session is long gone.

// extensions remembers when each sandbox was last extended, for the throttle.
type extensions struct {
	mu   sync.Mutex
	last map[string]time.Time // by owner and sandbox ID
}

func newExtensions() *extensions { return &extensions{last: map[string]time.Time{}} }

func extensionKey(owner, id string) string { return owner + "\x00" + id }

// due reports whether the sandbox's last extension is a tenth of its timeout or more ago.
func (x *extensions) due(owner, id string, timeout int, now time.Time) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	last, ok := x.last[extensionKey(owner, id)]
	return !ok || now.Sub(last) >= throttleInterval(timeout)
}

func (x *extensions) done(owner, id string, at time.Time) {
	x.mu.Lock()
	x.last[extensionKey(owner, id)] = at
	x.mu.Unlock()
}

// forget drops a sandbox that is gone or deleted.
func (x *extensions) forget(owner, id string) {
	x.mu.Lock()
	delete(x.last, extensionKey(owner, id))
	x.mu.Unlock()
}

// throttleInterval is a tenth of a timeout of seconds.
func throttleInterval(timeout int) time.Duration {
	return time.Duration(timeout) * time.Second / 10
}

// lifetime is the sandbox's timeout_seconds, or the default for a record that knows none.
func (b *base) lifetime(rec state.SandboxRecord) int {
	if rec.TimeoutSeconds > 0 {
		return rec.TimeoutSeconds
	}
	return b.cfg.DefaultTimeoutSeconds
}

// resumable reports whether a paused sandbox is used as if it were running: E2B paused it at its timeout, which
// the call undoes. One paused by a call or the orphan sweep stays paused until resumed on purpose.
func resumable(rec state.SandboxRecord) bool {
	return rec.State == state.StatePaused && rec.PausedBy == state.PausedAtTimeout
}

// keepAlive extends a running sandbox's timeout when the throttle allows, and resumes one E2B paused at its
// timeout. It returns the record as it now is, and whether the sandbox was resumed, with a warning when its egress
// configuration could not be brought up to date after a resume. A sandbox E2B no longer has is a goneError; any
// other failure to extend is logged and left to the call itself, which finds out soon enough whether the sandbox
// still runs.
func (b *base) keepAlive(ctx context.Context, c *e2b.Client, call Caller,
	rec state.SandboxRecord) (state.SandboxRecord, bool, string, error) {
	timeout := b.lifetime(rec)
	if rec.State == state.StateRunning && !b.extended.due(call.Owner, rec.ID, timeout, b.now()) {
		return rec, false, "", nil
	}
	held := &places{b: b}
	if rec.State == state.StatePaused {
		// Resuming on use brings the sandbox back as a resume on purpose would: within the running cap.
		var err error
		if held, err = b.reserve(call, state.SlotResume, 1); err != nil {
			return rec, false, "", err
		}
		defer held.release()
	}
	sb, resumed, err := c.ConnectSandbox(ctx, rec.ID, timeout)
	switch {
	case errors.Is(err, e2b.ErrNotFound):
		b.extended.forget(call.Owner, rec.ID)
		reason := lifecycle.GoneReason(rec, b.now())
		b.setState(call, rec.ID, state.StateGone, reason)
		return rec, false, "", goneError(rec.ID, reason)
	case err != nil && (ctx.Err() != nil || rec.State != state.StateRunning):
		return rec, false, "", err
	case err != nil:
		b.log.Warn("extending a sandbox's timeout", "sandbox", rec.ID, "owner", call.Owner, "err", err)
		return rec, false, "", nil
	}
	now := b.now()
	b.extended.done(call.Owner, rec.ID, now)
	updated, err := b.connected(call, held, rec.ID, sb, timeout, now)
	held.release()
	if err != nil {
		return rec, false, "", err
	}
	if !resumed {
		return updated, false, "", nil
	}
	_, warning := b.applyEgress(ctx, c, call, rec.ID)
	return updated, true, joinWarnings(warning, held.warning), nil
}

// connected records what a connect (an extension or a resume) made of a sandbox: running until at least
// timeout seconds from now, reached at the domain and with the token E2B answered.
func (b *base) connected(call Caller, held *places, id string, sb *e2b.Sandbox, timeout int,
	now time.Time) (state.SandboxRecord, error) {
	rec, err := held.update(call.Owner, id, func(r *state.SandboxRecord) error {
		r.State, r.GoneReason, r.PausedBy, r.TimeoutSeconds = state.StateRunning, "", "", timeout
		if expires := now.Add(time.Duration(timeout) * time.Second).UTC(); expires.After(r.ExpiresAt) {
			r.ExpiresAt = expires
		}
		if sb.Domain != nil && *sb.Domain != "" {
			r.Domain = *sb.Domain
		}
		if sb.EnvdVersion != "" {
			r.EnvdVersion = sb.EnvdVersion
		}
		// A resumed sandbox keeps its token; E2B may still send one, and then it is the one envd wants.
		if sb.EnvdAccessToken != "" {
			r.AccessToken = sb.EnvdAccessToken
		}
		return nil
	})
	if errors.Is(err, state.ErrNotFound) {
		return rec, b.sandboxNotFound(call, id)
	}
	return rec, err
}

// keepAwake extends the sandbox every tenth of its timeout while a call that may outlast it runs (a command), and
// stops when the returned function is called.
func (b *base) keepAwake(ctx context.Context, c *e2b.Client, call Caller, rec state.SandboxRecord) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(throttleInterval(b.lifetime(rec)))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				// The record is read afresh: another call may have resumed or extended it meanwhile.
				if cur, err := b.store.Sandbox(call.Owner, rec.ID); err == nil && cur.State == state.StateRunning {
					_, _, _, _ = b.keepAlive(ctx, c, call, cur)
				}
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// createWithLifecycle creates the sandbox to do onTimeout at its timeout. An E2B that refuses the lifecycle's
// fields (a self-hosted one that predates them) gets the create again without what it refused, and the warning
// says what the sandbox then does: without autoResume it still pauses (and this server resumes it on use), without
// autoPause it is killed at its timeout. The onTimeout returned is what E2B was asked for.
func (b *base) createWithLifecycle(ctx context.Context, c *e2b.Client, req e2b.NewSandbox,
	onTimeout string) (*e2b.Sandbox, string, string, error) {
	req = req.WithLifecycle(onTimeout, true)
	var warnings []string
	for {
		sb, err := c.CreateSandbox(ctx, req)
		field := refusedLifecycleField(err)
		switch {
		case field == "autoResume" && req.AutoResume != nil:
			req.AutoResume = nil
			warnings = append(warnings, fmt.Sprintf("E2B refused autoResume (%s): this sandbox pauses at its timeout, "+
				"but traffic to its ports does not resume it; the next call of this server does.", refusal(err)))
			continue
		case (field == "autoPause" || field == "autoPauseMemory") && req.AutoPause != nil:
			req.AutoPause, req.AutoPauseMemory, req.AutoResume = nil, nil, nil
			onTimeout = e2b.OnTimeoutKill
			warnings = append(warnings, fmt.Sprintf("E2B refused %s (%s): this sandbox is killed, with its files and "+
				"processes, when its timeout runs out; calls that use it keep extending the timeout.", field, refusal(err)))
			continue
		}
		return sb, onTimeout, joinWarnings(warnings...), err
	}
}

// lifecycleFields are create's lifecycle fields, each as a word of its own in an error ("autoPause" is not in
// "autoPauseMemory"), most specific first.
var lifecycleFields = []struct {
	name string
	re   *regexp.Regexp
}{
	{"autoResume", regexp.MustCompile(`\bautoResume\b`)},
	{"autoPauseMemory", regexp.MustCompile(`\bautoPauseMemory\b`)},
	{"autoPause", regexp.MustCompile(`\bautoPause\b`)},
}

// refusedLifecycleField names the lifecycle field of a create that E2B refused with 400, "" when it refused none.
func refusedLifecycleField(err error) string {
	var ae *e2b.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest {
		return ""
	}
	for _, f := range lifecycleFields {
		if f.re.MatchString(ae.Message) {
			return f.name
		}
	}
	return ""
}

// refusal is what E2B said when it refused a create.
func refusal(err error) string {
	var ae *e2b.APIError
	if errors.As(err, &ae) {
		return ae.Message
	}
	return err.Error()
}
