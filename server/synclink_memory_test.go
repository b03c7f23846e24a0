package server

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/server/synclink"
	"github.com/e2b-mcp/e2b-mcp/workspace"
)

// The lists of paths a member's steps send (a sync in's deletions, a sync out's fetch) are bounded on their total,
// not by the most entries times the longest path, which the server would hold whole: a list of as many 4 KB names
// as the limits allow entries is refused (the deletions with nothing unpacked, the fetch with nothing run), and a
// new base over the manifest's cap is refused by its length.
func TestSyncLinkPathListsAreBoundedOnTheirTotal(t *testing.T) {
	x := newSyncLinkFixture(t, e2btest.Options{})
	name := strings.Repeat("d", workspace.MaxNameBytes-1)
	names := make([]string, syncTestLimits.MaxEntries)
	for i := range names {
		names[i] = name
	}
	list := strings.Join(names, "\x00")
	man := `{"version":1,"local":"/home/me/project","remote":"/home/user/project","entries":[]}`

	_, ticket := x.link(t)
	_, next, _ := x.step(t, http.MethodPost, "begin", ticket, "alice", nil, nil)
	var stream bytes.Buffer
	tw := tar.NewWriter(&stream)
	for _, part := range []struct{ name, data string }{{"deletes", list}, {"manifest", man}} {
		_ = tw.WriteHeader(&tar.Header{Name: part.name, Typeflag: tar.TypeReg, Size: int64(len(part.data)),
			Format: tar.FormatPAX, PAXRecords: map[string]string{"E2BMCP.sync": part.name}})
		_, _ = tw.Write([]byte(part.data))
	}
	tw.Close()
	code, _, text := x.step(t, http.MethodPost, "in", next, "alice", &stream, nil)
	if code != http.StatusUnprocessableEntity || !strings.Contains(text, "deletes is not a regular entry of at most") {
		t.Errorf("a sync in deleting %d names of 4 KB: %d %.200q, want 422 saying the list's bound", len(names), code, text)
	}
	x.untouched(t, "a huge deletion list")

	_, in := x.link(t)
	_, next, _ = x.step(t, http.MethodPost, "begin", in, "alice", nil, nil)
	file := &tar.Header{Name: "a.txt", Typeflag: tar.TypeReg, Mode: 0o644}
	if code, _, text := x.step(t, http.MethodPost, "in", next, "alice", syncTar(t, man, file, "a"), nil); code !=
		http.StatusOK {
		t.Fatalf("sync in: %d %q", code, text)
	}
	out := func() (fetch string) {
		res := mustOK(t, x.c, "e2b_sync_out", map[string]any{"sandbox_id": x.id, "remote_path": "project",
			"local_path": "/home/me/project", "apply": true})
		_, ticket, err := synclink.SplitLink(strings.Split(res["command"].(string), "'")[1])
		if err != nil {
			t.Fatal(err)
		}
		_, next, _ := x.step(t, http.MethodPost, "begin", ticket, "alice", nil, nil)
		code, fetch, text := x.step(t, http.MethodPost, "list", next, "alice", strings.NewReader(`{"prune":[]}`), nil)
		if code != http.StatusOK {
			t.Fatalf("list: %d %q", code, text)
		}
		return fetch
	}
	code, _, text = x.step(t, http.MethodPost, "fetch", out(), "alice", strings.NewReader(list), nil)
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(text, "over the server's limit") {
		t.Errorf("a fetch of %d names of 4 KB: %d %.200q, want 413", len(names), code, text)
	}
	if got := lastEntry(t, x.f, synclink.AuditTool); got.Args["step"] != "fetch" || got.Outcome != "error" {
		t.Errorf("the refused fetch's audit entry: %+v", got)
	}

	_, rebase, _ := x.step(t, http.MethodPost, "fetch", out(), "alice", strings.NewReader("a.txt"), nil)
	huge := bytes.Repeat([]byte(" "), int(int64(syncTestLimits.MaxEntries)*64<<10)+1)
	code, _, text = x.step(t, http.MethodPost, "rebase", rebase, "alice", bytes.NewReader(huge), nil)
	if code != http.StatusRequestEntityTooLarge || !strings.Contains(text, "over the server's limit") {
		t.Errorf("a new base over the manifest's cap: %d %q, want 413", code, text)
	}
}

