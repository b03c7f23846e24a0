package server

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/internal/clocktest"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
	"github.com/e2b-mcp/e2b-mcp/state"
	"github.com/mark3labs/mcp-go/mcp"
)

// budgetPolicy caps every owner at live and running sandboxes.
func budgetPolicy(live, running int, extra string) string {
	return fmt.Sprintf("default_action: allow\nlimits:\n  default: {live_sandboxes: %d, running_sandboxes: %d%s}\nrules: []\n",
		live, running, extra)
}

// 50 creates of one owner at once against a cap of 5 running sandboxes make exactly 5 sandboxes at E2B (the
// emulator's own count); the 45 others are refused, naming the cap, before they reach E2B.
func TestCapOnRunningSandboxesHoldsUnderConcurrentCreates(t *testing.T) {
	const calls, capRunning = 50, 5
	f := newFixture(t, fixtureOpts{policy: budgetPolicy(20, capRunning, "")})
	c := connect(t, f.srv, eras[0], nil)
	ok, refusals := raceCalls(t, calls, func(int) *mcp.CallToolResult {
		return callTool(t, c, "e2b_create_sandbox", map[string]any{"title": "racer"})
	})
	if n := len(f.emu.Sandboxes()); n != capRunning || ok != capRunning {
		t.Fatalf("%d creates at once with a cap of %d: %d sandboxes at E2B, %d answered as created", calls, capRunning, n, ok)
	}
	for _, r := range refusals {
		if !strings.Contains(r, "5 of 5 running sandboxes: pause or delete one (e2b_list_sandboxes") {
			t.Errorf("a refusal that does not name the cap: %s", r)
		}
	}
	if len(refusals) != calls-capRunning {
		t.Errorf("%d refusals, want %d", len(refusals), calls-capRunning)
	}
}

// A create E2B refuses gives its place back; a resume and a fork are held to the caps too, and pausing a
// sandbox frees a running place but not a live one.
func TestCapsOnResumeForkAndFailedCreates(t *testing.T) {
	f := newFixture(t, fixtureOpts{policy: budgetPolicy(2, 1, ", max_timeout_seconds: 3600, templates: [base]")})
	c := connect(t, f.srv, eras[0], nil)

	f.emu.FailNext(1, 400)
	mustFail(t, c, "e2b_create_sandbox", map[string]any{})
	a := createSandbox(t, c) // the failed create's place is free again
	msg := mustFail(t, c, "e2b_create_sandbox", map[string]any{})
	if !strings.Contains(msg, "1 of 1 running sandboxes: pause or delete one") {
		t.Fatalf("a second running sandbox: %s", msg)
	}
	if msg := mustFail(t, c, "e2b_create_sandbox", map[string]any{"template": "desktop", "timeout_seconds": 60}); !strings.Contains(msg,
		`template "desktop" is not one of the templates allowed (base)`) {
		t.Fatalf("a template outside the limits: %s", msg)
	}
	if msg := mustFail(t, c, "e2b_create_sandbox", map[string]any{"timeout_seconds": 7200}); !strings.Contains(msg,
		"timeout_seconds 7200 is above the longest allowed, 3600") {
		t.Fatalf("a timeout beyond the limits: %s", msg)
	}
	mustOK(t, c, "e2b_manage_sandbox", map[string]any{"sandbox_id": a, "action": "pause"})
	b := createSandbox(t, c) // a paused sandbox holds no running place
	if msg := mustFail(t, c, "e2b_manage_sandbox", map[string]any{"sandbox_id": a, "action": "resume"}); !strings.Contains(msg,
		"1 of 1 running sandboxes") {
		t.Fatalf("resuming past the running cap: %s", msg)
	}
	if msg := mustFail(t, c, "e2b_create_sandbox", map[string]any{}); !strings.Contains(msg,
		"2 of 2 live sandboxes: delete one; a paused sandbox counts too") {
		t.Fatalf("a third live sandbox: %s", msg)
	}
	mustOK(t, c, "e2b_manage_sandbox", map[string]any{"sandbox_id": b, "action": "pause"})
	mustOK(t, c, "e2b_manage_sandbox", map[string]any{"sandbox_id": a, "action": "resume"})
	if msg := mustFail(t, c, "e2b_fork_sandbox", map[string]any{"sandbox_id": a}); !strings.Contains(msg, "2 of 2 live sandboxes") {
		t.Fatalf("a fork past the live cap: %s", msg)
	}
	if n := len(f.emu.Sandboxes()); n != 2 {
		t.Fatalf("E2B has %d sandboxes, want the 2 the caps allow", n)
	}
}

