package policy

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func args(kv ...any) map[string]any {
	m := map[string]any{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

func uploads(paths ...string) []any {
	var out []any
	for _, p := range paths {
		out = append(out, map[string]any{"session_path": "local.txt", "sandbox_path": p})
	}
	return out
}

// TestConditions runs one rule "when" against calls: the rule's decision when it
// matches, default_action (the opposite) when it does not.
func TestConditions(t *testing.T) {
	type tc struct {
		name     string
		when     string
		decision Action // rule decision; Allow when empty
		call     Call
		match    bool
	}
	exec := func(cmd string) Call { return Call{Tool: toolExec, Args: args("sandbox_id", "s", "command", cmd)} }
	read := func(p string) Call { return Call{Tool: toolReadFile, Args: args("sandbox_id", "s", "path", p)} }
	create := func(kv ...any) Call { return Call{Tool: toolCreateSandbox, Args: args(kv...)} }
	fork := func(n any) Call { return Call{Tool: toolForkSandbox, Args: args("sandbox_id", "s", "count", n)} }
	manage := func(kv ...any) Call { return Call{Tool: toolManageSandbox, Args: args(kv...)} }
	cases := []tc{
		// target / targets
		{"target exact", `{target: e2b_exec}`, "", exec("ls"), true},
		{"target other tool", `{target: e2b_exec}`, "", read("/a"), false},
		{"target glob", `{target: "e2b_*"}`, "", read("/a"), true},
		{"target glob suffix", `{target: "e2b_*_sandbox"}`, "", create(), true},
		{"target glob suffix no", `{target: "e2b_*_sandbox"}`, "", exec("ls"), false},
		{"target list form", `{target: [e2b_exec, e2b_read_file]}`, "", read("/a"), true},
		{"targets list", `{targets: [e2b_read_file, e2b_list_sandboxes]}`, "", Call{Tool: toolListSandboxes}, true},
		{"targets list miss", `{targets: [e2b_read_file, e2b_list_sandboxes]}`, "", exec("ls"), false},
		{"targets single string", `{targets: e2b_exec}`, "", exec("ls"), true},
		{"target unknown tool at runtime", `{target: "e2b_*"}`, "", Call{Tool: "other_tool"}, false},
		{"target checkpoint policy", `{target: e2b_set_checkpoint_policy}`, "", Call{Tool: toolSetCheckpointPolicy, Args: args("sandbox_id", "s", "every_steps", 1.0)}, true},

		// command
		{"command glob", `{command: "git push*--force*"}`, "", exec("git push origin main --force"), true},
		{"command glob no", `{command: "git push*--force*"}`, "", exec("git push origin main"), false},
		{"command star spans slash and space", `{command: "rm -rf /*"}`, "", exec("rm -rf /home/user/x y"), true},
		{"command anchored", `{command: "git push*"}`, "", exec("cd /x && git push"), false},
		{"command leading star", `{command: "*git push*"}`, "", exec("cd /x && git push"), true},
		{"command star spans newline", `{command: "*git push*"}`, "", exec("echo hi\ngit push"), true},
		{"command list any of", `{command: ["curl *", "wget *"]}`, "", exec("wget http://x"), true},
		{"command list none", `{command: ["curl *", "wget *"]}`, "", exec("ls"), false},
		{"command question and class", `{command: "ls -[al]?"}`, "", exec("ls -la"), true},
		{"command class no", `{command: "ls -[al]?"}`, "", exec("ls -xa"), false},
		{"command escaped star literal", `{command: 'echo \*'}`, "", exec("echo *"), true},
		{"command escaped star not wild", `{command: 'echo \*'}`, "", exec("echo x"), false},
		{"command missing", `{command: "*"}`, "", Call{Tool: toolExec, Args: args("sandbox_id", "s")}, false},
		{"command not a string", `{command: "*"}`, "", Call{Tool: toolExec, Args: args("command", 3.0)}, false},
		{"command on another tool", `{target: "e2b_*", command: "*"}`, "", Call{Tool: toolReadFile, Args: args("command", "x")}, false},
		{"command nil args", `{command: "*"}`, "", Call{Tool: toolExec}, false},
		{"command case sensitive", `{command: "rm*"}`, "", exec("RM x"), false},

		// path
		{"path dir and below", `{path: "/etc/**"}`, "", read("/etc/passwd"), true},
		{"path dir itself", `{path: "/etc/**"}`, "", read("/etc"), true},
		{"path deep", `{path: "/etc/**"}`, "", read("/etc/ssl/certs/x.pem"), true},
		{"path sibling prefix", `{path: "/etc/**"}`, "", read("/etcx/passwd"), false},
		{"path elsewhere", `{path: "/etc/**"}`, "", read("/home/etc/passwd"), false},
		{"path star one segment", `{path: "/home/user/*"}`, "", read("/home/user/a.txt"), true},
		{"path star not deeper", `{path: "/home/user/*"}`, "", read("/home/user/a/b.txt"), false},
		{"path leading globstar", `{path: "**/.env"}`, "", read("/home/user/proj/.env"), true},
		{"path leading globstar relative", `{path: "**/.env"}`, "", read(".env"), true},
		{"path leading globstar no", `{path: "**/.env"}`, "", read("/home/user/.envrc"), false},
		{"path middle globstar zero dirs", `{path: "/home/**/secrets"}`, "", read("/home/secrets"), true},
		{"path middle globstar many dirs", `{path: "/home/**/secrets"}`, "", read("/home/a/b/secrets"), true},
		{"path negated class stays in segment", `{path: "/a[!x]b"}`, "", read("/a/b"), false},
		{"path negated class", `{path: "/a[!x]b"}`, "", read("/ayb"), true},
		{"path question stays in segment", `{path: "/a?b"}`, "", read("/a/b"), false},
		{"path traversal cleaned for deny", `{path: "/etc/**"}`, Deny, read("/home/user/../../etc/passwd"), true},
		{"path traversal cleaned for allow", `{path: "/home/user/**"}`, "", read("/home/user/../../etc/passwd"), false},
		{"path double slash cleaned", `{path: "/etc/passwd"}`, Deny, read("//etc//passwd"), true},
		{"path list any of", `{path: ["/tmp/**", "/home/**"]}`, "", read("/home/u/x"), true},
		// Paths as the sandbox resolves them: relative to /home/user, "~" expanded, "" the home itself.
		{"path relative traversal to tmp", `{path: "/tmp/**"}`, Deny, read("../../tmp/t.txt"), true},
		{"path relative traversal to etc", `{path: "/etc/**"}`, Deny, read("../../etc/passwd"), true},
		{"path relative escapes allow", `{path: "/home/user/**"}`, Allow, read("../../etc/passwd"), false},
		{"path relative is under home", `{path: "/home/user/**"}`, Allow, read("notes/todo.txt"), true},
		{"path dot relative", `{path: "/home/user/.bashrc"}`, Deny, read("./.bashrc"), true},
		{"path tilde", `{path: "/home/user/.ssh/**"}`, Deny, read("~/.ssh/id_rsa"), true},
		{"path tilde alone", `{path: "/home/user"}`, Deny, read("~"), true},
		{"path empty is home", `{path: "/home/user"}`, Deny, read(""), true},
		{"path relative write", `{path: "/etc/**"}`, Deny, Call{Tool: toolWriteFile, Args: args("path", "../../etc/cron.d/x", "content", "x")}, true},
		{"path upload relative target", `{path: "/etc/**"}`, Deny, create("upload_files", uploads("../../etc/cron.d/x")), true},
		{"path upload default target", `{path: "**/.ssh/**"}`, Deny,
			create("upload_files", []any{map[string]any{"session_path": ".ssh"}}), true},
		{"path upload default target is the last element", `{path: "/home/user/id_rsa"}`, Deny,
			create("upload_files", []any{map[string]any{"session_path": "keys/id_rsa"}}), true},
		{"path upload default target for allow", `{path: "/home/user/**"}`, Allow,
			create("upload_files", []any{map[string]any{"session_path": "/srv/data/x.txt"}}), true},
		{"path upload of a whole root lands under home", `{path: "/home/user/**"}`, Deny,
			create("upload_files", []any{map[string]any{"session_path": "."}}), true},
		{"path upload empty sandbox_path takes the default", `{path: "/home/user/a.txt"}`, Deny,
			create("upload_files", []any{map[string]any{"session_path": "a.txt", "sandbox_path": ""}}), true},
		{"path write_file", `{target: e2b_write_file, path: "/home/**"}`, "", Call{Tool: toolWriteFile, Args: args("path", "/home/u/x", "content", "x")}, true},
		{"path missing", `{path: "**"}`, "", Call{Tool: toolReadFile, Args: args("sandbox_id", "s")}, false},
		{"path on exec", `{path: "**"}`, "", Call{Tool: toolExec, Args: args("command", "ls", "path", "/x")}, false},
		{"path uploads allow all covered", `{path: "/home/user/**"}`, Allow, create("upload_files", uploads("/home/user/a", "/home/user/b/c")), true},
		{"path uploads allow one outside", `{path: "/home/user/**"}`, Allow, create("upload_files", uploads("/home/user/a", "/etc/cron.d/x")), false},
		{"path uploads deny any", `{path: "/etc/**"}`, Deny, create("upload_files", uploads("/home/user/a", "/etc/cron.d/x")), true},
		{"path uploads deny none", `{path: "/etc/**"}`, Deny, create("upload_files", uploads("/home/user/a")), false},
		{"path uploads approval any", `{path: "/etc/**"}`, RequireApproval, create("upload_files", uploads("/x", "/etc/x")), true},
		{"path uploads traversal", `{path: "/etc/**"}`, Deny, create("upload_files", uploads("/home/../etc/x")), true},
		{"path no uploads", `{path: "**"}`, "", create("template", "base"), false},
		{"path empty uploads", `{path: "**"}`, "", create("upload_files", []any{}), false},
		{"path malformed uploads", `{path: "**"}`, "", create("upload_files", []any{"x", map[string]any{"sandbox_path": 3.0}}), false},

		// action
		{"action", `{action: delete}`, "", manage("sandbox_id", "s", "action", "delete"), true},
		{"action other", `{action: delete}`, "", manage("sandbox_id", "s", "action", "pause"), false},
		{"action list", `{action: [pause, resume]}`, "", manage("action", "resume"), true},
		{"action missing", `{action: delete}`, "", manage("sandbox_id", "s"), false},
		{"action not string", `{action: delete}`, "", manage("action", true), false},
		{"action on other tool", `{target: "e2b_*", action: delete}`, "", Call{Tool: toolDeleteCheckpoint, Args: args("action", "delete")}, false},

		// template
		{"template glob", `{template: "python*"}`, "", create("template", "python3.11"), true},
		{"template no", `{template: "python*"}`, "", create("template", "node"), false},
		{"template list", `{template: [base, "code-*"]}`, "", create("template", "code-interpreter"), true},
		{"template missing", `{template: base}`, "", create("title", "x"), false},

		// count
		{"count max equal", `{count: {max: 3}}`, "", fork(3.0), true},
		{"count max below", `{count: {max: 3}}`, "", fork(1.0), true},
		{"count max above", `{count: {max: 3}}`, "", fork(4.0), false},
		{"count min", `{count: {min: 2}}`, "", fork(2.0), true},
		{"count min below", `{count: {min: 2}}`, "", fork(1.0), false},
		{"count range", `{count: {min: 2, max: 5}}`, "", fork(5.0), true},
		{"count range outside", `{count: {min: 2, max: 5}}`, "", fork(6.0), false},
		{"count exact", `{count: 1}`, "", fork(1.0), true},
		{"count exact no", `{count: 1}`, "", fork(2.0), false},
		{"count int", `{count: {max: 3}}`, "", fork(2), true},
		{"count json.Number", `{count: {max: 3}}`, "", fork(json.Number("4")), false},
		{"count string", `{count: {max: 3}}`, "", fork("2"), false},
		{"count missing", `{count: {max: 3}}`, "", Call{Tool: toolForkSandbox, Args: args("sandbox_id", "s")}, false},
		{"count on other tool", `{target: "e2b_*", count: {max: 3}}`, "", Call{Tool: toolCreateSandbox, Args: args("count", 1.0)}, false},

		// timeout_seconds
		{"timeout create at max", `{timeout_seconds: {max: 7200}}`, "", create("timeout_seconds", 7200.0), true},
		{"timeout create above", `{timeout_seconds: {max: 7200}}`, "", create("timeout_seconds", 7201.0), false},
		{"timeout resume", `{timeout_seconds: {min: 100}}`, "", manage("action", "resume", "timeout_seconds", 300.0), true},
		{"timeout exec ms", `{timeout_seconds: {max: 60}}`, "", Call{Tool: toolExec, Args: args("command", "x", "timeout_ms", 60000.0)}, true},
		{"timeout exec ms above", `{timeout_seconds: {max: 60}}`, "", Call{Tool: toolExec, Args: args("command", "x", "timeout_ms", 60001.0)}, false},
		{"timeout missing", `{timeout_seconds: {max: 60}}`, "", create("template", "base"), false},
		{"timeout exec seconds key ignored", `{timeout_seconds: {max: 60}}`, "", Call{Tool: toolExec, Args: args("timeout_seconds", 1.0)}, false},
		{"timeout other tool", `{target: "e2b_*", timeout_seconds: {max: 60}}`, "", Call{Tool: toolReadFile, Args: args("timeout_seconds", 1.0)}, false},

		// AND
		{"and both", `{target: e2b_exec, command: "rm *", timeout_seconds: {max: 10}}`, "", Call{Tool: toolExec, Args: args("command", "rm x", "timeout_ms", 5000.0)}, true},
		{"and one fails", `{target: e2b_exec, command: "rm *", timeout_seconds: {max: 10}}`, "", Call{Tool: toolExec, Args: args("command", "rm x", "timeout_ms", 50000.0)}, false},
		{"and missing one", `{target: e2b_exec, command: "rm *", timeout_seconds: {max: 10}}`, "", exec("rm x"), false},
		{"and create", `{template: base, path: "/home/**", timeout_seconds: {max: 600}}`, "", create("template", "base", "timeout_seconds", 600.0, "upload_files", uploads("/home/x")), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dec := c.decision
			if dec == "" {
				dec = Allow
			}
			def := Deny
			if dec == Deny {
				def = Allow
			}
			src := "default_action: " + string(def) + "\nrules:\n  - id: r\n    when: " + c.when + "\n    then: {decision: " + string(dec) + ", reason: because}\n"
			p, err := Parse("test.yaml", []byte(src))
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			got := p.Evaluate(c.call)
			want := Decision{Action: def, Reason: "no rule matched; default_action is " + string(def)}
			if c.match {
				want = Decision{Action: dec, RuleID: "r", Reason: "because"}
			}
			if got != want {
				t.Errorf("Evaluate(%v) = %+v, want %+v", c.call, got, want)
			}
			// Explain must reach the same decision.
			if ex := Explain(p, c.call); !strings.Contains(ex, "decision: "+string(want.Action)+"\n") {
				t.Errorf("Explain disagrees with Evaluate (%s):\n%s", want.Action, ex)
			}
		})
	}
}

func TestFirstMatchDecides(t *testing.T) {
	const specificFirst = `default_action: require_approval
rules:
  - id: no-rm
    when: { target: e2b_exec, command: "rm *" }
    then: { decision: deny, reason: no rm }
  - id: exec-ok
    when: { target: e2b_exec }
    then: { decision: allow }
`
	const generalFirst = `default_action: require_approval
rules:
  - id: exec-ok
    when: { target: e2b_exec }
    then: { decision: allow }
  - id: no-rm
    when: { target: e2b_exec, command: "rm *" }
    then: { decision: deny, reason: no rm }
`
	rm := Call{Tool: toolExec, Args: args("command", "rm -rf /")}
	ls := Call{Tool: toolExec, Args: args("command", "ls")}
	other := Call{Tool: toolReadFile, Args: args("path", "/x")}
	for _, c := range []struct {
		src  string
		call Call
		want Decision
	}{
		{specificFirst, rm, Decision{Deny, "no-rm", "no rm", ""}},
		{specificFirst, ls, Decision{Allow, "exec-ok", "", ""}},
		{generalFirst, rm, Decision{Allow, "exec-ok", "", ""}},
		{specificFirst, other, Decision{RequireApproval, "", "no rule matched; default_action is require_approval", ""}},
	} {
		p, err := Parse("p.yaml", []byte(c.src))
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Evaluate(c.call); got != c.want {
			t.Errorf("Evaluate(%v) = %+v, want %+v", c.call, got, c.want)
		}
	}
}

func TestDecisionRule(t *testing.T) {
	if got := (Decision{Action: Deny}).Rule(); got != "default" {
		t.Errorf("Rule() = %q, want default", got)
	}
	if got := (Decision{Action: Deny, RuleID: "x"}).Rule(); got != "x" {
		t.Errorf("Rule() = %q, want x", got)
	}
}

func TestNilPolicyDenies(t *testing.T) {
	var p *Policy
	if d := p.Evaluate(Call{Tool: toolExec}); d.Action != Deny {
		t.Errorf("nil policy decided %v", d)
	}
	if ex := Explain(nil, Call{Tool: toolExec}); !strings.Contains(ex, "decision: deny") {
		t.Errorf("Explain(nil) = %q", ex)
	}
}

func TestDefault(t *testing.T) {
	p := Default()
	if p.Name() != DefaultName {
		t.Errorf("Name() = %q", p.Name())
	}
	for _, c := range []struct {
		call Call
		want Action
	}{
		{Call{Tool: toolManageSandbox, Args: args("sandbox_id", "s", "action", "delete")}, RequireApproval},
		{Call{Tool: toolManageSandbox, Args: args("sandbox_id", "s", "action", "pause")}, Allow},
		{Call{Tool: toolManageSandbox, Args: args("sandbox_id", "s", "action", "resume")}, Allow},
		{Call{Tool: toolDeleteCheckpoint, Args: args("checkpoint_id", "c")}, RequireApproval},
		{Call{Tool: toolExec, Args: args("sandbox_id", "s", "command", "rm -rf /")}, Allow},
		{Call{Tool: toolCreateSandbox}, Allow},
		{Call{Tool: toolReadFile, Args: args("path", "/etc/shadow")}, Allow},
		{Call{Tool: toolWriteFile, Args: args("path", "/x", "content", "y")}, Allow},
		{Call{Tool: toolListSandboxes}, Allow},
		{Call{Tool: toolCheckpointSandbox, Args: args("sandbox_id", "s")}, Allow},
		{Call{Tool: toolSetCheckpointPolicy, Args: args("sandbox_id", "s", "reset", true)}, Allow},
		{Call{Tool: toolListCheckpoints, Args: args("sandbox_id", "s")}, Allow},
		{Call{Tool: toolForkSandbox, Args: args("sandbox_id", "s", "count", 10.0)}, Allow},
	} {
		if got := p.Evaluate(c.call); got.Action != c.want {
			t.Errorf("Default().Evaluate(%v) = %+v, want %s", c.call, got, c.want)
		} else if got.Action == RequireApproval && got.Reason == "" {
			t.Errorf("approval for %s has no reason", c.call.Tool)
		}
	}
	// Every tool the policy knows is covered: none falls to the default by accident.
	for _, tool := range toolNames() {
		if d := p.Evaluate(Call{Tool: tool}); d.RuleID == "" {
			t.Errorf("built-in policy has no rule for %s", tool)
		}
	}
}

func TestExplain(t *testing.T) {
	p, err := Parse("p.yaml", []byte(`default_action: deny
rules:
  - id: allow-reads
    when: { targets: [e2b_read_file, e2b_list_sandboxes] }
    then: { decision: allow }
  - id: no-force-push
    when: { target: e2b_exec, command: "git push*--force*" }
    then: { decision: deny, reason: force pushes are not allowed }
`))
	if err != nil {
		t.Fatal(err)
	}
	ex := Explain(p, Call{Tool: toolExec, Args: args("sandbox_id", "s", "command", "git push --force")})
	for _, want := range []string{
		"decision: deny",
		"rule:     no-force-push",
		"reason:   force pushes are not allowed",
		`1. allow-reads (line 3): skipped, tool e2b_exec is not any of "e2b_read_file", "e2b_list_sandboxes"`,
		`2. no-force-push (line 6): matched, tool e2b_exec matches "e2b_exec"; command "git push --force" matches "git push*--force*"`,
	} {
		if !strings.Contains(ex, want) {
			t.Errorf("Explain lacks %q:\n%s", want, ex)
		}
	}
	ex = Explain(p, Call{Tool: toolExec, Args: args("command", "ls")})
	for _, want := range []string{
		"decision: deny", "rule:     default", "no rule matched",
		`skipped, command "ls" does not match "git push*--force*"`,
	} {
		if !strings.Contains(ex, want) {
			t.Errorf("Explain lacks %q:\n%s", want, ex)
		}
	}
}

// Explain shows the paths the policy judged, as the sandbox resolves them, so a human sees that
// "../../etc/passwd" is /etc/passwd.
func TestExplainShowsResolvedPaths(t *testing.T) {
	p, err := Parse("p.yaml", []byte(`default_action: allow
rules:
  - id: no-etc
    when: { path: "/etc/**" }
    then: { decision: deny, reason: system files }
`))
	if err != nil {
		t.Fatal(err)
	}
	ex := Explain(p, Call{Tool: toolReadFile, Args: args("sandbox_id", "s", "path", "../../etc/passwd")})
	for _, want := range []string{"paths:    \"/etc/passwd\"", "decision: deny", `path "/etc/passwd" matches "/etc/**"`} {
		if !strings.Contains(ex, want) {
			t.Errorf("Explain lacks %q:\n%s", want, ex)
		}
	}
	ex = Explain(p, Call{Tool: toolCreateSandbox, Args: args("upload_files", []any{map[string]any{"session_path": "notes"}})})
	if !strings.Contains(ex, "paths:    \"/home/user/notes\"") {
		t.Errorf("Explain does not show an upload's default target:\n%s", ex)
	}
}

func TestParseErrors(t *testing.T) {
	const head = "default_action: deny\nrules:\n"
	rule := func(when string) string {
		return head + "  - id: r\n    when: " + when + "\n    then: { decision: allow }\n"
	}
	cases := []struct {
		name, src, want string
	}{
		{"yaml syntax", "default_action: deny\nrules: [\n", "p.yaml:2: did not find expected node content"},
		{"empty", "", "p.yaml: empty policy"},
		{"only comments", "# nothing\n", "p.yaml: empty policy"},
		{"two documents", "default_action: deny\n---\ndefault_action: allow\n", "p.yaml:2: more than one YAML document"},
		{"root is a list", "- a\n- b\n", "p.yaml:1: a policy is a mapping"},
		{"unknown top-level key", "default_action: deny\nrulez: []\n", `p.yaml:2: unknown top-level key "rulez" (did you mean "rules"?)`},
		{"non-string key", "default_action: deny\n123: x\n", "p.yaml:2: top-level key must be a string, got a number"},
		{"duplicate top-level key", "default_action: deny\ndefault_action: allow\n", `p.yaml:2: duplicate top-level key "default_action" (first at line 1)`},
		{"missing default_action", "rules: []\n", "p.yaml:1: missing default_action"},
		{"unknown default_action", "default_action: maybe\n", `p.yaml:1: unknown default_action "maybe"`},
		{"default_action not a string", "default_action: [allow]\n", "p.yaml:1: default_action must be allow, deny or require_approval, got a list"},
		{"rules null", "default_action: deny\nrules:\n", "p.yaml:2: rules must be a list of rules, got nothing (null)"},
		{"rules mapping", "default_action: deny\nrules: {a: b}\n", "p.yaml:2: rules must be a list of rules, got a mapping"},
		{"rule not a mapping", head + "  - allow everything\n", "p.yaml:3: a rule is a mapping with id, when and then, got a string"},
		{"unknown rule key", head + "  - id: r\n    when: {target: e2b_exec}\n    than: {decision: allow}\n", `p.yaml:5: unknown rule key "than" (did you mean "then"?)`},
		{"missing id", head + "  - when: {target: e2b_exec}\n    then: {decision: allow}\n", "p.yaml:3: rule has no id"},
		{"id not a string", head + "  - id: [a]\n    when: {target: e2b_exec}\n    then: {decision: allow}\n", "p.yaml:3: rule id must be a string, got a list"},
		{"id bad characters", head + "  - id: allow reads\n    when: {target: e2b_exec}\n    then: {decision: allow}\n", `p.yaml:3: rule id "allow reads" must be letters`},
		{"duplicate id", head + "  - id: r\n    when: {target: e2b_exec}\n    then: {decision: allow}\n  - id: r\n    when: {target: e2b_read_file}\n    then: {decision: deny}\n", `p.yaml:6: duplicate rule id "r" (first at line 3)`},
		{"missing when", head + "  - id: r\n    then: {decision: allow}\n", `p.yaml:3: rule "r" has no when`},
		{"empty when", rule("{}"), `p.yaml:4: rule "r" has an empty when`},
		{"when not a mapping", rule("[target]"), "p.yaml:4: when must be a mapping of conditions, got a list"},
		{"missing then", head + "  - id: r\n    when: {target: e2b_exec}\n", `p.yaml:3: rule "r" has no then`},
		{"then not a mapping", head + "  - id: r\n    when: {target: e2b_exec}\n    then: allow\n", "p.yaml:5: then must be a mapping with decision and reason, got a string"},
		{"then unknown key", head + "  - id: r\n    when: {target: e2b_exec}\n    then: {decision: allow, why: x}\n", `p.yaml:5: unknown key in then "why"`},
		{"then no decision", head + "  - id: r\n    when: {target: e2b_exec}\n    then: {reason: x}\n", "p.yaml:5: then has no decision"},
		{"unknown decision", head + "  - id: r\n    when: {target: e2b_exec}\n    then: {decision: alow}\n", `p.yaml:5: unknown decision "alow" (want allow, deny or require_approval) (did you mean "allow"?)`},
		{"decision not a string", head + "  - id: r\n    when: {target: e2b_exec}\n    then: {decision: true}\n", "p.yaml:5: decision must be allow, deny or require_approval, got a boolean"},
		{"reason not a string", head + "  - id: r\n    when: {target: e2b_exec}\n    then: {decision: deny, reason: [a]}\n", "p.yaml:5: reason must be a string, got a list"},
		{"unknown condition", head + "  - id: r\n    when:\n      target: e2b_exec\n      comand: rm*\n    then: {decision: deny}\n", `p.yaml:6: unknown condition "comand" (did you mean "command"?)`},
		{"duplicate condition", head + "  - id: r\n    when:\n      command: a\n      command: b\n    then: {decision: deny}\n", `p.yaml:6: duplicate condition "command" (first at line 5)`},
		{"target and targets", rule("{target: e2b_exec, targets: [e2b_read_file]}"), "p.yaml:4: use either target or targets, not both"},
		{"unknown tool", rule("{target: e2b_read_fille}"), `p.yaml:4: target "e2b_read_fille" matches no tool (did you mean "e2b_read_file"?)`},
		{"glob matching no tool", rule(`{targets: ["docker_*"]}`), `p.yaml:4: targets "docker_*" matches no tool (tools: e2b_create_sandbox`},
		{"empty targets", rule("{targets: []}"), "p.yaml:4: targets is an empty list; it would never match"},
		{"target not a string", rule("{target: 42}"), `p.yaml:4: target must be a string or a list of strings, got a number (quote it if you mean the text "42")`},
		{"target item not a string", rule("{targets: [e2b_exec, {a: b}]}"), "p.yaml:4: each targets must be a string, got a mapping"},
		{"target null", rule("{target: }"), "p.yaml:4: target must be a string or a list of strings, got nothing (null)"},
		{"unclosed class", rule(`{command: "ls [abc"}`), `p.yaml:4: bad command pattern: "ls [abc": unclosed [`},
		{"bad range", rule(`{command: "[z-a]"}`), `p.yaml:4: bad command pattern: "[z-a]": bad range z-a`},
		{"trailing backslash", rule(`{command: 'ls \'}`), `p.yaml:4: bad command pattern: "ls \\": trailing backslash`},
		{"empty pattern", rule(`{command: ""}`), "p.yaml:4: bad command pattern: empty pattern"},
		{"globstar not a segment", rule(`{path: "/home/a**"}`), `p.yaml:4: bad path pattern: "/home/a**": ** must be a whole path segment`},
		{"unclean path pattern", rule(`{path: "/home/../etc"}`), `p.yaml:4: path pattern "/home/../etc" is not a clean path (write "/etc")`},
		{"trailing slash path pattern", rule(`{path: "/home/"}`), `p.yaml:4: path pattern "/home/" is not a clean path (write "/home")`},
		{"unknown action", rule("{action: destroy}"), `p.yaml:4: unknown action "destroy" (want pause, resume, delete, create, list, restart, remove, patch or apply)`},
		{"action item not a string", rule("{action: [pause, 3]}"), "p.yaml:4: each action must be a string, got a number"},
		{"count not a number", rule("{count: three}"), "p.yaml:4: count must be a number, got a string"},
		{"count empty range", rule("{count: {}}"), "p.yaml:4: count needs min, max or both"},
		{"count min above max", rule("{count: {min: 5, max: 1}}"), "p.yaml:4: count: min 5 is greater than max 1; it would never match"},
		{"count unknown range key", rule("{count: {mx: 1}}"), `p.yaml:4: unknown key in count "mx" (did you mean "max"?)`},
		{"count list", rule("{count: [1, 2]}"), "p.yaml:4: count must be a number or {min: N, max: N}, got a list"},
		{"timeout infinite", rule("{timeout_seconds: {max: .inf}}"), "p.yaml:4: timeout_seconds max must be a finite number, got .inf"},
		{"timeout not a number", rule("{timeout_seconds: {max: an hour}}"), "p.yaml:4: timeout_seconds max must be a number, got a string"},
		{"condition not for target", rule("{target: e2b_read_file, command: rm*}"), `p.yaml:4: condition "command" can never match in this rule: it applies only to e2b_exec, e2b_send_input, e2b_run_code, and the rule's other conditions allow only e2b_read_file`},
		{"conditions on different tools", rule("{command: rm*, action: delete}"), `p.yaml:4: condition "action" can never match in this rule: it applies only to e2b_manage_sandbox, e2b_code_context, e2b_sync_out, and the rule's other conditions allow only e2b_exec, e2b_send_input, e2b_run_code`},
		{"alias", "default_action: &d deny\nrules:\n  - id: r\n    when: {target: e2b_exec}\n    then: {decision: *d}\n", "p.yaml:5: YAML aliases (*d) are not supported"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := Parse("p.yaml", []byte(c.src))
			if err == nil {
				t.Fatalf("Parse accepted:\n%s\n(%d rules)", c.src, len(p.rules))
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error\n  %v\nlacks\n  %s", err, c.want)
			}
			var pe *Error
			if !errors.As(err, &pe) {
				t.Errorf("error %T is not a *policy.Error", err)
			}
		})
	}
}