// A step that holds its body whole takes one of the server's places for large bodies as a tool call does, so that
// members' steps and calls together hold a few such bodies at a time: while every place is held, a new base of
// more than a small body is turned away (503) with its ticket kept, and goes through once a place is free.
func TestSyncLinkHeldBodiesTakeTheServersPlaces(t *testing.T) {
	x := newSyncLinkFixture(t, e2btest.Options{})
	x.placesNeverWait()
	man := `{"version":1,"local":"/home/me/project","remote":"/home/user/project","entries":[]}`
	_, in := x.link(t)
	_, next, _ := x.step(t, http.MethodPost, "begin", in, "alice", nil, nil)
	file := &tar.Header{Name: "a.txt", Typeflag: tar.TypeReg, Mode: 0o644}
	if code, _, text := x.step(t, http.MethodPost, "in", next, "alice", syncTar(t, man, file, "a"), nil); code !=
		http.StatusOK {
		t.Fatalf("sync in: %d %q", code, text)
	}
	res := mustOK(t, x.c, "e2b_sync_out", map[string]any{"sandbox_id": x.id, "remote_path": "project",
		"local_path": "/home/me/project", "apply": true})
	_, ticket, err := synclink.SplitLink(strings.Split(res["command"].(string), "'")[1])
	if err != nil {
		t.Fatal(err)
	}
	_, next, _ = x.step(t, http.MethodPost, "begin", ticket, "alice", nil, nil)
	_, fetch, _ := x.step(t, http.MethodPost, "list", next, "alice", strings.NewReader(`{"prune":[]}`), nil)
	_, rebase, _ := x.step(t, http.MethodPost, "fetch", fetch, "alice", strings.NewReader("a.txt"), nil)

	for range largeBodies {
		x.f.srv.limits.large <- struct{}{}
	}
	base := man + strings.Repeat(" ", smallBody) // a manifest past a small body, within the step's cap
	code, _, text := x.step(t, http.MethodPost, "rebase", rebase, "alice", strings.NewReader(base), nil)
	if code != http.StatusServiceUnavailable {
		t.Errorf("a new base of %d bytes while every place is held: %d %q, want 503", len(base), code, text)
	}
	for range largeBodies {
		<-x.f.srv.limits.large
	}
	if code, _, text := x.step(t, http.MethodPost, "rebase", rebase, "alice", strings.NewReader(base), nil); code !=
		http.StatusNoContent {
		t.Errorf("the new base sent again once places are free: %d %q, want 204", code, text)
	}
	if n := len(x.f.srv.limits.large); n != 0 {
		t.Errorf("%d places held after the steps ended", n)
	}
}

// What a step holds whole after its ticket is spent, a sync in's deletions and manifest at the end of its stream
// or the sandbox's manifest a begin answers with, takes one of the places for large bodies then, and only then:
// while every place is held, a manifest of more than a small body is refused (503 with a ticket to send the step
// again, the sandbox untouched) while a small manifest after a large file goes through; once places are free the large manifest goes
// through, and its place is given back.
func TestSyncLinkStepsHoldLargeManifestsInAPlace(t *testing.T) {
	x := newSyncLinkFixture(t, e2btest.Options{})
	x.placesNeverWait()
	man := `{"version":1,"local":"/home/me/project","remote":"/home/user/project","entries":[]}`
	large := man + strings.Repeat(" ", smallBody) // a manifest past a small body, within the step's cap
	file := func() *tar.Header { return &tar.Header{Name: "a.txt", Typeflag: tar.TypeReg, Mode: 0o644} }
	post := func(step, ticket string, body io.Reader) (int, string, http.Header) {
		return x.send(t, http.MethodPost, step, ticket, "alice", body, nil)
	}
	in := func(manifest, content string) (int, string, http.Header) {
		_, ticket := x.link(t)
		_, next, _ := x.step(t, http.MethodPost, "begin", ticket, "alice", nil, nil)
		return post("in", next, syncTar(t, manifest, file(), content))
	}
	holdAll := func() {
		for range largeBodies {
			x.f.srv.limits.large <- struct{}{}
		}
	}
	freeAll := func() {
		for range largeBodies {
			<-x.f.srv.limits.large
		}
	}
	busy := func(what string, code int, text string, hdr http.Header) {
		t.Helper()
		if code != http.StatusServiceUnavailable || hdr.Get("Retry-After") == "" || hdr.Get(synclink.RetryHeader) == "" ||
			!strings.Contains(text, "can be sent again") {
			t.Errorf("%s while every place is held: %d %.200q (Retry-After %q), want 503 with a ticket to send it again",
				what, code, text, hdr.Get("Retry-After"))
		}
	}

	holdAll()
	code, text, hdr := in(large, "a")
	busy(fmt.Sprintf("a sync in with a manifest of %d bytes", len(large)), code, text, hdr)
	x.untouched(t, "a sync in whose manifest found no place")
	big := strings.Repeat("x", int(syncTestLimits.MaxFileBytes))
	if code, text, _ := in(man, big); code != http.StatusOK {
		t.Errorf("a sync in of a %d-byte file and a small manifest while every place is held: %d %q, want 200",
			len(big), code, text)
	}
	freeAll()
	if code, text, _ := in(large, "a"); code != http.StatusOK {
		t.Errorf("the large manifest once places are free: %d %q, want 200", code, text)
	}

	holdAll()
	_, ticket := x.link(t)
	code, text, hdr = post("begin", ticket, nil)
	busy(fmt.Sprintf("a begin answering the sandbox's manifest of %d bytes", len(large)), code, text, hdr)
	freeAll()
	_, ticket = x.link(t)
	if code, text, _ := post("begin", ticket, nil); code != http.StatusOK ||
		!strings.Contains(text, `"remote":"/home/user/project"`) {
		t.Errorf("a begin answering the large manifest once places are free: %d %.200q, want 200 with it", code, text)
	}

	// A listing of the sandbox's tree past a small one: 6,000 names of 200 bytes.
	mustOK(t, x.c, "e2b_exec", map[string]any{"sandbox_id": x.id, "command": "cd /home/user/project && " +
		"for i in $(seq 6000); do : > f$(printf %0200d $i); done"})
	list := func(placesHeld bool) (int, string, http.Header) {
		res := mustOK(t, x.c, "e2b_sync_out", map[string]any{"sandbox_id": x.id, "remote_path": "project",
			"local_path": "/home/me/project"})
		_, ticket, err := synclink.SplitLink(strings.Split(res["command"].(string), "'")[1])
		if err != nil {
			t.Fatal(err)
		}
		_, next, _ := x.step(t, http.MethodPost, "begin", ticket, "alice", nil, nil)
		if placesHeld {
			holdAll()
			defer freeAll()
		}
		return post("list", next, strings.NewReader(`{"prune":[]}`))
	}
	code, text, hdr = list(true)
	busy("a list of a tree of 6,000 long names", code, text, hdr)
	code, text, _ = list(false)
	if code != http.StatusOK || len(text) <= smallBody {
		t.Errorf("the list once places are free: %d, %d bytes, want 200 with more than %d", code, len(text), smallBody)
	}
	if n := len(x.f.srv.limits.large); n != 0 {
		t.Errorf("%d places held after the steps ended", n)
	}
}

