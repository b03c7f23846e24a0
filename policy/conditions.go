package policy

import (
	"encoding/json"
	"fmt"
	"math"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// Condition keys of a rule's "when".
const (
	keyTarget   = "target"
	keyTargets  = "targets"
	keyCommand  = "command"
	keyPath     = "path"
	keyLocal    = "local_path"
	keyAction   = "action"
	keyTemplate = "template"
	keyCount    = "count"
	keyTimeout  = "timeout_seconds"
)

func conditionKeys() []string {
	return []string{keyTarget, keyTargets, keyCommand, keyPath, keyLocal, keyAction, keyTemplate, keyCount,
		keyTimeout}
}

// ConditionArgs names the kinds of argument the condition key reads; nil for a key that reads none (the target
// conditions read the tool's name).
func ConditionArgs(key string) []Arg {
	switch key {
	case keyCommand:
		return []Arg{ArgCommand}
	case keyPath:
		return []Arg{ArgPath, ArgUploads}
	case keyLocal:
		return []Arg{ArgLocalPath}
	case keyAction:
		return []Arg{ArgAction}
	case keyTemplate:
		return []Arg{ArgTemplate}
	case keyCount:
		return []Arg{ArgCount}
	case keyTimeout:
		return []Arg{ArgTimeoutSeconds, ArgTimeoutMillis}
	}
	return nil
}

// appliesTo lists the tools that carry the argument a condition looks at; nil means
// every tool (the target condition).
func (ts Tools) appliesTo(key string) []string {
	kinds := ConditionArgs(key)
	if kinds == nil {
		return nil
	}
	return ts.With(kinds...)
}

// condition is one key of a rule's "when". match reports whether the call satisfies
// it; when explain is set it also says why in words, for Explain.
type condition interface {
	key() string
	match(ts Tools, c Call, explain bool) (bool, string)
}

type targetCond struct{ globs []glob }

func (t targetCond) key() string { return keyTarget }

func (t targetCond) match(_ Tools, c Call, explain bool) (bool, string) {
	g, ok := firstMatch(t.globs, c.Tool)
	switch {
	case !explain:
		return ok, ""
	case ok:
		return true, fmt.Sprintf("tool %s matches %q", c.Tool, g.src)
	}
	return false, fmt.Sprintf("tool %s is not %s", c.Tool, globList(t.globs))
}

type commandCond struct{ globs []glob }

func (t commandCond) key() string { return keyCommand }

func (t commandCond) match(ts Tools, c Call, explain bool) (bool, string) {
	cmd, has := ts.stringArg(c, ArgCommand)
	if !has {
		return false, why(explain, "the call has no command")
	}
	g, ok := firstMatch(t.globs, cmd)
	switch {
	case !explain:
		return ok, ""
	case ok:
		return true, fmt.Sprintf("command %q matches %q", clipForDisplay(cmd), g.src)
	}
	return false, fmt.Sprintf("command %q does not match %s", clipForDisplay(cmd), globList(t.globs))
}

type templateCond struct{ globs []glob }

func (t templateCond) key() string { return keyTemplate }

func (t templateCond) match(ts Tools, c Call, explain bool) (bool, string) {
	tpl, has := ts.stringArg(c, ArgTemplate)
	if !has {
		return false, why(explain, "the call has no template")
	}
	g, ok := firstMatch(t.globs, tpl)
	switch {
	case !explain:
		return ok, ""
	case ok:
		return true, fmt.Sprintf("template %q matches %q", clipForDisplay(tpl), g.src)
	}
	return false, fmt.Sprintf("template %q does not match %s", clipForDisplay(tpl), globList(t.globs))
}

// pathCond matches the paths a call touches. A call may touch several (the uploads
// of e2b_create_sandbox), and which of "any" or "all" is the safe reading depends on
// what the rule does: a rule that allows must cover every path (one benign upload must
// not carry a second one to /etc), while a rule that denies or asks for approval
// catches the call if any path matches.
type pathCond struct {
	globs []glob
	all   bool
}

func (t pathCond) key() string { return keyPath }

func (t pathCond) match(ts Tools, c Call, explain bool) (bool, string) {
	paths := ts.callPaths(c)
	if len(paths) == 0 {
		return false, why(explain, "the call has no path")
	}
	if t.all {
		for _, p := range paths {
			if _, ok := firstMatch(t.globs, p); !ok {
				if !explain {
					return false, ""
				}
				return false, fmt.Sprintf("path %q does not match %s (an allow rule must cover every path)",
					clipForDisplay(p), globList(t.globs))
			}
		}
		if !explain {
			return true, ""
		}
		return true, fmt.Sprintf("every path (%s) matches %s", displayList(paths), globList(t.globs))
	}
	for _, p := range paths {
		if g, ok := firstMatch(t.globs, p); ok {
			return true, why(explain, "path %q matches %q", clipForDisplay(p), g.src)
		}
	}
	if !explain {
		return false, ""
	}
	return false, fmt.Sprintf("no path (%s) matches %s", displayList(paths), globList(t.globs))
}

// localPathCond matches the directory of the user's machine a call reads or writes (a workspace sync's
// local_path), absolute and resolved by the tool before the policy sees it. A sync takes a whole directory, so a
// rule that denies or asks for approval also catches a call on a directory that holds what a pattern names
// (a deny of "/home/me/.ssh/**" catches a sync of /home/me, or of /), while a rule that allows must match the
// directory itself (an allowed directory does not make its parent allowed).
type localPathCond struct {
	globs   []glob
	holders []string // the literal directory of each glob: a directory that holds it holds what it matches
	all     bool
}

func (t localPathCond) key() string { return keyLocal }

func (t localPathCond) match(ts Tools, c Call, explain bool) (bool, string) {
	p, has := ts.stringArg(c, ArgLocalPath)
	if !has || p == "" {
		return false, why(explain, "the call has no local_path")
	}
	p = filepath.ToSlash(p)
	if g, ok := firstMatch(t.globs, p); ok {
		return true, why(explain, "local_path %q matches %q", clipForDisplay(p), g.src)
	}
	if !t.all {
		for i, g := range t.globs {
			if holds(p, t.holders[i]) {
				return true, why(explain, "local_path %q holds what %q names", clipForDisplay(p), g.src)
			}
		}
	}
	if !explain {
		return false, ""
	}
	return false, fmt.Sprintf("local_path %q does not match %s", clipForDisplay(p), globList(t.globs))
}

// holds reports whether directory dir is dir or an ancestor of it (slash-separated, absolute paths).
func holds(dir, sub string) bool {
	if sub == "" {
		return false
	}
	return dir == sub || dir == "/" || strings.HasPrefix(sub, strings.TrimSuffix(dir, "/")+"/")
}

type actionCond struct{ actions []string }

func (t actionCond) key() string { return keyAction }

func (t actionCond) match(ts Tools, c Call, explain bool) (bool, string) {
	a, has := ts.stringArg(c, ArgAction)
	if !has {
		return false, why(explain, "the call has no action")
	}
	for _, want := range t.actions {
		if a == want {
			return true, why(explain, "action %q is %q", a, want)
		}
	}
	if !explain {
		return false, ""
	}
	return false, fmt.Sprintf("action %q is not %s", clipForDisplay(a), strings.Join(quoteAll(t.actions), " or "))
}

func firstMatch(gs []glob, s string) (glob, bool) {
	for _, g := range gs {
		if g.match(s) {
			return g, true
		}
	}
	return glob{}, false
}

func displayList(ss []string) string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(clipForDisplay(s))
	}
	return strings.Join(out, ", ")
}