// A day's sandbox-hours budget of 3 minutes (a fake clock runs it out): a create at 80 % of it carries a warning;
// once it is used up the owner's running sandboxes are paused (at E2B, and recorded in the audit log), every create,
// resume and use is refused naming the limit and when it resets; after the reset a resume works and the files are
// as they were.
func TestSandboxHoursBudgetPausesAndResets(t *testing.T) {
	clock := clocktest.New(time.Date(2026, 12, 6, 23, 50, 0, 0, time.UTC))
	f := newFixture(t, fixtureOpts{policy: "default_action: allow\nlimits:\n  default: {sandbox_hours_per_day: 0.05}\nrules: []\n",
		emulator: e2btest.Options{Now: clock.Now}, mutate: func(c *Config, _ *e2btest.Server) { c.Now = clock.Now }})
	c := connect(t, f.srv, eras[0], nil)

	a := createSandbox(t, c)
	mustOK(t, c, "e2b_write_file", map[string]any{"sandbox_id": a, "path": "keep.txt", "content": "still here"})
	clock.Advance(150 * time.Second) // 150 of 180 s: 83 %
	b := mustOK(t, c, "e2b_create_sandbox", map[string]any{"title": "second"})
	if w, _ := b["warning"].(string); !strings.Contains(w, "This owner has used 0.0417 of 0.05 sandbox-hours today (sandbox_hours_per_day, 83 %)") {
		t.Fatalf("a create at 83 %% of the day's budget warned %q", w)
	}
	list := mustOK(t, c, "e2b_list_sandboxes", map[string]any{})
	usage, _ := list["usage"].(map[string]any)
	today, _ := usage["sandbox_hours_today"].(map[string]any)
	running, _ := usage["running_sandboxes"].(map[string]any)
	if today["used"] != 0.0417 || today["limit"] != 0.05 || running["used"] != 2.0 || running["limit"] != nil ||
		usage["created_this_month"] != 2.0 || usage["peak_running_this_month"] != 2.0 {
		t.Fatalf("the list's usage at 150 s of 180: %v", usage)
	}
	if w, _ := list["warning"].(string); !strings.Contains(w, "(sandbox_hours_per_day, 83 %)") {
		t.Fatalf("the list at 83 %% of the day's budget warned %q", w)
	}
	if rep, err := f.srv.budgets.Enforce(t.Context()); err != nil || len(rep.Paused) != 0 {
		t.Fatalf("enforcing within the budget: %+v, %v", rep, err)
	}

	clock.Advance(time.Minute) // a: 210 s, b: 60 s
	rep, err := f.srv.budgets.Enforce(t.Context())
	if err != nil || len(rep.Paused) != 2 || len(rep.Errors) != 0 {
		t.Fatalf("enforcing a used-up budget: %+v, %v; want both sandboxes paused", rep, err)
	}
	for _, sb := range f.emu.Sandboxes() {
		if sb.State != "paused" {
			t.Errorf("sandbox %s is %s at E2B after the budget ran out, want paused", sb.ID, sb.State)
		}
	}
	paused := 0
	for _, e := range f.auditEntries(t) {
		if e.Tool == budgetTool && e.Owner == "alice" && strings.Contains(e.Args["limit"].(string), "sandbox_hours_per_day") {
			paused++
		}
	}
	if paused != 2 {
		t.Errorf("%d pauses for the budget in the audit log, want 2", paused)
	}
	const refusal = "0.075 of 0.05 sandbox-hours today (sandbox_hours_per_day), which resets at 2026-12-07 00:00 UTC: " +
		"the owner's sandboxes were paused with their files"
	for _, call := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{"e2b_create_sandbox", map[string]any{}, refusal},
		{"e2b_manage_sandbox", map[string]any{"sandbox_id": a, "action": "resume"}, refusal},
		{"e2b_fork_sandbox", map[string]any{"sandbox_id": a}, refusal},
		// A use does not send the model to a resume that is refused: it says when the budget resets.
		{"e2b_exec", map[string]any{"sandbox_id": a, "command": "cat keep.txt"},
			"was paused by this server when its owner's sandbox-hours budget was used up: 0.075 of 0.05 sandbox-hours " +
				"today (sandbox_hours_per_day), which resets at 2026-12-07 00:00 UTC. Its files are kept; " +
				"e2b_manage_sandbox action resume resumes it once the budget has reset."},
	} {
		if msg := mustFail(t, c, call.tool, call.args); !strings.Contains(msg, call.want) {
			t.Errorf("%s with the budget used up: %s", call.tool, msg)
		}
	}
	if n := len(f.emu.Sandboxes()); n != 2 {
		t.Fatalf("E2B has %d sandboxes, want the 2 made before the budget ran out", n)
	}

	clock.Advance(10 * time.Minute) // 00:03:30 the next day: the budget is new
	// Once it has reset, a use of a sandbox still paused says to resume it, which now works.
	if msg := mustFail(t, c, "e2b_exec", map[string]any{"sandbox_id": a, "command": "true"}); !strings.Contains(msg,
		"is paused (by this server, when its owner's sandbox-hours budget was used up); resume it with "+
			"e2b_manage_sandbox action resume") {
		t.Errorf("e2b_exec after the budget reset: %s", msg)
	}
	mustOK(t, c, "e2b_manage_sandbox", map[string]any{"sandbox_id": a, "action": "resume"})
	got := mustOK(t, c, "e2b_read_file", map[string]any{"sandbox_id": a, "path": "keep.txt"})
	if got["content"] != "still here" {
		t.Fatalf("the file after the pause and the reset: %v", got)
	}
}

