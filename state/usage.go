package state

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"
)

// Running time is counted as E2B bills it: from a sandbox's create or resume to its pause or end. Every change of
// a record's state goes through putSandbox, which counts there: a record that starts running notes when
// (sandboxV1.RunningSince); one that stops adds the time since to its owner's days in tableUsage, split at
// midnight UTC. A sandbox still running counts up to now (or up to its timeout, when that is past: E2B stopped
// it then) whenever usage is read.

// tableUsage maps (owner, day as "2006-01-02", UTC) to a usageDayV1.
const tableUsage = "usage"

const dayLayout = "2006-01-02"

// usageDayV1 is an owner's use of one day, closed running intervals only.
type usageDayV1 struct {
	Templates   map[string]templateUseV1 `json:"templates,omitempty"`
	PeakRunning int                      `json:"peak_running,omitempty"`
}

type templateUseV1 struct {
	RunningSeconds float64 `json:"running_seconds,omitempty"`
	Created        int     `json:"created,omitempty"`
}

// UsageDay is an owner's use of one day (UTC).
type UsageDay struct {
	Owner string
	Day   time.Time // midnight UTC
	// Templates is the use per template ("" for a sandbox whose template is not known).
	Templates map[string]TemplateUse
	// PeakRunning is the most sandboxes the owner had running at once that day, as far as the store saw: counted
	// whenever one started running, and from those running now.
	PeakRunning int
}

// TemplateUse is the use of one template in a day.
type TemplateUse struct {
	// RunningSeconds is the time the owner's sandboxes of the template ran that day.
	RunningSeconds float64
	// Created counts the sandboxes of the template recorded that day (creates, forks, and sandboxes adopted at
	// reconciliation), running when recorded.
	Created int
}

// RunningSeconds is the day's running time over all templates.
func (d UsageDay) RunningSeconds() float64 {
	var sum float64
	for _, u := range d.Templates {
		sum += u.RunningSeconds
	}
	return sum
}

