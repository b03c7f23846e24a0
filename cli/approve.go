package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/e2b-mcp/e2b-mcp/policy"
	"github.com/e2b-mcp/e2b-mcp/server"
)

func runApprove(_ context.Context, a *app, args []string) error {
	f := newFlags("approve", "[ID] [--state-dir DIR]",
		"Without an ID, list the tool calls waiting for a human's approval. With an ID, approve that call:\n"+
			"the assistant's next identical call (same tool and arguments) then runs, once.")
	stateFlag := f.String("state-dir", "", "state directory of the server (default: as for serve)")
	rest, err := a.parse(f, args)
	if err != nil {
		return err
	}
	if err := f.wantArgs(rest, 0, 1); err != nil {
		return err
	}
	dir, err := a.stateDir(*stateFlag)
	if err != nil {
		return err
	}
	approvals, err := policy.OpenApprovals(dir, server.ApprovalTTL, a.now)
	if err != nil {
		return err
	}
	if len(rest) == 1 {
		p, err := approvals.Approve(rest[0])
		if err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "Approved %s: %s\n", p.ID, p.Summary)
		fmt.Fprintf(a.stdout, "The same call by %s (session %s) runs once if it is made before %s.\n",
			p.Binding.Owner, p.Binding.Session, p.Expires.Local().Format(time.TimeOnly))
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
	tw := newTable(a.stdout, "ID\tSTATUS\tOWNER\tSESSION\tEXPIRES\tCALL")
	for _, p := range pending {
		status := "waiting"
		if p.Approved {
			status = "approved"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", p.ID, status, p.Binding.Owner, p.Binding.Session,
			p.Expires.Local().Format(time.TimeOnly), p.Summary)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(a.stdout, "\nApprove one with `e2b-mcp approve ID`.")
	return nil
}
