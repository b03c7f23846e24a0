package tools

import (
	"context"
	"math"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/egress"
	"github.com/e2b-mcp/e2b-mcp/lifecycle"
	"github.com/e2b-mcp/e2b-mcp/state"
)

const listSandboxesName = "e2b_list_sandboxes"

type listArgs struct {
	Offset int `json:"offset,omitempty" jsonschema:"minimum=0" jsonschema_description:"How many sandboxes to skip: next_offset of a list that did not fit in one result."`
}

type sandboxInfo struct {
	SandboxID      string    `json:"sandbox_id"`
	Title          string    `json:"title"`
	Template       string    `json:"template"`
	State          string    `json:"state" jsonschema:"enum=running,enum=paused,enum=gone"`
	PausedBy       string    `json:"paused_by,omitempty" jsonschema:"enum=timeout,enum=call,enum=orphan sweep,enum=budget" jsonschema_description:"For state paused, who paused it: timeout (E2B, when it sat unused for timeout_seconds; the next e2b_exec, e2b_read_file or e2b_write_file resumes it), call (e2b_manage_sandbox), orphan sweep (its session's lease lapsed), budget (the owner's sandbox-hours budget was used up); absent when not known. Only timeout pauses are resumed by use; the others need e2b_manage_sandbox action resume, which a budget pause refuses until the budget resets (a day's at midnight UTC, a month's when the next month begins, UTC)."`
	GoneReason     string    `json:"gone_reason,omitempty" jsonschema_description:"Why the sandbox is gone, for state gone (killed at its timeout, by the orphan sweep, or outside this server)."`
	Created        time.Time `json:"created"`
	TimeoutSeconds int       `json:"timeout_seconds" jsonschema_description:"Seconds the sandbox may sit unused before on_timeout applies."`
	OnTimeout      string    `json:"on_timeout,omitempty" jsonschema:"enum=pause,enum=kill" jsonschema_description:"What E2B does when the timeout runs out; absent when not known."`
	ExpiresAt      time.Time `json:"expires_at,omitzero" jsonschema_description:"For state running: when on_timeout applies unless the sandbox is used before (each use pushes it back)."`
	Steps          int       `json:"steps" jsonschema_description:"How many e2b_exec and e2b_write_file calls it has had."`
}

type listResult struct {
	Count      int           `json:"count" jsonschema_description:"How many sandboxes the session has in all."`
	Truncated  bool          `json:"truncated,omitempty" jsonschema_description:"Set when the rest of the list did not fit in one result: sandboxes holds those from offset on that fit, and a call with offset next_offset lists the next ones."`
	NextOffset int           `json:"next_offset,omitempty" jsonschema_description:"The offset that continues the list, when truncated."`
	Warning    string        `json:"warning,omitempty" jsonschema_description:"Set when E2B could not be asked; the list is then the last known state."`
	Sandboxes  []sandboxInfo `json:"sandboxes" jsonschema_description:"The sandboxes, oldest first, from offset on."`
	Usage      *ownerUsage   `json:"usage,omitempty" jsonschema_description:"The owner's use (all sessions) against each of this server's limits; absent when it could not be read."`
}

// ownerUsage is an owner's use of what the limits bound, with each limit (absent: none).
type ownerUsage struct {
	LiveSandboxes         use `json:"live_sandboxes" jsonschema_description:"Running and paused sandboxes."`
	RunningSandboxes      use `json:"running_sandboxes"`
	SandboxHoursToday     use `json:"sandbox_hours_today" jsonschema_description:"Running time today (UTC), as E2B bills it, in hours."`
	SandboxHoursThisMonth use `json:"sandbox_hours_this_month" jsonschema_description:"Running time this month (UTC), in hours."`
	CreatedThisMonth      int `json:"created_this_month" jsonschema_description:"Sandboxes created this month, forks included."`
	PeakRunningThisMonth  int `json:"peak_running_this_month" jsonschema_description:"The most sandboxes running at once this month."`
}

