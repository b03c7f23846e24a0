package policy

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// HoursUse is an owner's running time (in seconds, as E2B bills it) so far in the day and in the month, UTC, of
// At.
type HoursUse struct {
	Day, Month float64
	At         time.Time
}

// hoursBudget is one of the sandbox-hours limits, as a use is measured against it.
type hoursBudget struct {
	key         string
	period      string  // "today", "this month"
	limit, used float64 // hours
	resets      time.Time
}

func (l Limits) hoursBudgets(u HoursUse) []hoursBudget {
	y, m, d := u.At.UTC().Date()
	var out []hoursBudget
	if l.HoursPerDay > 0 {
		out = append(out, hoursBudget{limitDay, "today", l.HoursPerDay, u.Day / 3600,
			time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC)})
	}
	if l.HoursPerMonth > 0 {
		out = append(out, hoursBudget{limitMonth, "this month", l.HoursPerMonth, u.Month / 3600,
			time.Date(y, m+1, 1, 0, 0, 0, 0, time.UTC)})
	}
	return out
}

// HasHours reports whether l sets a sandbox-hours budget.
func (l Limits) HasHours() bool { return l.HoursPerDay > 0 || l.HoursPerMonth > 0 }

// HoursUsedUp says which sandbox-hours budget u has used up (the first to reset last), and when it resets; "" when
// none is: e.g. `2.00 of 2 sandbox-hours today (sandbox_hours_per_day), which resets at 2026-12-07 00:00 UTC`.
func (l Limits) HoursUsedUp(u HoursUse) string {
	var out []string
	for _, b := range l.hoursBudgets(u) {
		if b.used >= b.limit {
			out = append(out, fmt.Sprintf("%s of %s sandbox-hours %s (%s), which resets at %s", usedText(b.used, b.limit),
				hoursText(b.limit), b.period, b.key, b.resets.Format("2006-01-02 15:04 UTC")))
		}
	}
	return strings.Join(out, "; ")
}

// hoursWarnAt is the share of a sandbox-hours budget from which results carry a warning.
const hoursWarnAt = 0.8

// HoursWarning says which sandbox-hours budgets u has used 80 % or more of, and what happens when they run out;
// "" when none.
func (l Limits) HoursWarning(u HoursUse) string {
	var out []string
	for _, b := range l.hoursBudgets(u) {
		if b.used >= hoursWarnAt*b.limit && b.used < b.limit {
			out = append(out, fmt.Sprintf("%s of %s sandbox-hours %s (%s, %.0f %%)",
				usedText(b.used, b.limit), hoursText(b.limit), b.period, b.key, 100*b.used/b.limit))
		}
	}
	if len(out) == 0 {
		return ""
	}
	return "This owner has used " + strings.Join(out, " and ") + ": when a budget runs out, the owner's running " +
		"sandboxes are paused (their files kept) and no sandbox starts or resumes until it resets."
}

// usedText writes hours used of a limit with two decimals, or three significant digits under a limit below an hour
// (0.000964 of 0.001), so that the use and the limit always differ where they do.
func usedText(used, limit float64) string {
	if limit < 1 {
		return strconv.FormatFloat(used, 'g', 3, 64)
	}
	return strconv.FormatFloat(used, 'f', 2, 64)
}

// hoursText writes hours as short as they go: 2, 0.5.
func hoursText(h float64) string { return strconv.FormatFloat(h, 'f', -1, 64) }
