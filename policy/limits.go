package policy

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// Limits bound what one owner's assistant may create and keep running. A zero number means no bound; nil
// Templates means any template.
type Limits struct {
	// LiveSandboxes bounds the owner's running and paused sandboxes together.
	LiveSandboxes int
	// RunningSandboxes bounds the owner's running sandboxes.
	RunningSandboxes int
	// ForksPerSandbox bounds the forks of one sandbox that exist at once (running or paused).
	ForksPerSandbox int
	// MaxTimeoutSeconds bounds the timeout_seconds of a create or resume.
	MaxTimeoutSeconds int
	// Templates are the patterns (globs, as in a rule's template condition) a new sandbox's template must match.
	Templates []string
	// HoursPerDay and HoursPerMonth bound the owner's sandbox-hours (running time, as E2B bills it) of a day and
	// of a calendar month, UTC. Used up, the owner's running sandboxes are paused and no new work starts until
	// the budget resets.
	HoursPerDay, HoursPerMonth float64

	templates []glob
}

// The keys of a limits mapping, in the order messages list them.
const (
	limitLive     = "live_sandboxes"
	limitRunning  = "running_sandboxes"
	limitForks    = "forks_per_sandbox"
	limitTimeout  = "max_timeout_seconds"
	limitTemplate = "templates"
	limitDay      = "sandbox_hours_per_day"
	limitMonth    = "sandbox_hours_per_month"
)

var limitKeys = []string{limitLive, limitRunning, limitForks, limitTimeout, limitTemplate, limitDay, limitMonth}

// maxLimit bounds a number in limits: far above any real account, low enough for every int.
const maxLimit = 1_000_000_000

// limitsSection is the parsed limits: the default of every owner and each owner's overrides.
type limitsSection struct {
	def    Limits
	owners map[string]limitsOverride
}

// limitsOverride is an owner's limits: the fields it sets replace the default's.
type limitsOverride struct {
	set    map[string]bool
	limits Limits
}

// Limits returns owner's limits: the policy's default with the owner's overrides. A nil policy has none.
func (p *Policy) Limits(owner string) Limits {
	if p == nil {
		return Limits{}
	}
	l := p.limits.def
	o, ok := p.limits.owners[owner]
	if !ok {
		return l
	}
	if o.set[limitLive] {
		l.LiveSandboxes = o.limits.LiveSandboxes
	}
	if o.set[limitRunning] {
		l.RunningSandboxes = o.limits.RunningSandboxes
	}
	if o.set[limitForks] {
		l.ForksPerSandbox = o.limits.ForksPerSandbox
	}
	if o.set[limitTimeout] {
		l.MaxTimeoutSeconds = o.limits.MaxTimeoutSeconds
	}
	if o.set[limitTemplate] {
		l.Templates, l.templates = o.limits.Templates, o.limits.templates
	}
	if o.set[limitDay] {
		l.HoursPerDay = o.limits.HoursPerDay
	}
	if o.set[limitMonth] {
		l.HoursPerMonth = o.limits.HoursPerMonth
	}
	return l
}

// TemplateAllowed reports whether a new sandbox may start from template.
func (l Limits) TemplateAllowed(template string) bool {
	if l.Templates == nil {
		return true
	}
	return slices.ContainsFunc(l.templates, func(g glob) bool { return g.match(template) })
}

// CheckNew says why a new sandbox of template with timeout seconds is refused by l, or "" when it is not: the
// limits that need no count of the owner's sandboxes.
func (l Limits) CheckNew(template string, timeout int) string {
	if !l.TemplateAllowed(template) {
		return fmt.Sprintf("template %q is not one of the templates allowed (%s): use one of those", template,
			strings.Join(l.Templates, ", "))
	}
	return l.CheckTimeout(timeout)
}

// CheckTimeout says why a timeout of seconds is refused by l, or "" when it is not.
func (l Limits) CheckTimeout(seconds int) string {
	if l.MaxTimeoutSeconds > 0 && seconds > l.MaxTimeoutSeconds {
		return fmt.Sprintf("timeout_seconds %d is above the longest allowed, %d: ask for %d or less", seconds,
			l.MaxTimeoutSeconds, l.MaxTimeoutSeconds)
	}
	return ""
}

