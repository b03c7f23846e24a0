package policy

import (
	"strings"
	"testing"
)

const limitsPolicy = `default_action: allow
limits:
  default:
    live_sandboxes: 10
    running_sandboxes: 3
    max_timeout_seconds: 3600
    templates: [base, "python-*"]
  owners:
    alice: { running_sandboxes: 8, templates: unlimited }
    bob: { max_timeout_seconds: unlimited }
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
	if alice.RunningSandboxes != 8 || alice.LiveSandboxes != 10 || !alice.TemplateAllowed("desktop") {
		t.Fatalf("alice's overrides on the default: %+v", alice)
	}
	bob := p.Limits("bob")
	if bob.MaxTimeoutSeconds != 0 || bob.RunningSandboxes != 3 || bob.CheckTimeout(86400) != "" {
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
		{"limits: {owners: {alice: 3}}", "limits.owners.alice must be a mapping of live_sandboxes, running_sandboxes, max_timeout_seconds, templates, got a number"},
	} {
		_, err := Parse("p.yaml", []byte("default_action: allow\n"+tc.limits+"\nrules: []\n"))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "p.yaml:2: ") {
			t.Errorf("%s:\n got %v\nwant p.yaml:2: ...%s", tc.limits, err, tc.want)
		}
	}
}
