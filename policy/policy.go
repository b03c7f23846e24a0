package policy

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
)

// Action is what a policy decides for a call.
type Action string

const (
	Allow           Action = "allow"
	Deny            Action = "deny"
	RequireApproval Action = "require_approval"
)

func validAction(a Action) bool { return a == Allow || a == Deny || a == RequireApproval }

// Approver says who answers a require_approval: the user in the client that made the call, or an operator out of
// band, with `e2b-mcp approve`.
type Approver string

const (
	// ApproverDefault leaves the choice to the server: the client over stdio or an HTTP server without
	// authentication (the caller is the user), an operator when the server authenticates its HTTP callers (a
	// caller's own client approving its own calls is not an approval).
	ApproverDefault Approver = ""
	// ApproverClient asks the user through the client's elicitation, or an operator when the client cannot ask.
	ApproverClient Approver = "client"
	// ApproverOperator always needs an operator: the call gets an approval ID for `e2b-mcp approve`.
	ApproverOperator Approver = "operator"
)

// Call is a tool call as the policy sees it: the tool name and its arguments as
// decoded from JSON (float64 numbers, []any, map[string]any).
type Call struct {
	Tool string
	Args map[string]any
}

// Decision is the outcome of evaluating a call. RuleID is empty when no rule matched
// and the policy's default_action decided.
type Decision struct {
	Action Action
	RuleID string
	Reason string
	// Approver is who answers a require_approval: the deciding rule's approver, else the policy's, else
	// ApproverDefault. Empty for other actions.
	Approver Approver
}

// Rule returns the deciding rule's id, or "default" when default_action decided: the
// form audit records and messages use.
func (d Decision) Rule() string {
	if d.RuleID == "" {
		return "default"
	}
	return d.RuleID
}

// Policy is a parsed, validated policy. It is immutable and safe for concurrent use.
type Policy struct {
	tools         Tools
	name          string
	defaultAction Action
	approver      Approver
	limits        limitsSection
	rules         []rule
}

type rule struct {
	id       string
	line     int
	conds    []condition
	decision Action
	reason   string
	approver Approver
}

// Tools is the catalogue the policy was parsed against.
func (p *Policy) Tools() Tools { return p.tools }

// Name is the name the policy was parsed under (its file name, or "built-in").
func (p *Policy) Name() string { return p.name }

// Evaluate decides a call: the first rule whose conditions all match decides, else
// default_action. A nil policy denies everything.
func (p *Policy) Evaluate(c Call) Decision {
	if p == nil {
		return Decision{Action: Deny, Reason: "no policy loaded"}
	}
	d := p.firstMatch(c)
	if g, ok := p.tools.granted(c); ok {
		if gd := p.firstMatch(g); strictness(gd.Action) > strictness(d.Action) {
			d = gd
		}
	}
	return d
}

// granted is the call a link stands for (see Tool.Grants), with the link's sandbox_id and path.
func (ts Tools) granted(c Call) (Call, bool) {
	t := ts.byName[c.Tool]
	if t == nil || t.Grants == "" {
		return Call{}, false
	}
	g := ts.byName[t.Grants]
	args := map[string]any{}
	if v, ok := c.Args["sandbox_id"]; ok {
		args["sandbox_id"] = v
	}
	if v, ok := ts.arg(c, ArgPath); ok && g.Args[ArgPath] != "" {
		args[g.Args[ArgPath]] = v
	}
	return Call{Tool: g.Name, Args: args}, true
}

// strictness orders decisions: deny over require_approval over allow.
func strictness(a Action) int {
	switch a {
	case Allow:
		return 0
	case RequireApproval:
		return 1
	}
	return 2
}

// firstMatch decides a call by its own rules: the first rule whose conditions all match, else default_action.
func (p *Policy) firstMatch(c Call) Decision {
	for i := range p.rules {
		r := &p.rules[i]
		if r.matches(p.tools, c) {
			return p.ruleDecision(r)
		}
	}
	return p.defaultDecision()
}

func (p *Policy) ruleDecision(r *rule) Decision {
	d := Decision{Action: r.decision, RuleID: r.id, Reason: r.reason}
	if d.Action == RequireApproval {
		d.Approver = cmp.Or(r.approver, p.approver)
	}
	return d
}

