package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Error is one problem in a policy file. Parse returns every problem it finds, joined
// (errors.Join), so `policy check` can show them all at once; errors.As finds the first.
type Error struct {
	File string
	Line int // 0 when the problem has no single line
	Msg  string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// maxErrors bounds the report for a file that is not a policy at all.
const maxErrors = 50

var (
	ruleIDPattern   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	yamlLinePattern = regexp.MustCompile(`^line (\d+): (.*)$`)
)

const maxRuleIDBytes = 100

// Parse parses and validates a policy. name is used in error messages (the file name).
// Parse never panics; every problem found is reported with its line.
func (ts Tools) Parse(name string, data []byte) (pol *Policy, err error) {
	if name == "" {
		name = "policy"
	}
	defer func() {
		if r := recover(); r != nil {
			pol, err = nil, &Error{File: name, Msg: fmt.Sprintf("cannot parse policy: %v", r)}
		}
	}()
	if len(data) > maxPolicyBytes {
		return nil, &Error{File: name, Msg: fmt.Sprintf("policy is larger than %d bytes", maxPolicyBytes)}
	}
	root, err := decodeDocument(name, data)
	if err != nil {
		return nil, err
	}
	ps := &parser{file: name, tools: ts}
	ps.noAliases(root, 0)
	if len(ps.errs) > 0 {
		return nil, errors.Join(ps.errs...)
	}
	pol = ps.policy(root)
	if len(ps.errs) > 0 {
		// Validation walks sections in an order that suits the checks; the report
		// reads top to bottom.
		slices.SortStableFunc(ps.errs, func(a, b error) int {
			return lineOf(a) - lineOf(b)
		})
		return nil, errors.Join(ps.errs...)
	}
	pol.name, pol.tools = name, ts
	return pol, nil
}

func decodeDocument(name string, data []byte) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, &Error{File: name, Msg: "empty policy: expected default_action and rules"}
		}
		return nil, yamlError(name, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, &Error{File: name, Line: extra.Line, Msg: "more than one YAML document; a policy is a single document"}
	} else if !errors.Is(err, io.EOF) {
		return nil, yamlError(name, err)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			return nil, &Error{File: name, Msg: "empty policy: expected default_action and rules"}
		}
		root = root.Content[0]
	}
	if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
		return nil, &Error{File: name, Line: root.Line, Msg: "empty policy: expected default_action and rules"}
	}
	return root, nil
}

// yamlError turns "yaml: line 3: did not find expected key" into the file:line form.
func yamlError(name string, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if m := yamlLinePattern.FindStringSubmatch(msg); m != nil {
		if line, convErr := strconv.Atoi(m[1]); convErr == nil {
			return &Error{File: name, Line: line, Msg: m[2]}
		}
	}
	return &Error{File: name, Msg: msg}
}

func lineOf(err error) int {
	var e *Error
	if errors.As(err, &e) && e.Line > 0 {
		return e.Line
	}
	return math.MaxInt32 // line-less summaries go last
}

type parser struct {
	file  string
	tools Tools
	errs  []error
}

func (ps *parser) errorf(n *yaml.Node, format string, args ...any) {
	if len(ps.errs) >= maxErrors {
		return
	}
	line := 0
	if n != nil {
		line = n.Line
	}
	ps.errs = append(ps.errs, &Error{File: ps.file, Line: line, Msg: fmt.Sprintf(format, args...)})
	if len(ps.errs) == maxErrors {
		ps.errs = append(ps.errs, &Error{File: ps.file, Msg: "too many errors; stopping"})
	}
}

// noAliases refuses anchors' aliases: a policy is read by humans deciding what an
// assistant may do, and every rule should say what it means where it stands.
func (ps *parser) noAliases(n *yaml.Node, depth int) {
	if depth > 100 {
		ps.errorf(n, "nesting too deep")
		return
	}
	if n.Kind == yaml.AliasNode {
		ps.errorf(n, "YAML aliases (*%s) are not supported in a policy; write the value out", n.Value)
		return
	}
	for _, c := range n.Content {
		ps.noAliases(c, depth+1)
	}
}

