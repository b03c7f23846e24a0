package policy

import (
	"strings"
	"testing"
	"time"
)

const limitsPolicy = `default_action: allow
limits:
  default:
    live_sandboxes: 10
    running_sandboxes: 3
    forks_per_sandbox: 4
    max_timeout_seconds: 3600
    templates: [base, "python-*"]
    sandbox_hours_per_day: 2
    sandbox_hours_per_month: 40
  owners:
    alice: { running_sandboxes: 8, templates: unlimited, sandbox_hours_per_day: 0.5 }
    bob: { max_timeout_seconds: unlimited, sandbox_hours_per_month: unlimited }
rules: []
`

func TestLimitsDefaultAndOverrides(t *testing.T) {
	p, err := Parse("p.yaml", []byte(limitsPolicy))
	if err != nil {
		t.Fatal(err)
	}
	def := p.Limits("carol")
	if def.LiveSandboxes != 10 || def.RunningSandboxes != 3 || def.MaxTimeoutSeconds != 3600 ||
		strings.Join(def.Templates, ",") != "base,python-*" {
		t.Fatalf("an owner without overrides: %+v", def)
	}
	if def.HoursPerDay != 2 || def.HoursPerMonth != 40 || def.ForksPerSandbox != 4 {
		t.Fatalf("an owner without overrides: %v hours a day, %v a month", def.HoursPerDay, def.HoursPerMonth)
	}
	if !def.TemplateAllowed("python-3.12") || def.TemplateAllowed("desktop") {
		t.Fatalf("templates [base, python-*] allow python-3.12 and refuse desktop: %v, %v",
			def.TemplateAllowed("python-3.12"), def.TemplateAllowed("desktop"))
	}
	if why := def.CheckNew("desktop", 60); !strings.Contains(why, `template "desktop" is not one of the templates allowed (base, python-*)`) {
		t.Fatalf("CheckNew(desktop) = %q", why)
	}
	if why := def.CheckNew("base", 7200); !strings.Contains(why, "timeout_seconds 7200 is above the longest allowed, 3600") {
		t.Fatalf("CheckNew(base, 7200) = %q", why)
	}
	if why := def.CheckNew("base", 3600); why != "" {
		t.Fatalf("CheckNew within the limits = %q", why)
	}
	alice := p.Limits("alice")
	if alice.RunningSandboxes != 8 || alice.LiveSandboxes != 10 || !alice.TemplateAllowed("desktop") ||
		alice.HoursPerDay != 0.5 || alice.HoursPerMonth != 40 {
		t.Fatalf("alice's overrides on the default: %+v", alice)
	}
	bob := p.Limits("bob")
	if bob.MaxTimeoutSeconds != 0 || bob.RunningSandboxes != 3 || bob.CheckTimeout(86400) != "" ||
		bob.HoursPerMonth != 0 || bob.HoursPerDay != 2 {
		t.Fatalf("bob's unlimited timeout: %+v", bob)
	}
	if got := Default().Limits("anyone"); got.String() != "none" {
		t.Fatalf("the built-in policy's limits = %s, want none", got)
	}
	var nilPolicy *Policy
	if got := nilPolicy.Limits("x"); got.String() != "none" {
		t.Fatalf("a nil policy's limits = %s", got)
	}
}