func (p *Policy) defaultDecision() Decision {
	d := Decision{Action: p.defaultAction, Reason: "no rule matched; default_action is " + string(p.defaultAction)}
	if d.Action == RequireApproval {
		d.Approver = p.approver
	}
	return d
}

func (r *rule) matches(ts Tools, c Call) bool {
	for _, cond := range r.conds {
		if ok, _ := cond.match(ts, c, false); !ok {
			return false
		}
	}
	return true
}

// Explain evaluates a call and describes, for a human, which rule decided and why the
// rules before it did not match.
func Explain(p *Policy, c Call) string {
	var b strings.Builder
	args, err := json.Marshal(c.Args)
	if err != nil || c.Args == nil {
		args = []byte("{}")
	}
	fmt.Fprintf(&b, "call:     %s %s\n", c.Tool, clipForDisplay(string(args)))
	var ts Tools
	if p != nil {
		ts = p.tools
	}
	if paths := ts.callPaths(c); len(paths) > 0 {
		fmt.Fprintf(&b, "paths:    %s (as the sandbox resolves them; rules match these)\n", displayList(paths))
	}
	if p == nil {
		d := p.Evaluate(c)
		fmt.Fprintf(&b, "decision: %s\nreason:   %s\n", d.Action, d.Reason)
		return b.String()
	}
	fmt.Fprintf(&b, "policy:   %s (%d rules, default_action %s)\n", p.name, len(p.rules), p.defaultAction)
	var trace []string
	decided := false
	var d Decision
	for i := range p.rules {
		r := &p.rules[i]
		ok, why := r.explain(p.tools, c)
		if !ok {
			trace = append(trace, fmt.Sprintf("  %d. %s (line %d): skipped, %s", i+1, r.id, r.line, why))
			continue
		}
		trace = append(trace, fmt.Sprintf("  %d. %s (line %d): matched, %s", i+1, r.id, r.line, why))
		d = p.ruleDecision(r)
		decided = true
		break
	}
	if !decided {
		d = p.defaultDecision()
	}
	if g, ok := p.tools.granted(c); ok {
		gd := p.firstMatch(g)
		fmt.Fprintf(&b, "grants:   %s of the same path, which the policy decides %s (rule %s)\n", g.Tool,
			gd.Action, gd.Rule())
		if strictness(gd.Action) > strictness(d.Action) {
			fmt.Fprintf(&b, "          stricter than the link's own decision %s (rule %s), so it stands\n", d.Action, d.Rule())
			d = gd
		}
	}
	fmt.Fprintf(&b, "decision: %s\n", d.Action)
	fmt.Fprintf(&b, "rule:     %s\n", d.Rule())
	if d.Reason != "" {
		fmt.Fprintf(&b, "reason:   %s\n", d.Reason)
	}
	if d.Action == RequireApproval {
		switch d.Approver {
		case ApproverClient:
			b.WriteString("approver: client (the user, through the client; an operator with e2b-mcp approve " +
				"when it cannot ask)\n")
		case ApproverOperator:
			b.WriteString("approver: operator (with e2b-mcp approve)\n")
		default:
			b.WriteString("approver: the server's default (the client over stdio and without authentication; an operator when " +
				"the server authenticates its HTTP callers)\n")
		}
	}
	if len(trace) > 0 {
		b.WriteString("rules checked, in order:\n")
		for _, t := range trace {
			b.WriteString(t)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// explain reports whether the rule matches, with the first failing condition or
// (on a match) every condition's account.
func (r *rule) explain(ts Tools, c Call) (bool, string) {
	var parts []string
	for _, cond := range r.conds {
		ok, why := cond.match(ts, c, true)
		if !ok {
			return false, why
		}
		parts = append(parts, why)
	}
	return true, strings.Join(parts, "; ")
}

// maxPolicyBytes bounds a policy file; real ones are a few kilobytes.
const maxPolicyBytes = 1 << 20

// Load reads and parses a policy file.
func (ts Tools) Load(path string) (*Policy, error) {
	data, err := readPolicyFile(path)
	if err != nil {
		return nil, err
	}
	return ts.Parse(path, data)
}

func readPolicyFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("policy: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxPolicyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("policy: reading %s: %w", path, err)
	}
	if len(data) > maxPolicyBytes {
		return nil, fmt.Errorf("policy: %s is larger than %d bytes", path, maxPolicyBytes)
	}
	return data, nil
}
