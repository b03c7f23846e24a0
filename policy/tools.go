package policy

import (
	"fmt"
	"slices"
)

// Tool is what a policy knows of one tool: its name and which of its arguments the conditions of a rule read. The
// policy names no tool of its own: the tools describe themselves this way, and a policy is parsed against their
// list (Tools), so a tool added there is known to every rule without an edit here.
type Tool struct {
	Name string
	// Args names the argument of this tool that holds each kind a condition reads; a condition on a kind the tool
	// lacks never matches its calls, and a rule that could only match that way is refused.
	Args map[Arg]string
	// Actions are the values the ArgAction argument takes.
	Actions []string
	// Grants is the tool whose call a call of this one stands for: a download link reads a file as a read does.
	// Such a call is decided as strictly as that call too (its ArgPath and sandbox_id carried over), so that a rule
	// keeping reads out of a directory keeps links out as well, without naming the link tools.
	Grants string
}

// Arg is a kind of argument a condition reads.
type Arg string

const (
	// ArgCommand is a shell command line (the command condition).
	ArgCommand Arg = "command"
	// ArgTemplate is the template of a new sandbox (template).
	ArgTemplate Arg = "template"
	// ArgAction is one of Tool.Actions (action).
	ArgAction Arg = "action"
	// ArgCount is a number of things made (count).
	ArgCount Arg = "count"
	// ArgPath is one path in the sandbox (path), judged as the sandbox resolves it.
	ArgPath Arg = "path"
	// ArgLocalPath is a directory of the machine the server runs on (local_path), judged as the tool resolves it:
	// absolute, symlinks and ".." resolved.
	ArgLocalPath Arg = "local_path"
	// ArgUploads is a list of uploads, each a session_path copied to a sandbox_path (path, for every file).
	ArgUploads Arg = "uploads"
	// ArgTimeoutSeconds and ArgTimeoutMillis are a timeout, in seconds or milliseconds (timeout_seconds).
	ArgTimeoutSeconds Arg = "timeout_seconds"
	ArgTimeoutMillis  Arg = "timeout_ms"
)

// argKinds lists every Arg, for checking a Tool.
var argKinds = []Arg{ArgCommand, ArgTemplate, ArgAction, ArgCount, ArgPath, ArgLocalPath, ArgUploads,
	ArgTimeoutSeconds, ArgTimeoutMillis}

// Tools is the catalogue of tools policies are written against, in the order the tools list them. Parse, Load,
// Default and NewHolder are its methods: a policy is always read against the tools it governs.
type Tools struct {
	list   []Tool
	byName map[string]*Tool
}

// NewTools checks a catalogue: names unique and not empty, every argument kind known, Grants naming a tool of the
// list, an action argument with its values.
func NewTools(list []Tool) (Tools, error) {
	ts := Tools{list: slices.Clone(list), byName: make(map[string]*Tool, len(list))}
	for i := range ts.list {
		t := &ts.list[i]
		if t.Name == "" {
			return Tools{}, fmt.Errorf("policy: tool %d has no name", i+1)
		}
		if _, dup := ts.byName[t.Name]; dup {
			return Tools{}, fmt.Errorf("policy: tool %s is listed twice", t.Name)
		}
		for a := range t.Args {
			if !slices.Contains(argKinds, a) {
				return Tools{}, fmt.Errorf("policy: tool %s has an argument of unknown kind %q", t.Name, a)
			}
		}
		if _, ok := t.Args[ArgAction]; ok && len(t.Actions) == 0 {
			return Tools{}, fmt.Errorf("policy: tool %s has an action argument without its values", t.Name)
		}
		ts.byName[t.Name] = t
	}
	for _, t := range ts.list {
		if t.Grants != "" && ts.byName[t.Grants] == nil {
			return Tools{}, fmt.Errorf("policy: tool %s grants %s, which is not listed", t.Name, t.Grants)
		}
	}
	return ts, nil
}

// Names lists the tools' names in their order.
func (ts Tools) Names() []string {
	names := make([]string, len(ts.list))
	for i, t := range ts.list {
		names[i] = t.Name
	}
	return names
}

// With lists the tools that have an argument of any of the kinds, in their order.
func (ts Tools) With(kinds ...Arg) []string {
	var names []string
	for _, t := range ts.list {
		for _, k := range kinds {
			if _, ok := t.Args[k]; ok {
				names = append(names, t.Name)
				break
			}
		}
	}
	return names
}

// arg returns the argument of kind a of the call's tool, and whether the call has it.
func (ts Tools) arg(c Call, a Arg) (any, bool) {
	t := ts.byName[c.Tool]
	if t == nil {
		return nil, false
	}
	name, ok := t.Args[a]
	if !ok {
		return nil, false
	}
	v, ok := c.Args[name]
	return v, ok
}

// actions are the values an action condition may name: those of every tool with an action argument.
func (ts Tools) actions() []string {
	var out []string
	for _, t := range ts.list {
		for _, a := range t.Actions {
			if !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	return out
}
