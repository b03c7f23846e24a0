package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/state"
)

// Report says what a reconciliation changed in the store.
type Report struct {
	Adopted []string // tagged sandboxes E2B has that the store lacked
	Gone    []string // recorded sandboxes E2B no longer has
}

// AdoptHook is called for each sandbox Reconcile adopts, once it is recorded: a running one needs its owner's
// egress configuration, which E2B knows nothing of on its own.
type AdoptHook func(ctx context.Context, rec state.SandboxRecord)

// Reconcile makes the store's records of one session match E2B. A record whose sandbox E2B no longer has is kept
// with State "gone" and a reason, never silently dropped, so the assistant learns what happened to its work.
// onAdopt (nil: nothing) is called for every adopted sandbox.
func Reconcile(ctx context.Context, c *e2b.Client, st state.Store, owner, session string,
	onAdopt AdoptHook) (Report, error) {
	var rep Report
	listed, err := c.ListSandboxes(ctx, e2b.ListQuery{Metadata: sessionFilter(owner, session)})
	if err != nil {
		return rep, fmt.Errorf("listing this session's sandboxes at E2B: %w", err)
	}
	records, err := st.SessionSandboxes(owner, session)
	if err != nil {
		return rep, err
	}
	known := make(map[string]state.SandboxRecord, len(records))
	for _, r := range records {
		known[r.ID] = r
	}
	atE2B := make(map[string]bool, len(listed))
	for _, ls := range listed {
		atE2B[ls.SandboxID] = true
		rec, ok := known[ls.SandboxID]
		switch {
		case !ok:
			rec, err := adopt(ctx, c, st, owner, session, ls)
			if err != nil {
				return rep, err
			}
			rep.Adopted = append(rep.Adopted, ls.SandboxID)
			if onAdopt != nil {
				onAdopt(ctx, rec)
			}
		case rec.State != ls.State || ls.State == e2b.StateRunning && !ls.EndAt.Equal(rec.ExpiresAt):
			if _, err := st.UpdateSandbox(owner, rec.ID, func(r *state.SandboxRecord) error {
				observed(r, ls.State, ls.EndAt)
				return nil
			}); err != nil {
				return rep, err
			}
		}
	}
	for _, rec := range records {
		if atE2B[rec.ID] || rec.State == state.StateGone {
			continue
		}
		// A sandbox can be ours without our session tags (E2B's fork copies no metadata), so a missing list entry
		// is confirmed by asking for the sandbox itself before calling it gone.
		detail, err := c.GetSandbox(ctx, rec.ID)
		if err == nil {
			if detail.State != rec.State {
				if _, err := st.UpdateSandbox(owner, rec.ID, func(r *state.SandboxRecord) error {
					observed(r, detail.State, detail.EndAt)
					return nil
				}); err != nil {
					return rep, err
				}
			}
			continue
		}
		if !errors.Is(err, e2b.ErrNotFound) {
			return rep, fmt.Errorf("checking sandbox %s at E2B: %w", rec.ID, err)
		}
		reason := GoneReason(rec, time.Now())
		if _, err := st.UpdateSandbox(owner, rec.ID, func(r *state.SandboxRecord) error {
			r.State, r.GoneReason = state.StateGone, reason
			return nil
		}); err != nil {
			return rep, err
		}
		rep.Gone = append(rep.Gone, rec.ID)
	}
	return rep, nil
}

// observed brings a record to the state E2B reports, running until endAt or paused. A sandbox E2B paused while the
// record had it running was paused by E2B (PausedByE2B); one found running again is no longer paused by anyone.
func observed(r *state.SandboxRecord, st string, endAt time.Time) {
	switch {
	case st == e2b.StateRunning:
		r.PausedBy = ""
		if !endAt.IsZero() {
			r.ExpiresAt = endAt
		}
	case r.State == e2b.StateRunning:
		r.PausedBy = PausedByE2B(*r)
	}
	r.State, r.GoneReason = st, ""
}

// PausedByE2B says who paused a sandbox that E2B has paused while this server's record had it running: its
// timeout (state.PausedAtTimeout) when it was created to pause then, else someone outside this server ("").
func PausedByE2B(rec state.SandboxRecord) string {
	if rec.OnTimeout == e2b.OnTimeoutPause {
		return state.PausedAtTimeout
	}
	return ""
}

// GoneReason explains a vanished sandbox as well as the record allows: E2B keeps no tombstones.
func GoneReason(rec state.SandboxRecord, now time.Time) string {
	if rec.State != e2b.StateRunning {
		return "E2B no longer has it: it was killed outside this session (dashboard, another client) or expired"
	}
	expires := rec.ExpiresAt
	if expires.IsZero() && rec.TimeoutSeconds > 0 && !rec.Created.IsZero() {
		expires = rec.Created.Add(time.Duration(rec.TimeoutSeconds) * time.Second)
	}
	if !expires.IsZero() && now.After(expires) {
		if rec.OnTimeout == e2b.OnTimeoutKill {
			return fmt.Sprintf("killed by E2B at its timeout (%s, %ds after it was last used), with its files and processes, "+
				"as on_timeout kill asks",
				expires.UTC().Format(time.RFC3339), rec.TimeoutSeconds)
		}
		return fmt.Sprintf("E2B no longer has it; it was running with a %ds timeout, which ran out at %s, so it "+
			"most likely timed out",
			rec.TimeoutSeconds, expires.UTC().Format(time.RFC3339))
	}
	return "E2B no longer has it: it was killed outside this session (dashboard, another client) or expired"
}

// adopt records a tagged sandbox the store lacks, e.g. after a crash between E2B's create answer and the record.
// The detail call yields the envd access token, which the list omits.
func adopt(ctx context.Context, c *e2b.Client, st state.Store, owner, session string,
	ls e2b.ListedSandbox) (state.SandboxRecord, error) {
	detail, err := c.GetSandbox(ctx, ls.SandboxID)
	if err != nil {
		return state.SandboxRecord{}, fmt.Errorf("adopting sandbox %s: %w", ls.SandboxID, err)
	}
	domain := c.Domain()
	if detail.Domain != nil && *detail.Domain != "" {
		domain = *detail.Domain
	}
	timeout := 0
	if !ls.EndAt.IsZero() && ls.EndAt.After(ls.StartedAt) {
		timeout = int(ls.EndAt.Sub(ls.StartedAt) / time.Second)
	}
	onTimeout := ""
	if detail.Lifecycle != nil {
		onTimeout = detail.Lifecycle.OnTimeout
	}
	var expires time.Time
	if ls.State == e2b.StateRunning {
		expires = ls.EndAt
	}
	rec := state.SandboxRecord{
		ID:             ls.SandboxID,
		Owner:          owner,
		Session:        session,
		Title:          ls.Metadata[TagTitle],
		Template:       ls.TemplateID,
		Domain:         domain,
		EnvdVersion:    ls.EnvdVersion,
		AccessToken:    detail.EnvdAccessToken,
		State:          ls.State,
		OnTimeout:      onTimeout,
		ExpiresAt:      expires,
		Created:        ls.StartedAt,
		TimeoutSeconds: timeout,
	}
	return rec, st.PutSandbox(rec)
}