func TestParseReportsEveryError(t *testing.T) {
	src := `default_action: deny
rules:
  - id: a
    when: { comand: x }
    then: { decision: allow }
  - id: b
    when: { target: e2b_exec }
    then: { decision: nope }
`
	_, err := Parse("p.yaml", []byte(src))
	if err == nil {
		t.Fatal("accepted")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "p.yaml:4:") || !strings.HasPrefix(lines[1], "p.yaml:8:") {
		t.Errorf("want two errors in line order, got:\n%v", err)
	}
}

func TestParseAcceptsValid(t *testing.T) {
	src := `# every condition kind, to be sure each is accepted
default_action: require_approval
rules: 
  - id: allow-reads
    when: { targets: [e2b_read_file, e2b_list_sandboxes] }
    then: { decision: allow }
  - id: no-force-push
    when: { target: e2b_exec, command: ["git push*--force*", "git push*-f*"] }
    then: { decision: deny, reason: force pushes are not allowed }
  - id: delete-needs-approval
    when: { target: e2b_manage_sandbox, action: [delete] }
    then: { decision: require_approval, reason: deleting a sandbox needs approval }
  - id: small-forks
    when: { target: e2b_fork_sandbox, count: { max: 3 } }
    then: { decision: allow }
  - id: short-creates
    when:
      target: e2b_create_sandbox
      template: [base, "python-*"]
      timeout_seconds: { min: 60, max: 7200 }
      path: "/home/user/**"
    then: { decision: allow }
  - id: x.y_z-1
    when: { path: "/" }
    then: { decision: deny }
`
	p, err := Parse("p.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.rules) != 6 || p.defaultAction != RequireApproval {
		t.Errorf("parsed %d rules, default %s", len(p.rules), p.defaultAction)
	}
	if _, err := Parse("p.yaml", []byte("default_action: allow\n")); err != nil {
		t.Errorf("a policy without rules: %v", err)
	}
	if _, err := Parse("p.yaml", []byte("default_action: allow\nrules: []\n")); err != nil {
		t.Errorf("a policy with an empty rules list: %v", err)
	}
}