func TestLimitsBadValues(t *testing.T) {
	for _, tc := range []struct{ limits, want string }{
		{"limits: 5", "limits must be a mapping with default and owners, got a number"},
		{"limits: {defaults: {}}", `unknown key in limits "defaults" (did you mean "default"?)`},
		{"limits: {default: {running_sandbox: 3}}", `unknown limit in limits.default "running_sandbox" (did you mean "running_sandboxes"?)`},
		{"limits: {default: {running_sandboxes: 0}}", "limits.default.running_sandboxes must be a whole number from 1 to 1000000000, or unlimited; got 0"},
		{"limits: {default: {live_sandboxes: -2}}", "limits.default.live_sandboxes must be a whole number from 1"},
		{"limits: {default: {live_sandboxes: 2.5}}", "got 2.5"},
		{"limits: {default: {live_sandboxes: lots}}", "limits.default.live_sandboxes must be a number, got a string"},
		{"limits: {default: {max_timeout_seconds: 1e12}}", "max_timeout_seconds must be a whole number from 1 to 1000000000"},
		{"limits: {default: {live_sandboxes: 2, running_sandboxes: 3}}", "running_sandboxes 3 is more than live_sandboxes 2"},
		{"limits: {default: {templates: []}}", "limits.default.templates must be a non-empty list"},
		{"limits: {default: {templates: [base, 7]}}", `a template in limits.default.templates must be a string, got a number (quote it if you mean the text "7")`},
		{"limits: {owners: [alice]}", "limits.owners must be a mapping from owner to limits, got a list"},
		{"limits: {owners: {alice: {running_sandboxes: 2}, alice: {live_sandboxes: 3}}}", `duplicate owner "alice" in limits.owners`},
		{"limits: {owners: {alice: 3}}", "limits.owners.alice must be a mapping of live_sandboxes, running_sandboxes, forks_per_sandbox, max_timeout_seconds, templates, sandbox_hours_per_day, sandbox_hours_per_month, got a number"},
		{"limits: {default: {forks_per_sandbox: 0}}", "limits.default.forks_per_sandbox must be a whole number from 1"},
		{"limits: {default: {sandbox_hours_per_day: 0}}", "limits.default.sandbox_hours_per_day must be a number of hours above 0 and at most 1000000000, or unlimited; got 0"},
		{"limits: {default: {sandbox_hours_per_month: -1}}", "limits.default.sandbox_hours_per_month must be a number of hours above 0"},
		{"limits: {default: {sandbox_hours_per_day: many}}", "limits.default.sandbox_hours_per_day must be a number, got a string"},
		{"limits: {default: {sandbox_hours_per_day: 30, sandbox_hours_per_month: 20}}", "sandbox_hours_per_day 30 is more than sandbox_hours_per_month 20"},
	} {
		_, err := Parse("p.yaml", []byte("default_action: allow\n"+tc.limits+"\nrules: []\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "p.yaml:2: ") {
			t.Errorf("%s:\n got %v\nwant p.yaml:2: ...%s", tc.limits, err, tc.want)
		}
	}
}

// A sandbox-hours budget is used up at its limit and warned of from 80 %, each message naming the limit, the use
// and when it resets (the next midnight UTC, the first of the next month).
func TestHoursBudgets(t *testing.T) {
	l := Limits{HoursPerDay: 2, HoursPerMonth: 40}
	at := time.Date(2026, 12, 31, 22, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		day, month    float64 // hours
		usedUp, warns string
	}{
		{1.5, 10, "", ""},
		{1.6, 10, "", "This owner has used 1.60 of 2 sandbox-hours today (sandbox_hours_per_day, 80 %): when a budget runs out"},
		{2, 10, "2.00 of 2 sandbox-hours today (sandbox_hours_per_day), which resets at 2027-01-01 00:00 UTC", ""},
		{1, 33, "", "33.00 of 40 sandbox-hours this month (sandbox_hours_per_month, 82 %)"},
		{2.5, 41, "today (sandbox_hours_per_day), which resets at 2027-01-01 00:00 UTC; 41.00 of 40 sandbox-hours this month (sandbox_hours_per_month), which resets at 2027-01-01 00:00 UTC", ""},
	} {
		u := HoursUse{Day: tc.day * 3600, Month: tc.month * 3600, At: at}
		if got := l.HoursUsedUp(u); (tc.usedUp == "") != (got == "") || !strings.Contains(got, tc.usedUp) {
			t.Errorf("%v h today, %v h this month: used up %q, want %q", tc.day, tc.month, got, tc.usedUp)
		}
		if got := l.HoursWarning(u); (tc.warns == "") != (got == "") || !strings.Contains(got, tc.warns) {
			t.Errorf("%v h today, %v h this month: warning %q, want %q", tc.day, tc.month, got, tc.warns)
		}
	}
	small := Limits{HoursPerDay: 0.001}.HoursWarning(HoursUse{Day: 3.47, At: at})
	if !strings.Contains(small, "0.000964 of 0.001 sandbox-hours today (sandbox_hours_per_day, 96 %)") {
		t.Errorf("the warning of a budget under an hour: %q", small)
	}
	if (Limits{}).HasHours() || (Limits{HoursPerDay: 1}.HoursUsedUp(HoursUse{Day: 1e9, At: at})) == "" {
		t.Fatal("HasHours of no limits, or a day budget not used up by 1e9 seconds")
	}
	if got := l.String(); !strings.Contains(got, "sandbox_hours_per_day 2; sandbox_hours_per_month 40") {
		t.Fatalf("String = %q", got)
	}
}