// String lists the limits set, e.g. "running_sandboxes 3, templates base, python-*"; "none" when none is.
func (l Limits) String() string {
	var parts []string
	for _, f := range []struct {
		key string
		n   int
	}{{limitLive, l.LiveSandboxes}, {limitRunning, l.RunningSandboxes}, {limitForks, l.ForksPerSandbox},
		{limitTimeout, l.MaxTimeoutSeconds}} {
		if f.n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", f.key, f.n))
		}
	}
	if l.Templates != nil {
		parts = append(parts, limitTemplate+" "+strings.Join(l.Templates, ", "))
	}
	for _, f := range []struct {
		key   string
		hours float64
	}{{limitDay, l.HoursPerDay}, {limitMonth, l.HoursPerMonth}} {
		if f.hours > 0 {
			parts = append(parts, fmt.Sprintf("%s %s", f.key, hoursText(f.hours)))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

// limitsSection reads limits: {default: LIMITS, owners: {NAME: LIMITS, ...}}.
func (ps *parser) limitsSection(n *yaml.Node) limitsSection {
	var out limitsSection
	if n.Kind != yaml.MappingNode {
		ps.errorf(n, "limits must be a mapping with default and owners, got %s", kindName(n))
		return out
	}
	fs := ps.fields(n, "key in limits", []string{"default", "owners"})
	if f, ok := lookup(fs, "default"); ok {
		out.def = ps.limits(f.val, "limits.default").limits
	}
	f, ok := lookup(fs, "owners")
	if !ok {
		return out
	}
	if f.val.Kind != yaml.MappingNode {
		ps.errorf(f.val, "limits.owners must be a mapping from owner to limits, got %s", kindName(f.val))
		return out
	}
	out.owners = map[string]limitsOverride{}
	for i := 0; i+1 < len(f.val.Content); i += 2 {
		k, v := f.val.Content[i], f.val.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" || k.Value == "" {
			ps.errorf(k, "an owner in limits.owners must be a non-empty string, got %s%s", kindName(k), quoteHint(k))
			continue
		}
		if _, dup := out.owners[k.Value]; dup {
			ps.errorf(k, "duplicate owner %q in limits.owners", clipForDisplay(k.Value))
			continue
		}
		out.owners[k.Value] = ps.limits(v, fmt.Sprintf("limits.owners.%s", clipForDisplay(k.Value)))
	}
	return out
}

// limits reads one set of limits. A number is a whole number from 1 to maxLimit, or "unlimited" (an owner's
// override lifting the default's bound).
func (ps *parser) limits(n *yaml.Node, what string) limitsOverride {
	out := limitsOverride{set: map[string]bool{}}
	if n.Kind != yaml.MappingNode {
		ps.errorf(n, "%s must be a mapping of %s, got %s", what, strings.Join(limitKeys, ", "), kindName(n))
		return out
	}
	for _, f := range ps.fields(n, "limit in "+what, limitKeys) {
		key := f.key.Value
		switch key {
		case limitTemplate:
			out.limits.Templates, out.limits.templates = ps.templateList(f.val, what+"."+key)
		case limitDay, limitMonth:
			v, ok := ps.limitHours(f.val, what+"."+key)
			if !ok {
				continue
			}
			if key == limitDay {
				out.limits.HoursPerDay = v
			} else {
				out.limits.HoursPerMonth = v
			}
		default:
			v, ok := ps.limitNumber(f.val, what+"."+key)
			if !ok {
				continue
			}
			switch key {
			case limitLive:
				out.limits.LiveSandboxes = v
			case limitRunning:
				out.limits.RunningSandboxes = v
			case limitForks:
				out.limits.ForksPerSandbox = v
			case limitTimeout:
				out.limits.MaxTimeoutSeconds = v
			}
		}
		out.set[key] = true
	}
	l := out.limits
	if l.LiveSandboxes > 0 && l.RunningSandboxes > l.LiveSandboxes {
		ps.errorf(n, "%s: running_sandboxes %d is more than live_sandboxes %d (running ones are live too)",
			what, l.RunningSandboxes, l.LiveSandboxes)
	}
	if l.HoursPerMonth > 0 && l.HoursPerDay > l.HoursPerMonth {
		ps.errorf(n, "%s: %s %s is more than %s %s (a day is part of its month)",
			what, limitDay, hoursText(l.HoursPerDay), limitMonth, hoursText(l.HoursPerMonth))
	}
	return out
}

// limitHours reads a number of sandbox-hours: more than 0 (fractions allowed, e.g. 0.5) up to maxLimit, or
// "unlimited".
func (ps *parser) limitHours(n *yaml.Node, what string) (float64, bool) {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" && n.Value == "unlimited" {
		return 0, true
	}
	v, ok := ps.number(n, what)
	if !ok {
		return 0, false
	}
	if v <= 0 || v > maxLimit {
		ps.errorf(n, "%s must be a number of hours above 0 and at most %d, or unlimited; got %s", what, maxLimit, n.Value)
		return 0, false
	}
	return v, true
}

func (ps *parser) limitNumber(n *yaml.Node, what string) (int, bool) {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" && n.Value == "unlimited" {
		return 0, true
	}
	v, ok := ps.number(n, what)
	if !ok {
		return 0, false
	}
	if v != math.Trunc(v) || v < 1 || v > maxLimit {
		ps.errorf(n, "%s must be a whole number from 1 to %d, or unlimited; got %s (to forbid something, write a "+
			"rule that denies it)",
			what, maxLimit, n.Value)
		return 0, false
	}
	return int(v), true
}

// templateList reads a list of template patterns; an empty list would allow no sandbox at all and is refused.
func (ps *parser) templateList(n *yaml.Node, what string) ([]string, []glob) {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" && n.Value == "unlimited" {
		return nil, nil
	}
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		ps.errorf(n, "%s must be a non-empty list of template names or patterns (e.g. [base, \"python-*\"]), or unlimited; "+
			"got %s",
			what, kindName(n))
		return nil, nil
	}
	var pats []string
	var globs []glob
	for _, e := range n.Content {
		if e.Kind != yaml.ScalarNode || e.ShortTag() != "!!str" {
			ps.errorf(e, "a template in %s must be a string, got %s%s", what, kindName(e), quoteHint(e))
			continue
		}
		g, err := compileGlob(e.Value, globText)
		if err != nil {
			ps.errorf(e, "template pattern %q in %s: %v", clipForDisplay(e.Value), what, err)
			continue
		}
		pats, globs = append(pats, e.Value), append(globs, g)
	}
	return pats, globs
}