// numRange is an inclusive range; a nil bound is open.
type numRange struct {
	min, max *float64
}

func (r numRange) contains(v float64) bool {
	return (r.min == nil || v >= *r.min) && (r.max == nil || v <= *r.max)
}

func (r numRange) String() string {
	switch {
	case r.min != nil && r.max != nil && *r.min == *r.max:
		return "= " + fmtNum(*r.min)
	case r.min != nil && r.max != nil:
		return fmt.Sprintf("in [%s, %s]", fmtNum(*r.min), fmtNum(*r.max))
	case r.min != nil:
		return ">= " + fmtNum(*r.min)
	case r.max != nil:
		return "<= " + fmtNum(*r.max)
	}
	return "any number"
}

type numberCond struct {
	k   string // keyCount or keyTimeout
	rng numRange
}

func (t numberCond) key() string { return t.k }

func (t numberCond) match(ts Tools, c Call, explain bool) (bool, string) {
	var v float64
	var has bool
	if t.k == keyCount {
		v, has = ts.numberArg(c, ArgCount)
	} else {
		v, has = ts.callTimeoutSeconds(c)
	}
	if !has {
		return false, why(explain, "the call has no %s", t.k)
	}
	ok := t.rng.contains(v)
	switch {
	case !explain:
		return ok, ""
	case ok:
		return true, fmt.Sprintf("%s %s is %s", t.k, fmtNum(v), t.rng)
	}
	return false, fmt.Sprintf("%s %s is not %s", t.k, fmtNum(v), t.rng)
}