type field struct {
	key, val *yaml.Node
}

// fields reads a mapping whose keys must come from allowed, reporting unknown,
// duplicate and non-string keys. It returns the fields in document order.
func (ps *parser) fields(n *yaml.Node, what string, allowed []string) []field {
	var out []field
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
			ps.errorf(k, "%s must be a string, got %s", what, kindName(k))
			continue
		}
		if !slices.Contains(allowed, k.Value) {
			ps.errorf(k, "unknown %s %q%s", what, k.Value, suggest(k.Value, allowed))
			continue
		}
		if first, dup := seen[k.Value]; dup {
			ps.errorf(k, "duplicate %s %q (first at line %d)", what, k.Value, first)
			continue
		}
		seen[k.Value] = k.Line
		out = append(out, field{k, v})
	}
	return out
}

func lookup(fs []field, key string) (field, bool) {
	for _, f := range fs {
		if f.key.Value == key {
			return f, true
		}
	}
	return field{}, false
}

func (ps *parser) policy(root *yaml.Node) *Policy {
	pol := &Policy{}
	if root.Kind != yaml.MappingNode {
		ps.errorf(root, "a policy is a mapping with default_action and rules, got %s", kindName(root))
		return pol
	}
	fs := ps.fields(root, "top-level key", []string{"default_action", "approver", "limits", "rules"})
	if f, ok := lookup(fs, "default_action"); ok {
		pol.defaultAction = ps.action(f.val, "default_action")
	} else {
		ps.errorf(root, "missing default_action (allow, deny or require_approval)")
	}
	if f, ok := lookup(fs, "approver"); ok {
		pol.approver = ps.approver(f.val)
	}
	if f, ok := lookup(fs, "limits"); ok {
		pol.limits = ps.limitsSection(f.val)
	}
	f, ok := lookup(fs, "rules")
	if !ok {
		return pol
	}
	if f.val.Kind != yaml.SequenceNode {
		ps.errorf(f.val, "rules must be a list of rules, got %s (write rules: [] for none)", kindName(f.val))
		return pol
	}
	ids := map[string]int{}
	for _, rn := range f.val.Content {
		r, ok := ps.rule(rn)
		if !ok {
			continue
		}
		if first, dup := ids[r.id]; dup {
			ps.errorf(rn, "duplicate rule id %q (first at line %d)", r.id, first)
			continue
		}
		ids[r.id] = r.line
		pol.rules = append(pol.rules, r)
	}
	return pol
}

func (ps *parser) action(n *yaml.Node, what string) Action {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		ps.errorf(n, "%s must be allow, deny or require_approval, got %s", what, kindName(n))
		return ""
	}
	a := Action(n.Value)
	if !validAction(a) {
		ps.errorf(n, "unknown %s %q (want allow, deny or require_approval)%s", what, n.Value,
			suggest(n.Value, []string{string(Allow), string(Deny), string(RequireApproval)}))
		return ""
	}
	return a
}

func (ps *parser) rule(n *yaml.Node) (rule, bool) {
	r := rule{line: n.Line}
	if n.Kind != yaml.MappingNode {
		ps.errorf(n, "a rule is a mapping with id, when and then, got %s", kindName(n))
		return r, false
	}
	before := len(ps.errs)
	fs := ps.fields(n, "rule key", []string{"id", "when", "then"})

	if f, ok := lookup(fs, "id"); !ok {
		ps.errorf(n, "rule has no id")
	} else if f.val.Kind != yaml.ScalarNode || f.val.ShortTag() != "!!str" {
		ps.errorf(f.val, "rule id must be a string, got %s", kindName(f.val))
	} else if len(f.val.Value) > maxRuleIDBytes || !ruleIDPattern.MatchString(f.val.Value) {
		ps.errorf(f.val, "rule id %q must be letters, digits, '.', '_' or '-' (at most %d), starting with a letter or digit",
			clipForDisplay(f.val.Value), maxRuleIDBytes)
	} else {
		r.id = f.val.Value
	}
	label := "rule"
	if r.id != "" {
		label = fmt.Sprintf("rule %q", r.id)
	}

	if f, ok := lookup(fs, "then"); !ok {
		ps.errorf(n, "%s has no then (then: {decision: allow|deny|require_approval, reason: ...})", label)
	} else {
		r.decision, r.reason, r.approver = ps.then(f.val)
	}

	if f, ok := lookup(fs, "when"); !ok {
		ps.errorf(n, "%s has no when; a rule needs at least one condition (default_action covers every other call)", label)
	} else {
		r.conds = ps.when(f.val, r.decision, label)
	}
	return r, len(ps.errs) == before
}

