package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/display"
	"github.com/e2b-mcp/e2b-mcp/policy"
	"github.com/e2b-mcp/e2b-mcp/server"
)

// listFieldBytes bounds each deciding field in the list of waiting calls; `approve show` shows them whole.
const listFieldBytes = 300

func runApprove(_ context.Context, a *app, args []string) error {
	f := newFlags("approve", "[ID | show ID | deny ID] [--state-dir DIR]",
		"Without an ID, list the tool calls waiting for a human's approval, each with what decides it first:\n"+
			"command, path, action, sandbox. `approve show ID` shows one call whole, every argument in full.\n"+
			"With an ID, approve that call: the assistant's next identical call (same tool and arguments) then\n"+
			"runs, once. `approve deny ID` refuses it: the next identical call is told so, and does not run.\n"+
			"Values are shown escaped, runs of whitespace counted, and a long value by its head and its tail,\n"+
			"so that nothing in a call can hide part of it.")
	stateFlag := f.String("state-dir", "", "state directory of the server (default: as for serve)")
	storeFlag := f.String("store", "", "the server's --store: a postgres:// URL of the database its replicas share")
	rest, err := a.parse(f, args)
	if err != nil {
		return err
	}
	if err := f.wantArgs(rest, 0, 2); err != nil {
		return err
	}
	show, deny := len(rest) == 2 && rest[0] == "show", len(rest) == 2 && rest[0] == "deny"
	if len(rest) == 2 && !show && !deny {
		return f.usageErrorf("want ID, show ID or deny ID")
	}
	dir, err := a.stateDir(*stateFlag)
	if err != nil {
		return err
	}
	approvals, closer, err := server.OpenApprovals(dir, *storeFlag, a.now)
	if err != nil {
		return err
	}
	defer closer.Close()
	switch {
	case show:
		p, call, ok, err := approvals.Show(rest[1])
		if err != nil {
			return err
		}
		printRequest(a.stdout, p, call, ok, 0)
		if ok {
			printAllArgs(a.stdout, call)
		}
		return nil
	case deny:
		p, err := approvals.Deny(rest[1])
		if err != nil {
			return err
		}
		_, call, ok, _ := approvals.Show(p.ID)
		fmt.Fprintf(a.stdout, "Denied %s. The same call by %s (session %s) is refused if it is made before %s:\n",
			p.ID, cell(p.Binding.Owner), cell(p.Binding.Session), p.Expires.Local().Format(time.TimeOnly))
		printFields(a.stdout, p, call, ok, 0)
		return nil
	case len(rest) == 1:
		p, err := approvals.Approve(rest[0])
		if err != nil {
			return err
		}
		_, call, ok, _ := approvals.Show(p.ID)
		fmt.Fprintf(a.stdout, "Approved %s. The same call by %s (session %s) runs once if it is made before %s:\n",
			p.ID, cell(p.Binding.Owner), cell(p.Binding.Session), p.Expires.Local().Format(time.TimeOnly))
		printFields(a.stdout, p, call, ok, 0)
		return nil
	}
	pending, err := approvals.List()
	if err != nil {
		return err
	}
	if len(pending) == 0 {
		fmt.Fprintln(a.stdout, "No calls are waiting for approval.")
		return nil
	}
	for i, p := range pending {
		if i > 0 {
			fmt.Fprintln(a.stdout)
		}
		_, call, ok, err := approvals.Show(p.ID)
		if err != nil {
			ok = false
		}
		printRequest(a.stdout, p, call, ok, listFieldBytes)
	}
	fmt.Fprintln(a.stdout, "\nSee one whole with `e2b-mcp approve show ID`; approve it with `e2b-mcp approve ID`.")
	return nil
}

// printRequest shows one request: its ID, status and caller, then its call's deciding fields, each cut to max
// bytes (0: whole).
func printRequest(w io.Writer, p policy.Pending, call policy.Call, ok bool, max int) {
	status := "waiting"
	switch {
	case p.Approved:
		status = "approved"
	case p.Denied:
		status = "denied"
	}
	fmt.Fprintf(w, "%s  %s  owner %s, session %s, expires %s\n", p.ID, status, cell(p.Binding.Owner),
		cell(p.Binding.Session),
		p.Expires.Local().Format(time.TimeOnly))
	printFields(w, p, call, ok, max)
}

func printFields(w io.Writer, p policy.Pending, call policy.Call, ok bool, max int) {
	if !ok {
		fmt.Fprintf(w, "  call: %s\n", cell(p.Summary))
		return
	}
	fmt.Fprintf(w, "  %-12s %s\n", "tool:", cell(call.Tool))
	for _, f := range policy.DecidingFields(call) {
		v := display.Readable(f.Value, max)
		if max > 0 && v != display.Readable(f.Value, 0) {
			v += fmt.Sprintf("  (cut; `e2b-mcp approve show %s` shows it whole)", p.ID)
		}
		fmt.Fprintf(w, "  %-12s %s\n", cell(f.Name)+":", v)
	}
}

// printAllArgs shows every argument of the call as JSON, indented, escaped for the terminal, nothing cut.
func printAllArgs(w io.Writer, call policy.Call) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("  ", "  ")
	if err := enc.Encode(call.Args); err != nil {
		return
	}
	fmt.Fprintf(w, "  all arguments, in full:\n  %s", display.JSONLine(buf.Bytes()))
}
