package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/e2b-mcp/e2b-mcp/audit"
	"github.com/e2b-mcp/e2b-mcp/internal/display"
	"github.com/e2b-mcp/e2b-mcp/policy"
)

// outcomes are the values of an entry's outcome that --decision also accepts.
var outcomes = []string{audit.OutcomeOK, audit.OutcomeError, audit.OutcomeDenied, audit.OutcomeDeclined,
	audit.OutcomeApprovalPending, audit.OutcomeInputRequired, audit.OutcomeStarted}

func runAudit(_ context.Context, a *app, args []string) error {
	f := newFlags("audit", "[--session S] [--sandbox ID] [--tool T] [--decision D] [--since T] [--until T] [--json]",
		"Show the audit log: every tool call with its caller, arguments (secrets redacted), policy decision,\n"+
			"outcome and duration, oldest first. A call that started and has no outcome (\"started, no end\") is\n"+
			"still running, or its server stopped before it ended. Times are RFC 3339 (2026-03-01T12:00:00Z), a\n"+
			"date (2026-03-01) or a duration before now (90m).")
	stateFlag := f.String("state-dir", "", "state directory of the server (default: as for serve)")
	var filter audit.Filter
	f.StringVar(&filter.Session, "session", "", "only calls of this session")
	f.StringVar(&filter.SandboxID, "sandbox", "", "only calls about this sandbox ID")
	f.StringVar(&filter.Tool, "tool", "", "only calls of this tool")
	decision := f.String("decision", "", "only calls with this policy decision (allow, deny, require_approval) or "+
		"outcome (ok, error, denied, declined, approval_pending, input_required, started)")
	since := f.String("since", "", "only calls at or after this time")
	until := f.String("until", "", "only calls before this time")
	asJSON := f.Bool("json", false, "print one JSON object per line")
	rest, err := a.parse(f, args)
	if err != nil {
		return err
	}
	if err := f.wantArgs(rest, 0, 0); err != nil {
		return err
	}
	now := a.now()
	if filter.Since, err = parseWhen(*since, now); err != nil {
		return f.usageErrorf("--since: %v", err)
	}
	if filter.Until, err = parseWhen(*until, now); err != nil {
		return f.usageErrorf("--until: %v", err)
	}
	outcome := ""
	switch d := policy.Action(*decision); {
	case d == "":
	case d == policy.Allow || d == policy.Deny || d == policy.RequireApproval:
		filter.Decision = string(d)
	case d == "allowed":
		filter.Decision = string(policy.Allow)
	case slices.Contains(outcomes, *decision):
		outcome = *decision
	default:
		return f.usageErrorf("--decision %q: want allow, deny, require_approval, ok, error, denied, declined, "+
			"approval_pending, input_required or started", *decision)
	}
	dir, err := a.stateDir(*stateFlag)
	if err != nil {
		return err
	}
	entries, err := audit.Read(dir, filter)
	if err != nil {
		return err
	}
	if outcome != "" {
		entries = slices.DeleteFunc(entries, func(e audit.Entry) bool { return e.Outcome != outcome })
	}
	if *asJSON {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		for _, e := range entries {
			buf.Reset()
			if err := enc.Encode(e); err != nil {
				return err
			}
			if _, err := a.stdout.Write(display.JSONLine(buf.Bytes())); err != nil {
				return err
			}
		}
		return nil
	}
	if len(entries) == 0 {
		fmt.Fprintln(a.stderr, "No audit entries match.")
		return nil
	}
	tw := newTable(a.stdout, "TIME\tOWNER\tSESSION\tTOOL\tDECISION\tRULE\tOUTCOME\tMS\tSANDBOX\tTRANSFER\tARGS")
	unended := 0
	for _, e := range entries {
		outcome, ms := e.Outcome, strconv.FormatInt(e.DurationMS, 10)
		if outcome == audit.OutcomeStarted {
			outcome, ms = "started, no end", "-"
			unended++
		}
		args := "{}"
		if len(e.Args) > 0 {
			if b, err := json.Marshal(e.Args); err == nil {
				args = clipText(string(b), 120)
			}
		}
		// Every field but the time and duration may hold what a caller sent: each is escaped (cell), so that no
		// value can forge a row or command the terminal.
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Time.Local().Format("2006-01-02 15:04:05"),
			cell(e.Owner), cell(e.Session), cell(e.Tool), cell(e.Decision), cell(dash(e.Rule)), cell(outcome), ms,
			cell(dash(e.SandboxID)), transferText(e.Transfer), cell(args))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	switch {
	case unended == 1:
		fmt.Fprintln(a.stderr, "1 call started and has no outcome: it is still running, or its server "+
			"stopped before it ended.")
	case unended > 1:
		fmt.Fprintf(a.stderr, "%d calls started and have no outcome: they are still running, or their server stopped "+
			"before they ended.\n", unended)
	}
	return nil
}

// parseWhen reads a time flag: RFC 3339, a date, or a duration before now.
func parseWhen(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if t, err := time.ParseInLocation(time.DateOnly, s, time.Local); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, errors.New("want RFC 3339 (2026-03-01T12:00:00Z), a date (2026-03-01) or a duration (90m)")
}

// transferText is what a call moved, in the table: each direction it moved something in, as files and bytes ("in
// 12 files 3.4 KiB / out 1 file 10.0 KiB"); "nothing moved" for a sync that moved nothing, "-" for a call that
// moves no files.
func transferText(t *audit.Transfer) string {
	if t == nil {
		return "-"
	}
	var parts []string
	if t.FilesIn != 0 || t.BytesIn != 0 {
		parts = append(parts, "in "+filesText(t.FilesIn)+" "+display.Size(t.BytesIn))
	}
	if t.FilesOut != 0 || t.BytesOut != 0 {
		parts = append(parts, "out "+filesText(t.FilesOut)+" "+display.Size(t.BytesOut))
	}
	if len(parts) == 0 {
		return "nothing moved"
	}
	return strings.Join(parts, " / ")
}

func filesText(n int) string {
	if n == 1 {
		return "1 file"
	}
	return strconv.Itoa(n) + " files"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func clipText(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}