func (ps *parser) then(n *yaml.Node) (Action, string, Approver) {
	if n.Kind != yaml.MappingNode {
		ps.errorf(n, "then must be a mapping with decision and reason, got %s", kindName(n))
		return "", "", ""
	}
	fs := ps.fields(n, "key in then", []string{"decision", "reason", "approver"})
	var a Action
	if f, ok := lookup(fs, "decision"); ok {
		a = ps.action(f.val, "decision")
	} else {
		ps.errorf(n, "then has no decision (allow, deny or require_approval)")
	}
	var reason string
	if f, ok := lookup(fs, "reason"); ok {
		if f.val.Kind != yaml.ScalarNode || f.val.ShortTag() != "!!str" {
			ps.errorf(f.val, "reason must be a string, got %s", kindName(f.val))
		} else {
			reason = f.val.Value
		}
	}
	var approver Approver
	if f, ok := lookup(fs, "approver"); ok {
		approver = ps.approver(f.val)
		if a != "" && a != RequireApproval {
			ps.errorf(f.key, "approver applies only to decision require_approval, not %s", a)
		}
	}
	return a, reason, approver
}

// approver reads who approves: client or operator.
func (ps *parser) approver(n *yaml.Node) Approver {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" {
		switch a := Approver(n.Value); a {
		case ApproverClient, ApproverOperator:
			return a
		}
	}
	ps.errorf(n, "approver must be client (the user, in their client) or operator (with e2b-mcp approve), got %s%s",
		strconv.Quote(n.Value), suggest(n.Value, []string{string(ApproverClient), string(ApproverOperator)}))
	return ""
}

func (ps *parser) when(n *yaml.Node, decision Action, label string) []condition {
	if n.Kind != yaml.MappingNode {
		ps.errorf(n, "when must be a mapping of conditions, got %s", kindName(n))
		return nil
	}
	fs := ps.fields(n, "condition", conditionKeys())
	if len(fs) == 0 && len(n.Content) == 0 {
		ps.errorf(n, "%s has an empty when; a rule needs at least one condition", label)
		return nil
	}
	_, hasTarget := lookup(fs, keyTarget)
	_, hasTargets := lookup(fs, keyTargets)
	if hasTarget && hasTargets {
		f, _ := lookup(fs, keyTargets)
		ps.errorf(f.key, "use either target or targets, not both")
	}

	// candidates: the tools this rule can still match, narrowed condition by
	// condition, so that a rule which can never match is refused rather than kept.
	names := ps.tools.Names()
	candidates := names
	var conds []condition
	for _, f := range fs {
		var c condition
		switch k := f.key.Value; k {
		case keyTarget, keyTargets:
			globs := ps.globs(f.val, k, globText)
			var matched []string
			for _, g := range globs {
				hit := false
				for _, t := range names {
					if g.match(t) {
						hit = true
						if !slices.Contains(matched, t) {
							matched = append(matched, t)
						}
					}
				}
				if !hit {
					if s := suggest(g.src, names); s != "" {
						ps.errorf(f.val, "%s %q matches no tool%s", k, g.src, s)
					} else {
						ps.errorf(f.val, "%s %q matches no tool (tools: %s)", k, g.src, strings.Join(names, ", "))
					}
				}
			}
			if len(globs) > 0 {
				c = targetCond{globs: globs}
			}
			if len(matched) > 0 {
				candidates = intersect(candidates, matched)
			}
		case keyCommand, keyTemplate:
			globs := ps.globs(f.val, k, globText)
			if len(globs) > 0 {
				if k == keyCommand {
					c = commandCond{globs: globs}
				} else {
					c = templateCond{globs: globs}
				}
			}
		case keyPath:
			globs := ps.globs(f.val, k, globPath)
			if len(globs) > 0 {
				c = pathCond{globs: globs, all: decision == Allow}
			}
		case keyLocal:
			if globs, holders := ps.localGlobs(f.val); len(globs) > 0 {
				c = localPathCond{globs: globs, holders: holders, all: decision == Allow}
			}
		case keyAction:
			var actions []string
			known := ps.tools.actions()
			for _, s := range ps.stringItems(f.val, k) {
				if slices.Contains(known, s.Value) {
					actions = append(actions, s.Value)
				} else {
					ps.errorf(s, "unknown action %q (want %s)%s", s.Value, orList(known), suggest(s.Value, known))
				}
			}
			if len(actions) > 0 {
				c = actionCond{actions: actions}
			}
		case keyCount, keyTimeout:
			if rng, ok := ps.numRange(f.val, k); ok {
				c = numberCond{k: k, rng: rng}
			}
		}
		if c == nil {
			continue
		}
		if tools := ps.tools.appliesTo(f.key.Value); tools != nil {
			narrowed := intersect(candidates, tools)
			if len(narrowed) == 0 {
				ps.errorf(f.key, "condition %q can never match in this rule: it applies only to %s, and the rule's other "+
					"conditions allow only %s",
					f.key.Value, strings.Join(tools, ", "), orNone(candidates))
				continue
			}
			candidates = narrowed
		}
		conds = append(conds, c)
	}
	return conds
}

