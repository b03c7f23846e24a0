package cli

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/e2b-mcp/e2b-mcp/server"
	"github.com/e2b-mcp/e2b-mcp/state"
)

func runUsage(_ context.Context, a *app, args []string) error {
	f := newFlags("usage", "[--owner NAME] [--since DATE] [--state-dir DIR | --store URL]",
		"Show the sandboxes' use per owner and template, from the server's records: sandbox-hours (running time\n"+
			"as E2B bills it: from create or resume to pause, kill or timeout; those running now count up to now),\n"+
			"sandboxes created, and the most running at once. Days are UTC's; --since is a date (2026-03-01),\n"+
			"by default the first of this month. Sandboxes created outside e2b-mcp with the same key are not counted.")
	stateFlag := f.String("state-dir", "", "state directory of the server (default: as for serve)")
	storeFlag := f.String("store", "", "the server's --store: a postgres:// URL of the database its replicas share")
	owner := f.String("owner", "", "only this owner")
	since := f.String("since", "", "from this day (UTC) on")
	rest, err := a.parse(f, args)
	if err != nil {
		return err
	}
	if err := f.wantArgs(rest, 0, 0); err != nil {
		return err
	}
	now := a.now().UTC()
	from := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	if *since != "" {
		if from, err = time.Parse(time.DateOnly, *since); err != nil {
			return f.usageErrorf("--since %q: want a date, e.g. 2026-03-01", *since)
		}
	}
	where := *storeFlag
	if where == "" {
		if where, err = a.stateDir(*stateFlag); err != nil {
			return err
		}
	} else if err := server.CheckStoreURL(where); err != nil {
		return err
	}
	st, err := state.OpenAt(where, state.Options{Keys: state.NoDataKey("usage reads no sealed secrets"), Now: a.now})
	if err != nil {
		return err
	}
	defer st.Close()
	days, err := st.Usage(*owner, from)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "since %s (UTC)\n", from.Format(time.DateOnly))
	tw := newTable(a.stdout, "OWNER\tTEMPLATE\tSANDBOX-HOURS\tCREATED\tPEAK RUNNING")
	for _, o := range state.SumUsage(days) {
		fmt.Fprintf(tw, "%s\t(all)\t%.2f\t%d\t%d\n", cell(o.Owner), o.RunningSeconds/3600, o.Created, o.PeakRunning)
		for _, t := range slices.Sorted(maps.Keys(o.Templates)) {
			u := o.Templates[t]
			fmt.Fprintf(tw, "%s\t%s\t%.2f\t%d\t-\n", cell(o.Owner), cell(dash(t)), u.RunningSeconds/3600, u.Created)
		}
	}
	return tw.Flush()
}
