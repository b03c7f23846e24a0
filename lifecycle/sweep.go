package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/state"
)

// OrphanAction is what happens to the sandboxes of a session whose lease has lapsed.
type OrphanAction string

// The orphan actions. Pause is the default: it stops the billing of compute but loses no work.
const (
	OrphanPause OrphanAction = "pause"
	OrphanKill  OrphanAction = "kill"
	OrphanKeep  OrphanAction = "keep"
)

// ParseOrphanAction checks a flag or config value.
func ParseOrphanAction(s string) (OrphanAction, error) {
	switch a := OrphanAction(s); a {
	case OrphanPause, OrphanKill, OrphanKeep:
		return a, nil
	}
	return "", fmt.Errorf("orphan action %q: want pause, kill or keep", s)
}

// Sweeper applies the orphan action to sandboxes that no live session owns.
type Sweeper struct {
	Store state.Store
	// Client returns an E2B client for an owner; an owner without a key is skipped (and logged).
	Client func(ctx context.Context, owner string) (*e2b.Client, error)
	Action OrphanAction
	Now    func() time.Time
	Logger *slog.Logger
	// ClaimHold is how long a sweeper's claim on a lapsed session keeps other processes sharing the store from
	// sweeping it too (default DefaultClaimHold). A sweeper that dies mid-sweep holds the session that long.
	ClaimHold time.Duration
}

// DefaultClaimHold bounds the sweep of one session: far longer than its E2B calls take.
const DefaultClaimHold = 10 * time.Minute

// SweepReport says what one sweep did.
type SweepReport struct {
	LapsedSessions []string // "owner/session"
	Paused, Killed []string // sandbox IDs
	Errors         []error
}

// Sweep handles every session whose lease has lapsed: each of its sandboxes that is still alive, as the store
// knows them and as E2B knows them by tags, gets the orphan action; then the session is marked lapsed so that it
// is not swept again until it is used (and renewed) again. A failure on one sandbox is reported and leaves the
// session unmarked, so the next sweep tries again. Each session is claimed in the store before it is swept, so of
// several processes sharing the store (replicas) exactly one sweeps it.
func (s *Sweeper) Sweep(ctx context.Context) (SweepReport, error) {
	var rep SweepReport
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	lapsed, err := s.Store.LapsedSessions(now())
	if err != nil {
		return rep, err
	}
	hold := s.ClaimHold
	if hold <= 0 {
		hold = DefaultClaimHold
	}
	for _, sess := range lapsed {
		label := sess.Owner + "/" + sess.Name
		claimed, err := s.Store.ClaimLapsedSession(sess.Owner, sess.Name, now(), hold)
		if err != nil {
			rep.Errors = append(rep.Errors, fmt.Errorf("session %s: %w", label, err))
			continue
		}
		if !claimed {
			continue // another process is sweeping it, or it was renewed or swept since the list was read
		}
		rep.LapsedSessions = append(rep.LapsedSessions, label)
		if err := s.sweepSession(ctx, sess, &rep); err != nil {
			rep.Errors = append(rep.Errors, err)
			if err := s.Store.ReleaseSessionClaim(sess.Owner, sess.Name); err != nil {
				rep.Errors = append(rep.Errors, err)
			}
			continue
		}
		if err := s.Store.MarkSessionLapsed(sess.Owner, sess.Name); err != nil {
			rep.Errors = append(rep.Errors, err)
		}
	}
	for _, err := range rep.Errors {
		s.logger().Warn("orphan sweep", "error", err)
	}
	return rep, nil
}

// sweepSession applies the orphan action to the session's live sandboxes; the errors of single sandboxes are
// reported in rep, and make it fail so that the session is swept again.
func (s *Sweeper) sweepSession(ctx context.Context, sess state.Session, rep *SweepReport) error {
	label := sess.Owner + "/" + sess.Name
	if s.Action == OrphanKeep {
		return nil
	}
	c, err := s.Client(ctx, sess.Owner)
	if err != nil {
		return fmt.Errorf("session %s: %w", label, err)
	}
	failed := 0
	for _, id := range s.sessionSandboxIDs(ctx, c, sess, rep) {
		if err := s.apply(ctx, c, sess.Owner, id, rep); err != nil {
			rep.Errors = append(rep.Errors, fmt.Errorf("session %s, sandbox %s: %w", label, id, err))
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("session %s: %d of its sandboxes could not be handled; the next sweep tries again", label, failed)
	}
	return nil
}

// sessionSandboxIDs is the union of the store's live records and E2B's tagged sandboxes of the session.
func (s *Sweeper) sessionSandboxIDs(ctx context.Context, c *e2b.Client, sess state.Session, rep *SweepReport) []string {
	seen := map[string]bool{}
	var ids []string
	add := func(id string) {
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	recs, err := s.Store.SessionSandboxes(sess.Owner, sess.Name)
	if err != nil {
		rep.Errors = append(rep.Errors, err)
	}
	for _, r := range recs {
		if r.State != state.StateGone {
			add(r.ID)
		}
	}
	listed, err := c.ListSandboxes(ctx, e2b.ListQuery{Metadata: sessionFilter(sess.Owner, sess.Name)})
	if err != nil {
		rep.Errors = append(rep.Errors, fmt.Errorf("listing %s/%s at E2B: %w", sess.Owner, sess.Name, err))
	}
	for _, l := range listed {
		if s.Action == OrphanPause && l.State == e2b.StatePaused {
			continue
		}
		add(l.SandboxID)
	}
	return ids
}

func (s *Sweeper) apply(ctx context.Context, c *e2b.Client, owner, id string, rep *SweepReport) error {
	var newState, reason string
	already := false
	switch s.Action {
	case OrphanPause:
		var err error
		if already, err = c.PauseSandbox(ctx, id); err != nil && !errors.Is(err, e2b.ErrNotFound) {
			return err
		}
		newState = e2b.StatePaused
		rep.Paused = append(rep.Paused, id)
	case OrphanKill:
		if err := c.KillSandbox(ctx, id); err != nil && !errors.Is(err, e2b.ErrNotFound) {
			return err
		}
		newState, reason = state.StateGone, "killed by the orphan sweep after the session's lease lapsed"
		rep.Killed = append(rep.Killed, id)
	}
	_, err := s.Store.UpdateSandbox(owner, id, func(r *state.SandboxRecord) error {
		switch {
		case newState != e2b.StatePaused:
			r.PausedBy = ""
		case !already:
			r.PausedBy = state.PausedBySweep
		case r.State == e2b.StateRunning:
			// Paused before the sweep came, behind the record's back: by E2B at its timeout, most likely.
			r.PausedBy = PausedByE2B(*r)
		}
		r.State, r.GoneReason = newState, reason
		return nil
	})
	if errors.Is(err, state.ErrNotFound) {
		return nil // tagged at E2B but never recorded: the action is all there is to do
	}
	return err
}

// Run sweeps now and then every interval until ctx ends.
func (s *Sweeper) Run(ctx context.Context, interval time.Duration) {
	every(ctx, interval, func() {
		if _, err := s.Sweep(ctx); err != nil {
			s.logger().Warn("orphan sweep failed", "error", err)
		}
	})
}

func (s *Sweeper) logger() *slog.Logger { return orDiscard(s.Logger) }

// every runs fn now and then every interval until ctx ends.
func every(ctx context.Context, interval time.Duration, fn func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		fn()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// orDiscard is l, or a logger that discards when l is nil.
func orDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