// The usage the store reports (what `e2b-mcp usage` prints) agrees with the emulator's own record of running time
// (what E2B bills) within 1 %, over creates, a fork, pauses, a resume, a delete and a sandbox still running; the
// clock is one fake clock that both read.
func TestUsageAgreesWithE2BRunningTime(t *testing.T) {
	clock := clocktest.New(time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC))
	f := newFixture(t, fixtureOpts{policy: "default_action: allow\nrules: []\n", emulator: e2btest.Options{Now: clock.Now},
		mutate: func(c *Config, _ *e2btest.Server) { c.Now = clock.Now }})
	c := connect(t, f.srv, eras[0], nil)
	start := clock.Now()

	a := createSandbox(t, c)
	clock.Advance(7 * time.Minute)
	b := createSandbox(t, c)
	clock.Advance(11 * time.Minute)
	mustOK(t, c, "e2b_manage_sandbox", map[string]any{"sandbox_id": a, "action": "pause"})
	clock.Advance(13 * time.Minute)
	mustOK(t, c, "e2b_manage_sandbox", map[string]any{"sandbox_id": a, "action": "resume"})
	fork := mustOK(t, c, "e2b_fork_sandbox", map[string]any{"sandbox_id": b})
	clock.Advance(5 * time.Minute)
	mustOK(t, c, "e2b_manage_sandbox", map[string]any{"sandbox_id": b, "action": "delete"})
	clock.Advance(17 * time.Minute)

	days, err := f.srv.Store().Usage("alice", start)
	if err != nil {
		t.Fatal(err)
	}
	sums := state.SumUsage(days)
	billed := f.emu.RunningTime(testKey("alice")).Seconds()
	if len(sums) != 1 || billed == 0 {
		t.Fatalf("usage %+v; E2B's running time %v s", sums, billed)
	}
	got := sums[0]
	if diff := got.RunningSeconds - billed; diff > billed/100 || -diff > billed/100 {
		t.Fatalf("usage says %v s of running time, E2B %v s: more than 1 %% apart", got.RunningSeconds, billed)
	}
	if got.Created != 3 || got.PeakRunning != 3 {
		t.Fatalf("usage: %d created, peak %d running; want 3 (two creates and a fork of %v), 3", got.Created,
			got.PeakRunning, fork["sandboxes"])
	}
}

// raceCalls makes n calls at once and returns how many succeeded and the refusals' texts.
func raceCalls(t *testing.T, n int, call func(i int) *mcp.CallToolResult) (ok int, refusals []string) {
	t.Helper()
	var (
		wg sync.WaitGroup
		mu sync.Mutex
	)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			res := call(i)
			mu.Lock()
			defer mu.Unlock()
			if res.IsError {
				refusals = append(refusals, resultText(res))
			} else {
				ok++
			}
		})
	}
	close(start)
	waitfor.Return(t, 2*time.Minute, "the racing calls", wg.Wait)
	return ok, refusals
}

