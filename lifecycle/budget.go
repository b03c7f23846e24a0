package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/policy"
	"github.com/e2b-mcp/e2b-mcp/state"
)

// HoursUse is owner's running time so far today and this month (UTC) at now, as the store counts it, and the
// month's days it was read from.
func HoursUse(st state.Store, owner string, now time.Time) (policy.HoursUse, []state.UsageDay, error) {
	now = now.UTC()
	month := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	days, err := st.Usage(owner, month)
	if err != nil {
		return policy.HoursUse{}, nil, err
	}
	return policy.HoursUse{Day: state.RunningSecondsSince(days, now), Month: state.RunningSecondsSince(days, month),
		At: now}, days, nil
}

// Budgets pauses the running sandboxes of the owners whose sandboxes have used up a sandbox-hours budget (the
// policy's sandbox_hours_per_day and _per_month): paused, not killed, so that nothing is lost; the tools refuse
// to start or resume any of the owner's sandboxes until the budget resets. Several processes sharing the store
// may enforce at once: pausing a paused sandbox changes nothing.
type Budgets struct {
	Store state.Store
	// Client returns an E2B client for an owner.
	Client func(ctx context.Context, owner string) (*e2b.Client, error)
	// Limits are an owner's limits of the policy in force.
	Limits func(owner string) policy.Limits
	Now    func() time.Time
	Logger *slog.Logger
	// Paused (nil: nothing) is told of each sandbox paused, with the budget used up, for the audit log.
	Paused func(rec state.SandboxRecord, usedUp string)
}

// BudgetReport says what one enforcement did.
type BudgetReport struct {
	// UsedUp maps each owner with a budget used up to what is used up (policy.Limits.HoursUsedUp).
	UsedUp map[string]string
	Paused []string // sandbox IDs
	Errors []error
}

// Enforce pauses every running sandbox of each owner that has used up a sandbox-hours budget. A sandbox that
// could not be paused is reported, and tried again by the next enforcement.
func (b *Budgets) Enforce(ctx context.Context) (BudgetReport, error) {
	rep := BudgetReport{UsedUp: map[string]string{}}
	now := b.now()
	owners, err := b.Store.Owners()
	if err != nil {
		return rep, err
	}
	for _, owner := range owners {
		l := b.Limits(owner)
		if !l.HasHours() {
			continue
		}
		u, _, err := HoursUse(b.Store, owner, now)
		if err != nil {
			rep.Errors = append(rep.Errors, fmt.Errorf("owner %s: %w", owner, err))
			continue
		}
		if why := l.HoursUsedUp(u); why != "" {
			rep.UsedUp[owner] = why
		}
	}
	if len(rep.UsedUp) == 0 {
		return rep, nil
	}
	recs, err := b.Store.AllSandboxes()
	if err != nil {
		return rep, err
	}
	for _, rec := range recs {
		why, spent := rep.UsedUp[rec.Owner]
		if !spent || rec.State != state.StateRunning {
			continue
		}
		if err := b.pause(ctx, rec, why); err != nil {
			rep.Errors = append(rep.Errors, fmt.Errorf("pausing sandbox %s of %s: %w", rec.ID, rec.Owner, err))
			continue
		}
		rep.Paused = append(rep.Paused, rec.ID)
	}
	for _, err := range rep.Errors {
		b.logger().Warn("sandbox-hours budget", "error", err)
	}
	return rep, nil
}

func (b *Budgets) pause(ctx context.Context, rec state.SandboxRecord, why string) error {
	c, err := b.Client(ctx, rec.Owner)
	if err != nil {
		return err
	}
	already, err := c.PauseSandbox(ctx, rec.ID)
	gone := errors.Is(err, e2b.ErrNotFound)
	if err != nil && !gone {
		return err
	}
	_, err = b.Store.UpdateSandbox(rec.Owner, rec.ID, func(r *state.SandboxRecord) error {
		switch {
		case r.State != state.StateRunning:
			// Changed since it was read: paused or gone by another hand.
		case gone:
			r.State, r.GoneReason, r.PausedBy = state.StateGone, GoneReason(*r, b.now()), ""
		case already:
			r.State, r.PausedBy = state.StatePaused, PausedByE2B(*r)
		default:
			r.State, r.PausedBy = state.StatePaused, state.PausedByBudget
		}
		return nil
	})
	if err != nil {
		return err
	}
	if !gone && !already && b.Paused != nil {
		b.Paused(rec, why)
	}
	return nil
}

// Run enforces now and then every interval until ctx ends.
func (b *Budgets) Run(ctx context.Context, interval time.Duration) {
	every(ctx, interval, func() {
		if _, err := b.Enforce(ctx); err != nil {
			b.logger().Warn("enforcing sandbox-hours budgets failed", "error", err)
		}
	})
}

func (b *Budgets) now() time.Time {
	if b.Now == nil {
		return time.Now()
	}
	return b.Now()
}

func (b *Budgets) logger() *slog.Logger { return orDiscard(b.Logger) }