// DayStart is midnight UTC of t's day.
func DayStart(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// countRunning keeps the running time of a record being written, r, whose stored form before is prev (nil for a
// new record). It returns the RunningSince r is to be stored with. The caller holds the owner.
func (s *records) countRunning(tx recordTx, prev *sandboxV1, r SandboxRecord, now time.Time) (time.Time, error) {
	wasRunning := prev != nil && prev.State == StateRunning
	switch running := r.State == StateRunning; {
	case running && wasRunning:
		if prev.RunningSince.IsZero() {
			return now, nil // recorded before running time was counted: it counts from now
		}
		return prev.RunningSince, nil
	case running:
		since := now
		if prev == nil {
			// A new record: created now, or adopted with the time E2B says it started.
			if c := storedTime(r.Created); !c.IsZero() && c.Before(now) {
				since = c
			}
			if err := s.addUse(tx, r.Owner, since, func(d *usageDayV1) {
				u := d.Templates[r.Template]
				u.Created++
				d.Templates[r.Template] = u
			}); err != nil {
				return time.Time{}, err
			}
		}
		return since, s.notePeak(tx, r.Owner, r.ID, now)
	case wasRunning:
		return time.Time{}, s.closeRun(tx, r.Owner, *prev, now)
	}
	return time.Time{}, nil
}

// closeRun adds the running time of a record that stops running at now to its owner's days.
func (s *records) closeRun(tx recordTx, owner string, prev sandboxV1, now time.Time) error {
	if prev.RunningSince.IsZero() {
		return nil
	}
	for day, secs := range runDays(prev.RunningSince, runEnd(prev, now)) {
		if err := s.addUse(tx, owner, day, func(d *usageDayV1) {
			u := d.Templates[prev.Template]
			u.RunningSeconds += secs
			d.Templates[prev.Template] = u
		}); err != nil {
			return err
		}
	}
	return nil
}

// runEnd is when a run that the store learns has stopped by now ended: now, or its timeout when that came first
// (E2B paused or killed it then, and stopped billing it).
func runEnd(rec sandboxV1, now time.Time) time.Time {
	if !rec.ExpiresAt.IsZero() && rec.ExpiresAt.Before(now) {
		return rec.ExpiresAt
	}
	return now
}

// runDays splits [from, to) into the seconds of each day (UTC) it covers.
func runDays(from, to time.Time) map[time.Time]float64 {
	out := map[time.Time]float64{}
	for from.Before(to) {
		next := DayStart(from).AddDate(0, 0, 1)
		end := to
		if next.Before(end) {
			end = next
		}
		out[DayStart(from)] += end.Sub(from).Seconds()
		from = end
	}
	return out
}

// addUse changes the owner's record of day.
func (s *records) addUse(tx recordTx, owner string, day time.Time, change func(*usageDayV1)) error {
	id := day.UTC().Format(dayLayout)
	var d usageDayV1
	v, err := tx.get(tableUsage, owner, id)
	if err != nil {
		return err
	}
	if v != nil {
		if err := s.decode(tableUsage, owner, id, v, &d); err != nil {
			return err
		}
	}
	if d.Templates == nil {
		d.Templates = map[string]templateUseV1{}
	}
	change(&d)
	return put(tx, tableUsage, owner, id, d)
}

// notePeak raises today's peak to the owner's running sandboxes, id among them.
func (s *records) notePeak(tx recordTx, owner, id string, now time.Time) error {
	running := 1
	err := tx.each(tableSandboxes, owner, func(_, other string, v []byte) error {
		var rec struct {
			State string `json:"state"`
		}
		if other != id && json.Unmarshal(v, &rec) == nil && rec.State == StateRunning {
			running++
		}
		return nil
	})
	if err != nil {
		return err
	}
	return s.addUse(tx, owner, now, func(d *usageDayV1) { d.PeakRunning = max(d.PeakRunning, running) })
}

// Usage returns the use of owner ("" for every owner) on each day from since's day to today (UTC), sorted by owner
// then day; a day without any use is left out. Sandboxes running now count up to now.
func (s *records) Usage(owner string, since time.Time) ([]UsageDay, error) {
	if owner != "" {
		if err := checkName("owner", owner); err != nil {
			return nil, err
		}
	}
	first := DayStart(since).Format(dayLayout)
	var out []UsageDay
	err := s.db.view(func(tx recordTx) error {
		now := storedTime(s.now())
		days := map[string]map[string]*UsageDay{} // owner → day → use
		dayOf := func(owner string, day time.Time) *UsageDay {
			if days[owner] == nil {
				days[owner] = map[string]*UsageDay{}
			}
			key := day.Format(dayLayout)
			d := days[owner][key]
			if d == nil {
				d = &UsageDay{Owner: owner, Day: day, Templates: map[string]TemplateUse{}}
				days[owner][key] = d
			}
			return d
		}
		err := tx.each(tableUsage, owner, func(owner, id string, v []byte) error {
			if id < first {
				return nil
			}
			day, err := time.Parse(dayLayout, id)
			if err != nil {
				return damaged(s.where, tableUsage, owner, id, fmt.Errorf("not a day: %v", err))
			}
			var rec usageDayV1
			if err := s.decode(tableUsage, owner, id, v, &rec); err != nil {
				return err
			}
			d := dayOf(owner, day)
			for t, u := range rec.Templates {
				d.Templates[t] = TemplateUse(u)
			}
			d.PeakRunning = rec.PeakRunning
			return nil
		})
		if err != nil {
			return err
		}
		running := map[string]map[time.Time]int{} // owner → day → sandboxes running now that ran that day
		err = tx.each(tableSandboxes, owner, func(owner, id string, v []byte) error {
			var rec sandboxV1
			if err := s.decode(tableSandboxes, owner, id, v, &rec); err != nil {
				return err
			}
			if rec.State != StateRunning || rec.RunningSince.IsZero() {
				return nil
			}
			for day, secs := range runDays(rec.RunningSince, runEnd(rec, now)) {
				if day.Format(dayLayout) < first {
					continue
				}
				d := dayOf(owner, day)
				u := d.Templates[rec.Template]
				u.RunningSeconds += secs
				d.Templates[rec.Template] = u
				if running[owner] == nil {
					running[owner] = map[time.Time]int{}
				}
				running[owner][day]++
			}
			return nil
		})
		if err != nil {
			return err
		}
		out = nil
		for _, o := range slices.Sorted(maps.Keys(days)) {
			for _, key := range slices.Sorted(maps.Keys(days[o])) {
				d := days[o][key]
				// The sandboxes running now that ran on a day were all running at its end (or now) together.
				d.PeakRunning = max(d.PeakRunning, running[o][d.Day])
				out = append(out, *d)
			}
		}
		return nil
	})
	return out, err
}

// RunningSecondsSince sums the running time of days from since's day on.
func RunningSecondsSince(days []UsageDay, since time.Time) float64 {
	var sum float64
	for _, d := range days {
		if !d.Day.Before(DayStart(since)) {
			sum += d.RunningSeconds()
		}
	}
	return sum
}

// OwnerUsage is an owner's use over several days.
type OwnerUsage struct {
	Owner          string
	RunningSeconds float64
	Created        int
	// PeakRunning is the most sandboxes running at once on any of the days.
	PeakRunning int
	Templates   map[string]TemplateUse
}

// SumUsage adds the days of each owner up, sorted by owner.
func SumUsage(days []UsageDay) []OwnerUsage {
	by := map[string]*OwnerUsage{}
	for _, d := range days {
		o := by[d.Owner]
		if o == nil {
			o = &OwnerUsage{Owner: d.Owner, Templates: map[string]TemplateUse{}}
			by[d.Owner] = o
		}
		o.PeakRunning = max(o.PeakRunning, d.PeakRunning)
		for t, u := range d.Templates {
			sum := o.Templates[t]
			sum.RunningSeconds += u.RunningSeconds
			sum.Created += u.Created
			o.Templates[t] = sum
			o.RunningSeconds += u.RunningSeconds
			o.Created += u.Created
		}
	}
	out := make([]OwnerUsage, 0, len(by))
	for _, owner := range slices.Sorted(maps.Keys(by)) {
		out = append(out, *by[owner])
	}
	return out
}