// 50 forks of one sandbox at once, and 50 resumes of 50 paused sandboxes at once, against a cap of 5 running
// sandboxes: exactly as many reach E2B as the cap leaves room for, and every other call is refused naming it.
func TestCapHoldsUnderConcurrentForksAndResumes(t *testing.T) {
	const calls, capRunning = 50, 5
	f := newFixture(t, fixtureOpts{policy: budgetPolicy(200, capRunning, "")})
	c := connect(t, f.srv, eras[0], nil)
	running := func() int {
		n := 0
		for _, sb := range f.emu.Sandboxes() {
			if sb.State == "running" {
				n++
			}
		}
		return n
	}

	src := createSandbox(t, c)
	ok, refusals := raceCalls(t, calls, func(int) *mcp.CallToolResult {
		return callTool(t, c, "e2b_fork_sandbox", map[string]any{"sandbox_id": src})
	})
	if n := len(f.emu.Sandboxes()); n != capRunning || ok != capRunning-1 {
		t.Fatalf("%d forks at once of 1 running sandbox with a cap of %d: %d sandboxes at E2B, %d forks answered",
			calls, capRunning, n, ok)
	}
	for _, r := range refusals {
		if !strings.Contains(r, "5 of 5 running sandboxes: pause or delete one") {
			t.Errorf("a fork's refusal that does not name the cap: %s", r)
		}
	}

	// 50 paused sandboxes, made 5 at a time.
	var paused []string
	for _, sb := range f.emu.Sandboxes() {
		paused = append(paused, sb.ID)
	}
	for len(paused) < calls {
		for _, id := range paused[len(paused)-capRunning:] {
			mustOK(t, c, "e2b_manage_sandbox", map[string]any{"sandbox_id": id, "action": "pause"})
		}
		for range min(capRunning, calls-len(paused)) {
			paused = append(paused, createSandbox(t, c))
		}
	}
	for _, id := range paused[len(paused)-capRunning:] {
		mustOK(t, c, "e2b_manage_sandbox", map[string]any{"sandbox_id": id, "action": "pause"})
	}
	if n := running(); n != 0 {
		t.Fatalf("%d sandboxes running before the resumes", n)
	}
	ok, refusals = raceCalls(t, calls, func(i int) *mcp.CallToolResult {
		return callTool(t, c, "e2b_manage_sandbox", map[string]any{"sandbox_id": paused[i], "action": "resume"})
	})
	for _, r := range refusals {
		if !strings.Contains(r, "5 of 5 running sandboxes: pause or delete one") {
			t.Errorf("a resume's refusal that does not name the cap: %s", r)
		}
	}
	if n := running(); n != capRunning || ok != capRunning || len(refusals) != calls-capRunning {
		t.Fatalf("%d resumes at once with a cap of %d: %d running at E2B, %d resumed, %d refused", calls, capRunning,
			n, ok, len(refusals))
	}
}

// 50 forks of one sandbox at once against forks_per_sandbox 3 make exactly 3 at E2B, the others refused naming
// the sandbox's forks; deleting one of them frees a place, and another sandbox's forks are not counted.
func TestForksPerSandboxHoldsUnderConcurrentForks(t *testing.T) {
	const calls, capForks = 50, 3
	f := newFixture(t, fixtureOpts{policy: "default_action: allow\nlimits:\n  default: {forks_per_sandbox: 3}\nrules: []\n"})
	c := connect(t, f.srv, eras[0], nil)
	src := createSandbox(t, c)
	other := createSandbox(t, c)
	ok, refusals := raceCalls(t, calls, func(int) *mcp.CallToolResult {
		return callTool(t, c, "e2b_fork_sandbox", map[string]any{"sandbox_id": src})
	})
	if n := len(f.emu.Sandboxes()); n != 2+capForks || ok != capForks {
		t.Fatalf("%d forks at once with forks_per_sandbox %d: %d sandboxes at E2B (2 not forks), %d forks answered",
			calls, capForks, n, ok)
	}
	for _, r := range refusals {
		if !strings.Contains(r, "3 of 3 forks of sandbox "+src+": delete one of those forks") {
			t.Errorf("a refusal that does not name the sandbox's forks: %s", r)
		}
	}
	mustOK(t, c, "e2b_fork_sandbox", map[string]any{"sandbox_id": other})
	forks := map[string]int{}
	for _, sb := range f.emu.Sandboxes() {
		if rec, err := f.srv.Store().Sandbox("alice", sb.ID); err == nil {
			forks[rec.ForkOf]++
		}
	}
	if forks[src] != capForks || forks[other] != 1 || forks[""] != 2 {
		t.Fatalf("the records' fork_of: %v", forks)
	}
	for _, sb := range f.emu.Sandboxes() {
		if rec, err := f.srv.Store().Sandbox("alice", sb.ID); err == nil && rec.ForkOf == src {
			mustOK(t, c, "e2b_manage_sandbox", map[string]any{"sandbox_id": sb.ID, "action": "delete"})
			break
		}
	}
	mustOK(t, c, "e2b_fork_sandbox", map[string]any{"sandbox_id": src})
}