type use struct {
	Used  float64 `json:"used"`
	Limit float64 `json:"limit,omitempty" jsonschema_description:"The limit; absent when there is none."`
}

// listSandboxes is e2b_list_sandboxes.
type listSandboxes struct{ *base }

func (t listSandboxes) tool() Tool {
	const desc = "List this session's sandboxes, checked with E2B. Shows running ones with when they expire unless " +
		"used, paused ones with who paused them, and gone ones (killed or timed out) with the reason, each with its " +
		"sandbox_id, title, template, state, creation time and step count. Sandboxes of other sessions are not shown. " +
		"A list too long for one result comes in parts: truncated and next_offset say when it goes on and where."
	return define(t.base, definition[listArgs, listResult]{
		name: listSandboxesName, description: desc,
		hints: hints{readOnly: true, destructive: false, idempotent: true, openWorld: true},
		run:   t.run,
	})
}

func (t listSandboxes) run(ctx context.Context, call Caller, a *listArgs) (*listResult, error) {
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
	var budget string
	res.Usage, budget = t.usage(call)
	res.Warning = joinWarnings(res.Warning, budget)
	all := make([]sandboxInfo, 0, len(recs))
	for _, r := range recs {
		all = append(all, describe(r))
	}
	return listPage(ctx, t.base, all, a.Offset, func(page []sandboxInfo, next int) *listResult {
		res.Count, res.Sandboxes, res.Truncated, res.NextOffset = len(all), page, next > 0, next
		return &res
	}), nil
}

// usage is the caller's owner's use against each limit, and the warning of a sandbox-hours budget 80 % used or
// more; nil when the store could not say (the list goes on without it).
func (t listSandboxes) usage(call Caller) (*ownerUsage, string) {
	live, running, err := t.store.SandboxUse(call.Owner)
	if err != nil {
		t.log.Warn("reading an owner's usage", "owner", call.Owner, "err", err)
		return nil, ""
	}
	hours, days, err := lifecycle.HoursUse(t.store, call.Owner, t.now())
	if err != nil {
		t.log.Warn("reading an owner's usage", "owner", call.Owner, "err", err)
		return nil, ""
	}
	l := t.limits(call.Owner)
	u := &ownerUsage{
		LiveSandboxes:         use{float64(live), float64(l.LiveSandboxes)},
		RunningSandboxes:      use{float64(running), float64(l.RunningSandboxes)},
		SandboxHoursToday:     use{roundHours(hours.Day), l.HoursPerDay},
		SandboxHoursThisMonth: use{roundHours(hours.Month), l.HoursPerMonth},
	}
	for _, o := range state.SumUsage(days) {
		u.CreatedThisMonth, u.PeakRunningThisMonth = o.Created, o.PeakRunning
	}
	return u, l.HoursWarning(hours)
}

// roundHours is seconds in hours, to 4 decimals (a third of a second), for a result a model reads.
func roundHours(seconds float64) float64 { return math.Round(seconds/3600*1e4) / 1e4 }

func describe(r state.SandboxRecord) sandboxInfo {
	info := sandboxInfo{
		SandboxID: r.ID, Title: r.Title, Template: r.Template, State: r.State, GoneReason: r.GoneReason,
		Created: r.Created, TimeoutSeconds: r.TimeoutSeconds, OnTimeout: r.OnTimeout, Steps: r.Steps,
	}
	switch r.State {
	case state.StateRunning:
		info.ExpiresAt = r.ExpiresAt
	case state.StatePaused:
		info.PausedBy = r.PausedBy
	}
	return info
}

// onAdopt gives sandboxes the reconciliation adopts their owner's egress configuration, when there is an egress
// source.
func (t listSandboxes) onAdopt(c *e2b.Client) lifecycle.AdoptHook {
	if t.egress == nil {
		return nil
	}
	return egress.OnAdopt(c, t.egress, t.log)
}