func TestParseLimits(t *testing.T) {
	big := make([]byte, maxPolicyBytes+1)
	if _, err := Parse("p.yaml", big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("oversized policy: %v", err)
	}
	var b strings.Builder
	b.WriteString("default_action: deny\nrules:\n")
	for range 200 {
		b.WriteString("  - {id: r, when: {bogus: 1}, then: {decision: allow}}\n")
	}
	_, err := Parse("p.yaml", []byte(b.String()))
	if err == nil || strings.Count(err.Error(), "\n") > maxErrors+1 {
		t.Errorf("error report not bounded: %d lines", strings.Count(err.Error(), "\n"))
	}
}

func BenchmarkEvaluate(b *testing.B) {
	p, err := Parse("p.yaml", []byte(`default_action: deny
rules:
  - id: allow-reads
    when: { targets: [e2b_read_file, e2b_list_sandboxes] }
    then: { decision: allow }
  - id: no-secrets
    when: { path: ["**/.env", "/etc/**", "**/.ssh/**"] }
    then: { decision: deny }
  - id: no-force-push
    when: { target: e2b_exec, command: ["*git push*--force*", "*git push*-f*"] }
    then: { decision: deny, reason: force pushes are not allowed }
  - id: exec
    when: { target: e2b_exec, timeout_seconds: { max: 600 } }
    then: { decision: allow }
`))
	if err != nil {
		b.Fatal(err)
	}
	c := Call{Tool: toolExec, Args: args("sandbox_id", "s", "command", "cd /home/user/project && go test ./... && git push origin main", "timeout_ms", 60000.0)}
	b.ReportAllocs()
	for b.Loop() {
		if d := p.Evaluate(c); d.RuleID != "exec" {
			b.Fatal(d)
		}
	}
}

