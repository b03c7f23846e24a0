package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/e2b-mcp/e2b-mcp/policy"
	"github.com/e2b-mcp/e2b-mcp/server"
	"github.com/e2b-mcp/e2b-mcp/tools"
)

const policyUsage = `Usage: e2b-mcp policy check FILE
       e2b-mcp policy explain [--owner NAME] FILE TOOL ARGS_JSON

  check     parse and validate a policy file; errors are reported as file:line: reason
  explain   show which rule decides a call and why the rules before it did not match,
            e.g. e2b-mcp policy explain policy.yaml e2b_exec '{"sandbox_id":"x","command":"git push --force"}'

FILE "-" or "builtin" means the built-in policy (in force when serve gets no --policy).
`

func runPolicy(ctx context.Context, a *app, args []string) error {
	sub := ""
	if len(args) > 0 {
		sub, args = args[0], args[1:]
	}
	switch sub {
	case "check":
		return runPolicyCheck(ctx, a, args)
	case "explain":
		return runPolicyExplain(ctx, a, args)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(a.stdout, policyUsage)
		return nil
	case "":
		return usageError{msg: "policy needs a subcommand", usage: policyUsage}
	}
	return usageError{msg: fmt.Sprintf("unknown policy subcommand %q", sub), usage: policyUsage}
}

// loadPolicy loads a policy file, or the built-in policy for "-" and "builtin".
func loadPolicy(path string) (*policy.Policy, error) {
	if path == "-" || path == "builtin" {
		return tools.PolicyTools().Default(), nil
	}
	return tools.PolicyTools().Load(path)
}

func runPolicyCheck(_ context.Context, a *app, args []string) error {
	f := newFlags("policy check", "FILE", "Parse and validate a policy file.")
	rest, err := a.parse(f, args)
	if err != nil {
		return err
	}
	if err := f.wantArgs(rest, 1, 1); err != nil {
		return err
	}
	p, err := loadPolicy(rest[0])
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "%s: ok\n", p.Name())
	return nil
}

func runPolicyExplain(_ context.Context, a *app, args []string) error {
	f := newFlags("policy explain", "FILE TOOL ARGS_JSON [--storage-root DIR]... [--workspace DIR]... [--owner NAME]",
		"Show which rule of a "+
			"policy decides a call, and why,\nand which of the owner's limits (the policy's limits section) it would meet.\n"+
			"Paths are shown and judged as the sandbox resolves them (relative to /home/user); give serve's\n"+
			"--storage-root to see every file an upload_files entry would write. A sync's local_path is judged\n"+
			"as the server resolves it: absolute, symlinks and .. resolved, relative to the first --workspace.")
	var roots stringList
	f.Var(&roots, "storage-root", "storage root of the server, as given to serve (repeatable)")
	ws := serveOptions{transport: server.TransportStdio}
	f.Var(&ws.workspaces, "workspace", "workspace root of the server, as given to serve (repeatable; default: this "+
		"directory, as for a stdio server started here), against which a sync's relative local_path is resolved")
	owner := f.String("owner", "", "the owner making the call, for the limits that apply to it (default: an "+
		"owner without overrides)")
	rest, err := a.parse(f, args)
	if err != nil {
		return err
	}
	if err := f.wantArgs(rest, 2, 3); err != nil {
		return err
	}
	p, err := loadPolicy(rest[0])
	if err != nil {
		return err
	}
	call := policy.Call{Tool: rest[1], Args: map[string]any{}}
	if len(rest) == 3 {
		dec := json.NewDecoder(bytes.NewReader([]byte(rest[2])))
		if err := dec.Decode(&call.Args); err != nil || dec.More() {
			return f.usageErrorf("ARGS_JSON must be one JSON object, e.g. '{\"command\":\"ls\"}'")
		}
		if call.Args == nil {
			call.Args = map[string]any{}
		}
	}
	// Judge the call as the server would: with the tools' defaults for the parameters it leaves out.
	workspaces, err := ws.workspaceRoots()
	if err != nil {
		return f.usageErrorf("%v", err)
	}
	call.Args = tools.EffectiveArgs(tools.Config{StorageRoots: roots, Workspaces: workspaces}, call.Tool, call.Args)
	fmt.Fprint(a.stdout, policy.Explain(p, call))
	fmt.Fprint(a.stdout, explainLimits(p.Limits(*owner), call))
	return nil
}

// explainLimits says which of an owner's limits a call of a tool that brings sandboxes alive would meet: those
// decided by the call alone (template, timeout) are judged, the caps counted against the owner's sandboxes are
// named. Other calls meet no limit and get no lines.
func explainLimits(l policy.Limits, c policy.Call) string {
	timeout := 0
	if v, ok := c.Args["timeout_seconds"].(float64); ok {
		timeout = int(v)
	}
	var why string
	caps := []string{}
	switch {
	case c.Tool == "e2b_create_sandbox":
		template, _ := c.Args["template"].(string)
		why = l.CheckNew(template, timeout)
		caps = append(caps, "live_sandboxes", "running_sandboxes")
	case c.Tool == "e2b_fork_sandbox":
		caps = append(caps, "live_sandboxes", "running_sandboxes", "forks_per_sandbox")
	case c.Tool == "e2b_manage_sandbox" && c.Args["action"] == "resume":
		why = l.CheckTimeout(timeout)
		caps = append(caps, "running_sandboxes")
	default:
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "limits:   %s\n", l)
	if why != "" {
		fmt.Fprintf(&b, "          refused: %s\n", why)
	}
	set := map[string]int{"live_sandboxes": l.LiveSandboxes, "running_sandboxes": l.RunningSandboxes,
		"forks_per_sandbox": l.ForksPerSandbox}
	for _, name := range caps {
		if set[name] > 0 {
			fmt.Fprintf(&b, "          counts against %s %d (the owner's sandboxes when it is made)\n", name, set[name])
		}
	}
	for _, h := range []struct {
		name, period string
		hours        float64
	}{{"sandbox_hours_per_day", "today", l.HoursPerDay}, {"sandbox_hours_per_month", "this month", l.HoursPerMonth}} {
		if h.hours > 0 {
			fmt.Fprintf(&b, "          counts against %s %g (the owner's running time %s, UTC; used up, no sandbox "+
				"starts or resumes and the running ones are paused)\n", h.name, h.hours, h.period)
		}
	}
	return b.String()
}