// orList words a list of choices: "a", "a or b", "a, b or c".
func orList(ss []string) string {
	if len(ss) < 2 {
		return strings.Join(ss, "")
	}
	return strings.Join(ss[:len(ss)-1], ", ") + " or " + ss[len(ss)-1]
}

func orNone(ss []string) string {
	if len(ss) == 0 {
		return "no tool"
	}
	return strings.Join(ss, ", ")
}

func intersect(a, b []string) []string {
	var out []string
	for _, s := range a {
		if slices.Contains(b, s) {
			out = append(out, s)
		}
	}
	return out
}

// stringItems reads a string or a non-empty list of strings.
func (ps *parser) stringItems(n *yaml.Node, what string) []*yaml.Node {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.ShortTag() != "!!str" {
			ps.errorf(n, "%s must be a string or a list of strings, got %s%s", what, kindName(n), quoteHint(n))
			return nil
		}
		return []*yaml.Node{n}
	case yaml.SequenceNode:
		if len(n.Content) == 0 {
			ps.errorf(n, "%s is an empty list; it would never match", what)
			return nil
		}
		var out []*yaml.Node
		for _, item := range n.Content {
			if item.Kind != yaml.ScalarNode || item.ShortTag() != "!!str" {
				ps.errorf(item, "each %s must be a string, got %s%s", what, kindName(item), quoteHint(item))
				continue
			}
			out = append(out, item)
		}
		return out
	}
	ps.errorf(n, "%s must be a string or a list of strings, got %s", what, kindName(n))
	return nil
}

func (ps *parser) globs(n *yaml.Node, what string, mode globMode) []glob {
	var out []glob
	for _, s := range ps.stringItems(n, what) {
		if g, ok := ps.glob(s, s.Value, what, mode); ok {
			out = append(out, g)
		}
	}
	return out
}

// glob compiles pat, read from node s.
func (ps *parser) glob(s *yaml.Node, pat, what string, mode globMode) (glob, bool) {
	g, err := compileGlob(pat, mode)
	if err != nil {
		ps.errorf(s, "bad %s pattern: %v", what, err)
		return glob{}, false
	}
	if mode == globPath && path.Clean(pat) != pat {
		ps.errorf(s, "path pattern %q is not a clean path (write %q): paths are cleaned before matching, so "+
			"it would never match",
			pat, path.Clean(pat))
		return glob{}, false
	}
	return g, true
}

