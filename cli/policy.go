package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/e2b-mcp/e2b-mcp/policy"
	"github.com/e2b-mcp/e2b-mcp/server"
	"github.com/e2b-mcp/e2b-mcp/tools"
)

const policyUsage = `Usage: e2b-mcp policy check FILE
       e2b-mcp policy explain FILE TOOL ARGS_JSON

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
	f := newFlags("policy explain", "FILE TOOL ARGS_JSON [--storage-root DIR]...", "Show which rule of a policy decides a call, and why.\n"+
		"Paths are shown and judged as the sandbox resolves them (relative to /home/user); give serve's\n"+
		"--storage-root to see every file an upload_files entry would write.")
	var roots stringList
	f.Var(&roots, "storage-root", "storage root of the server, as given to serve (repeatable)")
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
	call.Args = server.EffectiveArgs(tools.Config{StorageRoots: roots}, call.Tool, call.Args)
	fmt.Fprint(a.stdout, policy.Explain(p, call))
	return nil
}