// Argument extraction. Each argument is read only from the tools that have it, so a
// "path" argument some other tool might grow does not silently change what a rule does.

func (ts Tools) stringArg(c Call, kind Arg) (string, bool) {
	v, _ := ts.arg(c, kind)
	s, ok := v.(string)
	return s, ok
}

func (ts Tools) numberArg(c Call, kind Arg) (float64, bool) {
	v, _ := ts.arg(c, kind)
	return toNumber(v)
}

// callTimeoutSeconds reads a timeout in seconds, or one in milliseconds converted to seconds, so that one
// condition bounds every timeout.
func (ts Tools) callTimeoutSeconds(c Call) (float64, bool) {
	if s, ok := ts.numberArg(c, ArgTimeoutSeconds); ok {
		return s, true
	}
	ms, ok := ts.numberArg(c, ArgTimeoutMillis)
	return ms / 1000, ok
}

// SandboxHome is the home directory of the sandbox's user ("user"), against which envd resolves every path that
// is not absolute.
const SandboxHome = "/home/user"

// SandboxPath returns the absolute, clean path the sandbox uses for p, resolved as envd resolves it: "" is the
// home directory, "~" and "~/x" expand to it, and a relative path is joined to it. So "../../etc/passwd" is
// "/etc/passwd", and a rule on "/etc/**" sees the file the call will really open.
func SandboxPath(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		return path.Join(SandboxHome, p[1:])
	}
	if !path.IsAbs(p) {
		return path.Join(SandboxHome, p)
	}
	return path.Clean(p)
}

// uploadTarget is where one upload_files entry lands in the sandbox: its sandbox_path, or by default the home
// directory joined with the last element of session_path (a directory's files go below it). ok is false for an
// entry the tool will refuse anyway (no session_path).
func uploadTarget(u any) (string, bool) {
	m, _ := u.(map[string]any)
	if p, ok := m["sandbox_path"].(string); ok && p != "" {
		return SandboxPath(p), true
	}
	src, ok := m["session_path"].(string)
	if !ok || src == "" {
		return "", false
	}
	// A host path, in the host's syntax. A session_path naming a whole storage root has no last element the
	// policy can know (the server fills in every upload's target before the policy sees it); its files land below
	// the home directory.
	name := filepath.Base(filepath.Clean(src))
	if name == "." || name == ".." || name == string(filepath.Separator) {
		return SandboxHome, true
	}
	return path.Join(SandboxHome, name), true
}

// callPaths returns the sandbox paths a call touches, each as the sandbox resolves it (SandboxPath): the policy
// decides on the file the sandbox will open, so "/home/user/../../etc/passwd" and "../../etc/passwd" are both
// "/etc/passwd", and an upload without a sandbox_path is judged at the place it lands.
func (ts Tools) callPaths(c Call) []string {
	var out []string
	if p, ok := ts.stringArg(c, ArgPath); ok {
		out = append(out, SandboxPath(p))
	}
	uploads, _ := ts.arg(c, ArgUploads)
	list, _ := uploads.([]any)
	for _, u := range list {
		if p, ok := uploadTarget(u); ok {
			out = append(out, p)
		}
	}
	return out
}

// toNumber accepts what JSON decoding (and callers building calls by hand) produce.
func toNumber(v any) (float64, bool) {
	var f float64
	switch n := v.(type) {
	case float64:
		f = n
	case float32:
		f = float64(n)
	case int:
		f = float64(n)
	case int64:
		f = float64(n)
	case int32:
		f = float64(n)
	case uint:
		f = float64(n)
	case uint64:
		f = float64(n)
	case uint32:
		f = float64(n)
	case json.Number:
		var err error
		if f, err = strconv.ParseFloat(string(n), 64); err != nil {
			return 0, false
		}
	default:
		return 0, false
	}
	if math.IsNaN(f) {
		return 0, false
	}
	return f, true
}

func why(explain bool, format string, args ...any) string {
	if !explain {
		return ""
	}
	return fmt.Sprintf(format, args...)
}

func globList(gs []glob) string {
	if len(gs) == 1 {
		return strconv.Quote(gs[0].src)
	}
	s := make([]string, len(gs))
	for i, g := range gs {
		s[i] = g.src
	}
	return "any of " + strings.Join(quoteAll(s), ", ")
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = strconv.Quote(s)
	}
	return out
}

func fmtNum(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func clipForDisplay(s string) string {
	const max = 200
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