// Who approves: a rule's approver, else the policy's, else the server's default; only require_approval has one.
func TestApprover(t *testing.T) {
	p, err := Parse("p.yaml", []byte(`default_action: require_approval
approver: operator
rules:
  - id: exec-in-client
    when: { target: e2b_exec }
    then: { decision: require_approval, approver: client }
  - id: delete
    when: { action: delete }
    then: { decision: require_approval }
  - id: reads
    when: { target: e2b_read_file }
    then: { decision: allow }
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		call Call
		want Approver
	}{
		{Call{Tool: toolExec, Args: args("command", "ls")}, ApproverClient},
		{Call{Tool: toolManageSandbox, Args: args("action", "delete")}, ApproverOperator},
		{Call{Tool: toolListSandboxes}, ApproverOperator},
		{Call{Tool: toolReadFile, Args: args("path", "x")}, ApproverDefault},
	} {
		if got := p.Evaluate(c.call).Approver; got != c.want {
			t.Errorf("%s: approver %q, want %q", c.call.Tool, got, c.want)
		}
	}
	if ex := Explain(p, Call{Tool: toolExec, Args: args("command", "ls")}); !strings.Contains(ex, "approver: client") {
		t.Errorf("Explain does not say who approves:\n%s", ex)
	}
	if d := Default().Evaluate(Call{Tool: toolManageSandbox, Args: args("action", "delete")}); d.Approver != ApproverDefault {
		t.Errorf("the built-in policy names an approver: %q", d.Approver)
	}
	for src, want := range map[string]string{
		"default_action: allow\napprover: boss\nrules: []\n":                                                                           `p.yaml:2: approver must be client (the user, in their client) or operator (with e2b-mcp approve), got "boss"`,
		"default_action: allow\nrules:\n  - id: r\n    when: { target: e2b_exec }\n    then: { decision: deny, approver: operator }\n": "p.yaml:5: approver applies only to decision require_approval, not deny",
	} {
		if _, err := Parse("p.yaml", []byte(src)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want %q", src, err, want)
		}
	}
}
