package lifecycle

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/internal/clocktest"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
	"github.com/e2b-mcp/e2b-mcp/state"
)

const testKey = "e2b_0123456789abcdef0123456789abcdef01234567"

type fixture struct {
	srv   *e2btest.Server
	c     *e2b.Client
	st    state.Store
	clock *clocktest.Clock // shared by the store and the sweeper
}

func newFixture(t *testing.T) *fixture { t.Helper(); return newFixtureOn(t, false) }

// newFixtureOn is newFixture whose emulator reads the test's clock too when shared is set (else the real one).
func newFixtureOn(t *testing.T, shared bool) *fixture {
	t.Helper()
	clk := clocktest.New(time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC))
	opts := e2btest.Options{APIKeys: []string{testKey}}
	if shared {
		opts.Now = clk.Now
	}
	srv, err := e2btest.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	c, err := e2b.NewClient(e2b.Config{APIKey: testKey, APIURL: srv.URL(), SandboxURL: srv.URL()})
	if err != nil {
		t.Fatal(err)
	}
	st, err := state.Open(t.TempDir(), state.Options{Keys: state.StaticKeySource(bytes.Repeat([]byte{7}, 32)), Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &fixture{srv: srv, c: c, st: st, clock: clk}
}

// create makes a sandbox at E2B with the given metadata and, when record is set, records it as the tools would.
func (f *fixture) create(t *testing.T, owner, session string, tagged, record bool) string {
	t.Helper()
	md := map[string]string{"purpose": "test"}
	if tagged {
		md = Metadata(owner, session, "work")
	}
	sb, err := f.c.CreateSandbox(context.Background(), e2b.NewSandbox{TemplateID: "base", Timeout: 600, Secure: true, Metadata: md})
	if err != nil {
		t.Fatal(err)
	}
	if record {
		conn := f.c.Conn(sb)
		err := f.st.PutSandbox(state.SandboxRecord{
			ID: sb.SandboxID, Owner: owner, Session: session, Title: "work", Template: "base",
			Domain: conn.Domain, EnvdVersion: sb.EnvdVersion, AccessToken: sb.EnvdAccessToken,
			State: e2b.StateRunning, Created: f.clock.Now(), TimeoutSeconds: 600,
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return sb.SandboxID
}

func (f *fixture) record(t *testing.T, owner, id string) state.SandboxRecord {
	t.Helper()
	r, err := f.st.Sandbox(owner, id)
	if err != nil {
		t.Fatalf("record %s: %v", id, err)
	}
	return r
}

func TestReconcileAdoptsTaggedSandboxTheStoreLacks(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	adopted := f.create(t, "alice", "s1", true, false)
	otherSession := f.create(t, "alice", "s2", true, false)
	untagged := f.create(t, "alice", "s1", false, false)

	rep, err := Reconcile(ctx, f.c, f.st, "alice", "s1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Adopted, []string{adopted}) || len(rep.Gone) != 0 {
		t.Fatalf("report = %+v, want only %s adopted", rep, adopted)
	}
	r := f.record(t, "alice", adopted)
	want, _ := f.srv.Sandbox(adopted)
	if r.Session != "s1" || r.Title != "work" || r.State != e2b.StateRunning || r.AccessToken != want.AccessToken || r.AccessToken == "" {
		t.Fatalf("adopted record = %+v", r)
	}
	for _, id := range []string{otherSession, untagged} {
		if _, err := f.st.Sandbox("alice", id); !errors.Is(err, state.ErrNotFound) {
			t.Errorf("sandbox %s was adopted into s1: %v", id, err)
		}
	}
	// A second pass has nothing to do.
	rep, err = Reconcile(ctx, f.c, f.st, "alice", "s1", nil)
	if err != nil || len(rep.Adopted)+len(rep.Gone) != 0 {
		t.Fatalf("second reconcile = %+v, %v", rep, err)
	}
}

func TestReconcileMarksVanishedSandboxGoneAndFollowsState(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	killed := f.create(t, "bob", "s", true, true)
	paused := f.create(t, "bob", "s", true, true)
	if err := f.c.KillSandbox(ctx, killed); err != nil {
		t.Fatal(err)
	}
	if _, err := f.c.PauseSandbox(ctx, paused); err != nil {
		t.Fatal(err)
	}
	rep, err := Reconcile(ctx, f.c, f.st, "bob", "s", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Gone, []string{killed}) {
		t.Fatalf("gone = %v, want [%s]", rep.Gone, killed)
	}
	if r := f.record(t, "bob", killed); r.State != state.StateGone || r.GoneReason == "" {
		t.Fatalf("killed record = %+v, want gone with a reason", r)
	}
	if r := f.record(t, "bob", paused); r.State != e2b.StatePaused {
		t.Fatalf("paused record state = %q", r.State)
	}
}

func TestReconcileKeepsRecordedSandboxWithoutTags(t *testing.T) {
	// A fork carries no metadata at E2B; it must not be declared gone just because the tag filter misses it.
	f := newFixture(t)
	id := f.create(t, "carol", "s", false, true)
	rep, err := Reconcile(context.Background(), f.c, f.st, "carol", "s", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Gone) != 0 || f.record(t, "carol", id).State != e2b.StateRunning {
		t.Fatalf("untagged recorded sandbox was marked gone: %+v", rep)
	}
}

func TestSweepPausesOnlyLapsedSessions(t *testing.T) {
	for _, action := range []OrphanAction{OrphanPause, OrphanKill, OrphanKeep} {
		t.Run(string(action), func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			if _, err := f.st.TouchSession("dan", "old", time.Hour); err != nil {
				t.Fatal(err)
			}
			oldRecorded := f.create(t, "dan", "old", true, true)
			oldUnrecorded := f.create(t, "dan", "old", true, false)
			untagged := f.create(t, "dan", "old", false, false)
			f.clock.Advance(50 * time.Minute)
			if _, err := f.st.TouchSession("dan", "live", time.Hour); err != nil {
				t.Fatal(err)
			}
			live := f.create(t, "dan", "live", true, true)
			f.clock.Advance(20 * time.Minute) // "old" lapsed 10 minutes ago, "live" has 40 minutes left

			sw := &Sweeper{Store: f.st, Action: action, Now: f.clock.Now,
				Client: func(context.Context, string) (*e2b.Client, error) { return f.c, nil }}
			rep, err := sw.Sweep(ctx)
			if err != nil || len(rep.Errors) != 0 {
				t.Fatalf("sweep: %v %v", err, rep.Errors)
			}
			if !slices.Equal(rep.LapsedSessions, []string{"dan/old"}) {
				t.Fatalf("lapsed = %v", rep.LapsedSessions)
			}
			wantState := map[OrphanAction]string{OrphanPause: e2b.StatePaused, OrphanKill: "", OrphanKeep: e2b.StateRunning}[action]
			for _, id := range []string{oldRecorded, oldUnrecorded} {
				sb, exists := f.srv.Sandbox(id)
				if got := map[bool]string{true: sb.State}[exists]; got != wantState {
					t.Errorf("orphan %s at E2B: state %q, want %q", id, got, wantState)
				}
			}
			for _, id := range []string{live, untagged} {
				if sb, ok := f.srv.Sandbox(id); !ok || sb.State != e2b.StateRunning {
					t.Errorf("sandbox %s outside the lapsed session was touched: %+v %v", id, sb, ok)
				}
			}
			if action == OrphanKill {
				if r := f.record(t, "dan", oldRecorded); r.State != state.StateGone || r.GoneReason == "" {
					t.Errorf("killed orphan record = %+v", r)
				}
			}
			// The session is handled once; a second sweep finds nothing until it is used again.
			rep, err = sw.Sweep(ctx)
			if err != nil || len(rep.LapsedSessions) != 0 {
				t.Fatalf("second sweep = %+v, %v", rep, err)
			}
		})
	}
}

func TestParseOrphanAction(t *testing.T) {
	for _, s := range []string{"pause", "kill", "keep"} {
		if a, err := ParseOrphanAction(s); err != nil || string(a) != s {
			t.Errorf("ParseOrphanAction(%q) = %q, %v", s, a, err)
		}
	}
	if _, err := ParseOrphanAction("delete"); err == nil {
		t.Error("ParseOrphanAction accepted delete")
	}
}

// failingSandbox is a transport that answers E2B's 500 to every pause and kill of one sandbox while failing is
// set, and passes everything else to the emulator.
type failingSandbox struct {
	id      string
	mu      sync.Mutex
	failing bool
}

func (f *failingSandbox) set(failing bool) { f.mu.Lock(); f.failing = failing; f.mu.Unlock() }

func (f *failingSandbox) RoundTrip(r *http.Request) (*http.Response, error) {
	f.mu.Lock()
	failing := f.failing
	f.mu.Unlock()
	target := r.URL.Path == "/sandboxes/"+f.id+"/pause" || (r.Method == http.MethodDelete && r.URL.Path == "/sandboxes/"+f.id)
	if !failing || !target {
		return http.DefaultTransport.RoundTrip(r)
	}
	if r.Body != nil {
		r.Body.Close()
	}
	return &http.Response{
		StatusCode: http.StatusInternalServerError,
		Status:     "500 Internal Server Error",
		Header:     http.Header{"Content-Type": {"application/json"}},
		Body:       io.NopCloser(strings.NewReader(`{"code":500,"message":"injected failure"}`)),
		Request:    r,
	}, nil
}

// A sweep that fails to pause or kill one sandbox of a lapsed session acts on the others and leaves the session
// unmarked, so that the next sweep tries again: one passing E2B error must not leave an orphan running for good.
func TestSweepFailureLeavesSessionForNextSweep(t *testing.T) {
	for _, action := range []OrphanAction{OrphanPause, OrphanKill} {
		t.Run(string(action), func(t *testing.T) {
			f := newFixture(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := f.st.TouchSession("erin", "s", time.Hour); err != nil {
				t.Fatal(err)
			}
			healthy := f.create(t, "erin", "s", true, true)
			stuck := f.create(t, "erin", "s", true, true)
			f.clock.Advance(2 * time.Hour)

			tr := &failingSandbox{id: stuck, failing: true}
			c, err := e2b.NewClient(e2b.Config{APIKey: testKey, APIURL: f.srv.URL(), SandboxURL: f.srv.URL(),
				HTTPClient: &http.Client{Transport: tr}, MaxRetries: -1})
			if err != nil {
				t.Fatal(err)
			}
			sw := &Sweeper{Store: f.st, Action: action, Now: f.clock.Now,
				Client: func(context.Context, string) (*e2b.Client, error) { return c, nil }}
			acted := func(id string) bool {
				sb, ok := f.srv.Sandbox(id)
				return !ok || sb.State != e2b.StateRunning
			}

			rep, err := sw.Sweep(ctx)
			if err != nil || len(rep.Errors) == 0 {
				t.Fatalf("sweep with a failing %s: %v, errors %v (want the failure reported)", action, err, rep.Errors)
			}
			if !acted(healthy) || acted(stuck) {
				t.Fatalf("after the failed sweep: healthy acted on %v, stuck acted on %v", acted(healthy), acted(stuck))
			}
			lapsed, err := f.st.LapsedSessions(f.clock.Now())
			if err != nil || len(lapsed) != 1 || lapsed[0].Name != "s" {
				t.Fatalf("after a failed sweep the session must still be due: %+v %v", lapsed, err)
			}

			tr.set(false)
			if rep, err := sw.Sweep(ctx); err != nil || len(rep.Errors) != 0 || !slices.Equal(rep.LapsedSessions, []string{"erin/s"}) {
				t.Fatalf("the next sweep: %+v %v", rep, err)
			}
			if !acted(stuck) {
				t.Fatal("the next sweep did not act on the sandbox the first one failed on")
			}
			if lapsed, err := f.st.LapsedSessions(f.clock.Now()); err != nil || len(lapsed) != 0 {
				t.Fatalf("after a complete sweep the session is still due: %+v %v", lapsed, err)
			}
		})
	}
}

// Sweepers of several processes sharing one store (replicas) sweep each lapsed session once: one pause per
// orphan at E2B, however many sweep at the same moment.
func TestConcurrentSweepersActOnEachOrphanOnce(t *testing.T) {
	f := newFixture(t)
	var orphans []string
	for _, session := range []string{"a", "b", "c"} {
		if _, err := f.st.TouchSession("dan", session, time.Hour); err != nil {
			t.Fatal(err)
		}
		orphans = append(orphans, f.create(t, "dan", session, true, true), f.create(t, "dan", session, true, false))
	}
	f.clock.Advance(2 * time.Hour)
	f.srv.ResetRequests()

	const sweepers = 6
	reports := make([]SweepReport, sweepers)
	var wg sync.WaitGroup
	for i := range sweepers {
		sw := &Sweeper{Store: f.st, Action: OrphanPause, Now: f.clock.Now,
			Client: func(context.Context, string) (*e2b.Client, error) { return f.c, nil }}
		wg.Go(func() {
			rep, err := sw.Sweep(context.Background())
			if err != nil || len(rep.Errors) > 0 {
				t.Errorf("sweeper %d: %v %v", i, err, rep.Errors)
			}
			reports[i] = rep
		})
	}
	waitfor.Return(t, time.Minute, "the concurrent sweeps", wg.Wait)
	var swept []string
	for _, rep := range reports {
		swept = append(swept, rep.LapsedSessions...)
	}
	slices.Sort(swept)
	if want := []string{"dan/a", "dan/b", "dan/c"}; !slices.Equal(swept, want) {
		t.Fatalf("sessions swept %v, want each of %v once", swept, want)
	}
	pauses := map[string]int{}
	for _, r := range f.srv.Requests() {
		if r.Method == "POST" && strings.HasSuffix(r.Path, "/pause") {
			pauses[strings.TrimSuffix(strings.TrimPrefix(r.Path, "/sandboxes/"), "/pause")]++
		}
	}
	for _, id := range orphans {
		if pauses[id] != 1 {
			t.Errorf("orphan %s paused %d times, want once (all pauses: %v)", id, pauses[id], pauses)
		}
	}
}

// A sweep that fails gives its claim back, so the next sweep (of any process) tries the session again at once.
func TestFailedSweepIsRetried(t *testing.T) {
	f := newFixture(t)
	if _, err := f.st.TouchSession("dan", "old", time.Hour); err != nil {
		t.Fatal(err)
	}
	orphan := f.create(t, "dan", "old", true, true)
	f.clock.Advance(2 * time.Hour)
	noKey := errors.New("no E2B key for dan")
	failing := &Sweeper{Store: f.st, Action: OrphanPause, Now: f.clock.Now,
		Client: func(context.Context, string) (*e2b.Client, error) { return nil, noKey }}
	if rep, err := failing.Sweep(context.Background()); err != nil || len(rep.Errors) == 0 {
		t.Fatalf("failing sweep = %+v, %v; want its error reported", rep, err)
	}
	working := &Sweeper{Store: f.st, Action: OrphanPause, Now: f.clock.Now,
		Client: func(context.Context, string) (*e2b.Client, error) { return f.c, nil }}
	rep, err := working.Sweep(context.Background())
	if err != nil || len(rep.Errors) > 0 || !slices.Equal(rep.Paused, []string{orphan}) {
		t.Fatalf("retry = %+v, %v; want %s paused", rep, err, orphan)
	}
}

// A call that renews a session while it is being swept (the user came back just as the lease ran out) leaves it
// live: what that call makes is swept once the new lease runs out, not passed over as if the session were done.
func TestSessionRenewedMidSweepIsSweptAgain(t *testing.T) {
	f := newFixture(t)
	if _, err := f.st.TouchSession("dan", "back", time.Hour); err != nil {
		t.Fatal(err)
	}
	first := f.create(t, "dan", "back", true, true)
	f.clock.Advance(2 * time.Hour)
	renewed := false
	sw := &Sweeper{Store: f.st, Action: OrphanKill, Now: f.clock.Now,
		Client: func(context.Context, string) (*e2b.Client, error) {
			if !renewed { // the session is claimed: a call comes in and renews it
				renewed = true
				if _, err := f.st.TouchSession("dan", "back", time.Hour); err != nil {
					t.Error(err)
				}
			}
			return f.c, nil
		}}
	if rep, err := sw.Sweep(context.Background()); err != nil || len(rep.Errors) > 0 || !slices.Equal(rep.Killed, []string{first}) {
		t.Fatalf("sweep: %+v %v; want %s killed", rep, err, first)
	}
	made := f.create(t, "dan", "back", true, true) // the renewing call makes a sandbox after the sweep listed them
	f.clock.Advance(2 * time.Hour)                 // the renewed lease has run out too
	rep, err := sw.Sweep(context.Background())
	if err != nil || len(rep.Errors) > 0 || !slices.Contains(rep.Killed, made) {
		t.Fatalf("the sweep after the renewed lease ran out = %+v, %v; want %s (made by the renewing call) killed", rep, err, made)
	}
	for _, id := range []string{first, made} {
		if _, found := f.srv.Sandbox(id); found {
			t.Errorf("sandbox %s of the lapsed session is still there", id)
		}
	}
}

// A paused sandbox that E2B lists with a lapsed session's tags but the store never recorded (a server that crashed
// between create and record, a pause done elsewhere) is killed by the kill action: a paused sandbox still costs its
// storage. The pause action leaves it as it is.
func TestSweepKillsPausedOrphansTheStoreDoesNotKnow(t *testing.T) {
	for _, action := range []OrphanAction{OrphanKill, OrphanPause} {
		t.Run(string(action), func(t *testing.T) {
			f := newFixture(t)
			ctx := context.Background()
			if _, err := f.st.TouchSession("fay", "old", time.Hour); err != nil {
				t.Fatal(err)
			}
			orphan := f.create(t, "fay", "old", true, false)
			if _, err := f.c.PauseSandbox(ctx, orphan); err != nil {
				t.Fatal(err)
			}
			f.clock.Advance(2 * time.Hour)

			sw := &Sweeper{Store: f.st, Action: action, Now: f.clock.Now,
				Client: func(context.Context, string) (*e2b.Client, error) { return f.c, nil }}
			rep, err := sw.Sweep(ctx)
			if err != nil || len(rep.Errors) != 0 {
				t.Fatalf("sweep: %v %v", err, rep.Errors)
			}
			sb, exists := f.srv.Sandbox(orphan)
			switch action {
			case OrphanKill:
				if exists || !slices.Equal(rep.Killed, []string{orphan}) {
					t.Fatalf("the paused orphan %s was not killed: at E2B %v (state %q), report %+v", orphan, exists, sb.State, rep)
				}
			case OrphanPause:
				if !exists || sb.State != e2b.StatePaused || len(rep.Paused) != 0 {
					t.Fatalf("the paused orphan %s: at E2B %v (state %q), report %+v; want it left paused", orphan, exists, sb.State, rep)
				}
			}
		})
	}
}

// TestWhoPaused: a sandbox made to pause at its timeout that E2B pauses behind the record's back is recorded as
// paused at its timeout, by Reconcile and by the sweep alike (the sweep finds it paused already and does not claim
// it); one the sweep pauses is recorded as paused by the sweep; one made to be killed at its timeout that E2B
// pauses was paused by someone unknown.
func TestWhoPaused(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.st.TouchSession("erin", "old", time.Hour); err != nil {
		t.Fatal(err)
	}
	onTimeout := func(id, action string) {
		if _, err := f.st.UpdateSandbox("erin", id, func(r *state.SandboxRecord) error { r.OnTimeout = action; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	atTimeout := f.create(t, "erin", "old", true, true)
	onTimeout(atTimeout, e2b.OnTimeoutPause)
	unknown := f.create(t, "erin", "old", true, true)
	onTimeout(unknown, e2b.OnTimeoutKill)
	for _, id := range []string{atTimeout, unknown} {
		if _, err := f.c.PauseSandbox(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Reconcile(ctx, f.c, f.st, "erin", "old", nil); err != nil {
		t.Fatal(err)
	}
	if r := f.record(t, "erin", atTimeout); r.State != state.StatePaused || r.PausedBy != state.PausedAtTimeout {
		t.Fatalf("paused by E2B at its timeout: %+v", r)
	}
	if r := f.record(t, "erin", unknown); r.State != state.StatePaused || r.PausedBy != "" {
		t.Fatalf("paused by someone else: %+v", r)
	}

	// Behind the record's back again, this time before the sweep comes.
	stale := f.create(t, "erin", "old", true, true)
	onTimeout(stale, e2b.OnTimeoutPause)
	if _, err := f.c.PauseSandbox(ctx, stale); err != nil {
		t.Fatal(err)
	}
	swept := f.create(t, "erin", "old", true, true)
	f.clock.Advance(2 * time.Hour)
	sw := &Sweeper{Store: f.st, Action: OrphanPause, Now: f.clock.Now,
		Client: func(context.Context, string) (*e2b.Client, error) { return f.c, nil }}
	if rep, err := sw.Sweep(ctx); err != nil || len(rep.Errors) != 0 {
		t.Fatalf("sweep: %v %v", err, rep.Errors)
	}
	for id, want := range map[string]string{swept: state.PausedBySweep, stale: state.PausedAtTimeout, atTimeout: state.PausedAtTimeout} {
		if r := f.record(t, "erin", id); r.State != state.StatePaused || r.PausedBy != want {
			t.Errorf("%s after the sweep: %+v, want paused by %q", id, r, want)
		}
	}
}

// A sandbox adopted from E2B's listing (by a restarted server, or another replica) keeps the on_timeout it was
// created with, whichever it is: what E2B does at its timeout is what the record says.
func TestReconcileAdoptsOnTimeout(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	made := map[string]string{}
	for _, onTimeout := range []string{e2b.OnTimeoutPause, e2b.OnTimeoutKill} {
		req := e2b.NewSandbox{TemplateID: "base", Timeout: 600, Secure: true, Metadata: Metadata("alice", "s1", onTimeout)}
		sb, err := f.c.CreateSandbox(ctx, req.WithLifecycle(onTimeout, false))
		if err != nil {
			t.Fatal(err)
		}
		made[sb.SandboxID] = onTimeout
	}
	rep, err := Reconcile(ctx, f.c, f.st, "alice", "s1", nil)
	if err != nil || len(rep.Adopted) != 2 {
		t.Fatalf("reconcile = %+v, %v; want both adopted", rep, err)
	}
	for id, want := range made {
		if got := f.record(t, "alice", id).OnTimeout; got != want {
			t.Errorf("sandbox %s made with on_timeout %s is adopted with %q", id, want, got)
		}
	}
}

// A sandbox this server created and lost track of (a crash between E2B's answer and the record) counts against its
// owner's caps and usage once reconciliation adopts it, from when E2B started it; one created outside e2b-mcp with
// the same key never does.
func TestReconciledSandboxCountsAndOutsideOneDoesNot(t *testing.T) {
	f := newFixtureOn(t, true)
	clk, st, c, srv := f.clock, f.st, f.c, f.srv
	lost := f.create(t, "alice", "s1", true, false)
	f.create(t, "alice", "s1", false, false) // outside e2b-mcp, same key
	clk.Advance(5 * time.Minute)

	if days, err := st.Usage("alice", clk.Now()); err != nil || len(days) != 0 {
		t.Fatalf("usage before reconciliation: %+v, %v; want none", days, err)
	}
	rep, err := Reconcile(context.Background(), c, st, "alice", "s1", nil)
	if err != nil || !slices.Equal(rep.Adopted, []string{lost}) {
		t.Fatalf("reconcile: %+v, %v; want %s adopted", rep, err, lost)
	}
	days, err := st.Usage("alice", clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	sums := state.SumUsage(days)
	if len(sums) != 1 || sums[0].Created != 1 || sums[0].RunningSeconds != 300 {
		t.Fatalf("usage after adopting a sandbox E2B started 5 minutes ago: %+v; want 1 created, 300 s", sums)
	}
	if billed := srv.RunningTime(testKey); billed != 10*time.Minute {
		t.Fatalf("E2B's running time of both: %v", billed)
	}
	if live, running, err := st.SandboxUse("alice"); err != nil || live != 1 || running != 1 {
		t.Fatalf("caps count %d live, %d running, %v; want the adopted one only", live, running, err)
	}
}