// placesFreedOnRetry is the member's transport in a test where every place is held: it frees them when the server
// turns a step away with a ticket to send it again, and counts those answers.
type placesFreedOnRetry struct {
	free    func()
	retries int
}

func (p *placesFreedOnRetry) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := http.DefaultTransport.RoundTrip(req)
	if err == nil && res.Header.Get(synclink.RetryHeader) != "" {
		p.retries++
		p.free()
	}
	return res, err
}

// The member's command sends a step turned away for want of a place after its ticket was spent (a sync in's
// manifest, a begin's, a list's listing) again with the ticket the 503 carries, once a place is free, instead of
// failing and asking for a new link: each step goes through on its second try, the audit log has both, and the
// sandbox was untouched by the first.
func TestSyncLinkCommandSendsAStepTurnedAwayAgain(t *testing.T) {
	x := newSyncLinkFixture(t, e2btest.Options{})
	x.placesNeverWait()
	held := false
	rt := &placesFreedOnRetry{free: func() {
		if held {
			held = false
			for range largeBodies {
				<-x.f.srv.limits.large
			}
		}
	}}
	holdAll := func() {
		if held {
			return // still held: the last step was never sent again
		}
		held = true
		for range largeBodies {
			x.f.srv.limits.large <- struct{}{}
		}
	}
	client := func(link string) *synclink.Client {
		c, err := synclink.NewClient(link, x.base, x.toks["alice"], &http.Client{Transport: rt})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	steps := func(step string) (outcomes []string) {
		for _, e := range x.f.auditEntries(t) {
			if e.Tool == synclink.AuditTool && e.Args["step"] == step {
				outcomes = append(outcomes, e.Outcome)
			}
		}
		return outcomes
	}
	man := `{"version":1,"local":"/home/me/project","remote":"/home/user/project","entries":[]}`
	large := man + strings.Repeat(" ", smallBody)

	link, _ := x.link(t)
	c := client(link)
	if _, err := c.Begin(t.Context()); err != nil {
		t.Fatal(err)
	}
	holdAll()
	tries := 0
	got, err := c.SendIn(t.Context(), func() io.ReadCloser {
		if tries++; tries > 1 {
			x.untouched(t, "a sync in whose manifest found no place, before it is sent again")
		}
		return io.NopCloser(syncTar(t, large, &tar.Header{Name: "a.txt", Typeflag: tar.TypeReg, Mode: 0o644}, "a"))
	})
	if err != nil || got.Entries != 1 || tries != 2 {
		t.Errorf("a sync in with a manifest of %d bytes while every place is held, then free: %+v, %v after %d tries, "+
			"want 1 entry after 2", len(large), got, err, tries)
	}
	if got := steps("in"); !slices.Equal(got, []string{"error", "ok"}) {
		t.Errorf("the sync in's steps in the audit log: %v, want the refused one and the one sent again", got)
	}

	link, _ = x.link(t)
	holdAll()
	if begun, err := client(link).Begin(t.Context()); err != nil || begun.Manifest == nil {
		t.Errorf("a begin answering a manifest of %d bytes while every place is held, then free: %+v, %v", len(large),
			begun, err)
	}

	mustOK(t, x.c, "e2b_exec", map[string]any{"sandbox_id": x.id, "command": "cd /home/user/project && " +
		"for i in $(seq 6000); do : > f$(printf %0200d $i); done"})
	res := mustOK(t, x.c, "e2b_sync_out", map[string]any{"sandbox_id": x.id, "remote_path": "project",
		"local_path": "/home/me/project"})
	c = client(strings.Split(res["command"].(string), "'")[1])
	if _, err := c.Begin(t.Context()); err != nil {
		t.Fatal(err)
	}
	holdAll()
	listing, err := c.Sandbox(t.Context()).List(nil)
	if err != nil || len(listing) <= smallBody {
		t.Errorf("a list of a tree of 6,000 long names while every place is held, then free: %d bytes, %v",
			len(listing), err)
	}
	if rt.retries != 3 || len(x.f.srv.limits.large) != 0 {
		t.Errorf("%d steps sent again (want 3), %d places held after the steps ended", rt.retries,
			len(x.f.srv.limits.large))
	}
}

// The ticket a 503 carries to send a step again is the spent one's in all but its nonce: it is its member's alone
// (another member's token is refused and uses nothing up), it works once, and it expires when the spent ticket
// would have, not ten minutes after the refusal.
func TestSyncLinkTicketToSendAgainIsNoNewLink(t *testing.T) {
	x := newSyncLinkFixture(t, e2btest.Options{})
	x.placesNeverWait()
	man := `{"version":1,"local":"/home/me/project","remote":"/home/user/project","entries":[]}`
	large := man + strings.Repeat(" ", smallBody)
	_, ticket := x.link(t)
	_, next, _ := x.step(t, http.MethodPost, "begin", ticket, "alice", nil, nil)
	file := &tar.Header{Name: "a.txt", Typeflag: tar.TypeReg, Mode: 0o644}
	if code, _, text := x.step(t, http.MethodPost, "in", next, "alice", syncTar(t, large, file, "a"), nil); code !=
		http.StatusOK {
		t.Fatalf("sync in: %d %q", code, text)
	}
	// turnedAway is the ticket to send again a begin of ticket turned away for want of a place.
	turnedAway := func(ticket string) string {
		t.Helper()
		for range largeBodies {
			x.f.srv.limits.large <- struct{}{}
		}
		defer func() {
			for range largeBodies {
				<-x.f.srv.limits.large
			}
		}()
		code, _, header := x.send(t, http.MethodPost, "begin", ticket, "alice", nil, nil)
		again := header.Get(synclink.RetryHeader)
		if code != http.StatusServiceUnavailable || again == "" {
			t.Fatalf("a begin while every place is held: %d, ticket to send again %t", code, again != "")
		}
		return again
	}

	_, ticket = x.link(t)
	again := turnedAway(ticket)
	code, next, text := x.step(t, http.MethodPost, "begin", again, "bob", nil, nil)
	if code != http.StatusForbidden || next != "" || strings.Contains(text, "/home/") {
		t.Errorf("bob sending alice's begin again: %d, next %t, %.200q; want 403 and nothing", code, next != "", text)
	}
	if code, next, text := x.step(t, http.MethodPost, "begin", again, "alice", nil, nil); code != http.StatusOK ||
		next == "" {
		t.Errorf("alice sending her begin again after bob tried: %d %.200q, want 200 and the next ticket", code, text)
	}
	if code, _, text := x.step(t, http.MethodPost, "begin", again, "alice", nil, nil); code != http.StatusGone ||
		!strings.Contains(text, "used already") {
		t.Errorf("the ticket to send again used a second time: %d %.200q, want 410", code, text)
	}

	_, ticket = x.link(t)
	x.clock.Advance(synclink.TTL - time.Minute)
	again = turnedAway(ticket)
	x.clock.Advance(2 * time.Minute) // past the link's ticket's expiry, within ten minutes of the refusal
	if code, _, text := x.step(t, http.MethodPost, "begin", again, "alice", nil, nil); code != http.StatusGone ||
		!strings.Contains(text, "expired") {
		t.Errorf("the ticket to send again, past the expiry of the one it stands for: %d %.200q, want 410", code, text)
	}
}