// localGlobs reads the patterns of a local_path condition: absolute paths of this machine, with "/" between
// directories on every system, "~" being the home directory of the user the policy is read by (the server's),
// or patterns starting with "**" that match anywhere. Each glob keeps the pattern as written, for explain; holders
// are the directories each names without a wildcard (see literalDir).
func (ps *parser) localGlobs(n *yaml.Node) (globs []glob, holders []string) {
	for _, s := range ps.stringItems(n, keyLocal) {
		pat := s.Value
		if pat == "~" || strings.HasPrefix(pat, "~/") {
			home, err := os.UserHomeDir()
			if err != nil {
				ps.errorf(s, "local_path pattern %q names the home directory, which is not known here: %v", pat, err)
				continue
			}
			pat = escapeGlob(filepath.ToSlash(home)) + pat[1:]
		}
		if !strings.HasPrefix(pat, "/") && !strings.HasPrefix(pat, "**") && !filepath.IsAbs(filepath.FromSlash(pat)) {
			ps.errorf(s, "local_path pattern %q is relative, and a local_path is judged as an absolute path: write "+
				"\"/...\", \"~/...\" or \"**/...\"", s.Value)
			continue
		}
		if g, ok := ps.glob(s, pat, keyLocal, globPath); ok {
			g.src = s.Value
			globs, holders = append(globs, g), append(holders, literalDir(pat))
		}
	}
	return globs, holders
}

// numRange reads `key: N` (exactly N) or `key: {min: A, max: B}` (inclusive, either
// bound optional).
func (ps *parser) numRange(n *yaml.Node, what string) (numRange, bool) {
	switch n.Kind {
	case yaml.ScalarNode:
		v, ok := ps.number(n, what)
		if !ok {
			return numRange{}, false
		}
		return numRange{min: &v, max: &v}, true
	case yaml.MappingNode:
		before := len(ps.errs)
		fs := ps.fields(n, "key in "+what, []string{"min", "max"})
		var rng numRange
		if f, ok := lookup(fs, "min"); ok {
			if v, ok := ps.number(f.val, what+" min"); ok {
				rng.min = &v
			}
		}
		if f, ok := lookup(fs, "max"); ok {
			if v, ok := ps.number(f.val, what+" max"); ok {
				rng.max = &v
			}
		}
		if len(ps.errs) > before {
			return numRange{}, false
		}
		if rng.min == nil && rng.max == nil {
			ps.errorf(n, "%s needs min, max or both (like %s: {max: 3})", what, what)
			return numRange{}, false
		}
		if rng.min != nil && rng.max != nil && *rng.min > *rng.max {
			ps.errorf(n, "%s: min %s is greater than max %s; it would never match", what, fmtNum(*rng.min), fmtNum(*rng.max))
			return numRange{}, false
		}
		return rng, true
	}
	ps.errorf(n, "%s must be a number or {min: N, max: N}, got %s", what, kindName(n))
	return numRange{}, false
}

func (ps *parser) number(n *yaml.Node, what string) (float64, bool) {
	if n.Kind != yaml.ScalarNode || (n.ShortTag() != "!!int" && n.ShortTag() != "!!float") {
		ps.errorf(n, "%s must be a number, got %s", what, kindName(n))
		return 0, false
	}
	var v float64
	if err := n.Decode(&v); err != nil {
		ps.errorf(n, "%s: %q is not a number", what, n.Value)
		return 0, false
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		ps.errorf(n, "%s must be a finite number, got %s", what, n.Value)
		return 0, false
	}
	return v, true
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!str":
			return "a string"
		case "!!int", "!!float":
			return "a number"
		case "!!bool":
			return "a boolean"
		case "!!null":
			return "nothing (null)"
		}
		return "a value tagged " + n.ShortTag()
	}
	return "an unexpected YAML node"
}

func quoteHint(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode && n.ShortTag() != "!!str" && n.ShortTag() != "!!null" {
		return fmt.Sprintf(" (quote it if you mean the text %q)", n.Value)
	}
	return ""
}

// suggest proposes the closest known word for a likely typo.
func suggest(got string, known []string) string {
	best, bestDist := "", 3
	for _, k := range known {
		if d := editDistance(strings.ToLower(got), k); d < bestDist {
			best, bestDist = k, d
		}
	}
	if best == "" || best == got {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 1 << 30
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
