package server

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"

	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/internal/clocktest"
	"github.com/e2b-mcp/e2b-mcp/internal/shellquote"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
	"github.com/e2b-mcp/e2b-mcp/server/synclink"
	"github.com/e2b-mcp/e2b-mcp/workspace"
)

// syncLinkFixture is a team server (HTTP, tokens for alice and bob, no workspace roots) on a clock the test
// moves, with small sync limits, alice's in-process client and one sandbox of hers.
type syncLinkFixture struct {
	f     *fixture
	base  string
	toks  map[string]string
	clock *clocktest.Clock
	c     *client.Client
	id    string
}

var syncTestLimits = workspace.Limits{MaxEntries: 100, MaxFileBytes: 1 << 20, MaxTotalBytes: 2 << 20}

func newSyncLinkFixture(t *testing.T, sandboxes e2btest.Options) *syncLinkFixture {
	t.Helper()
	tokens, toks := tokensFor(t, "alice", "bob")
	clock := clocktest.New(time.Now())
	f := newFixture(t, fixtureOpts{tokensFile: tokens, transport: TransportHTTP, policy: allowAll, emulator: sandboxes,
		mutate: func(c *Config, _ *e2btest.Server) { c.Now, c.Tools.SyncLimits = clock.Now, syncTestLimits }})
	base := serveHTTP(t, f)
	x := &syncLinkFixture{f: f, base: base, toks: toks, clock: clock,
		c: streamableClient(t, base, toks["alice"], "s1", eras[0])}
	x.id = createSandbox(t, x.c)
	return x
}

// link is the link of an e2b_sync_in of /home/me/project (which this server cannot see) into /home/user/project.
func (x *syncLinkFixture) link(t *testing.T) (link, ticket string) {
	t.Helper()
	res := mustOK(t, x.c, "e2b_sync_in", map[string]any{"sandbox_id": x.id, "local_path": "/home/me/project"})
	cmd, _ := res["command"].(string)
	if res["remote_path"] != "/home/user/project" || res["entries"] != float64(0) ||
		!strings.HasPrefix(cmd, "e2b-mcp sync in --link '"+x.base+synclink.Path+"#") ||
		!strings.HasSuffix(cmd, "' /home/me/project") {
		t.Fatalf("the tool's answer on a team server: %v", res)
	}
	link = strings.Split(cmd, "'")[1]
	_, ticket, err := synclink.SplitLink(link)
	if err != nil {
		t.Fatal(err)
	}
	return link, ticket
}

// step sends body to a step with a ticket, a token (by owner, "" for none) and more headers; it returns the
// status, the next ticket and the answer's text.
func (x *syncLinkFixture) step(t *testing.T, method, step, ticket, owner string, body io.Reader,
	hdr map[string]string) (int, string, string) {
	t.Helper()
	code, text, header := x.send(t, method, step, ticket, owner, body, hdr)
	return code, header.Get(synclink.NextHeader), text
}

// send is step, returning the answer's status, text and headers.
func (x *syncLinkFixture) send(t *testing.T, method, step, ticket, owner string, body io.Reader,
	hdr map[string]string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, x.base+synclink.Path+"/"+step, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(synclink.TicketHeader, ticket)
	if owner != "" {
		req.Header.Set("Authorization", "Bearer "+x.toks[owner])
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, step, err)
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(text), resp.Header
}

// placesNeverWait makes a step that finds every place for large bodies held turned away at once, not after a
// wait: a test then holds every place for as long as it likes.
func (x *syncLinkFixture) placesNeverWait() {
	x.f.srv.limits.placeTimeout = func(time.Duration) <-chan time.Time {
		now := make(chan time.Time, 1)
		now <- time.Now()
		return now
	}
}

// untouched fails unless the sandbox has no /home/user/project and no scratch file of a sync.
func (x *syncLinkFixture) untouched(t *testing.T, what string) {
	t.Helper()
	out := mustOK(t, x.c, "e2b_exec", map[string]any{"sandbox_id": x.id,
		"command": "ls -d /home/user/project /tmp/e2b-mcp-sync-* /home/user/.e2b-mcp-sync 2>/dev/null; true"})
	if got := strings.TrimSpace(out["stdout"].(string)); got != "" {
		t.Errorf("%s: the sandbox was written to: %s", what, got)
	}
}

// Nobody but the member whose call made the link, from the command line, uses it, once, before it expires; a
// request refused before it is redeemed does not use it up.
func TestSyncLinkIsTheMembersOnceAndNotABrowsers(t *testing.T) {
	x := newSyncLinkFixture(t, e2btest.Options{})
	_, ticket := x.link(t)
	for _, tc := range []struct {
		name, method, owner string
		hdr                 map[string]string
		want                int
	}{
		{"no token", http.MethodPost, "", nil, http.StatusUnauthorized},
		{"another member's token", http.MethodPost, "bob", nil, http.StatusForbidden},
		{"a page's Origin", http.MethodPost, "alice", map[string]string{"Origin": "https://evil.example"},
			http.StatusForbidden},
		{"a same-origin page", http.MethodPost, "alice", map[string]string{"Origin": x.base}, http.StatusForbidden},
		{"a browser's fetch", http.MethodPost, "alice", map[string]string{"Sec-Fetch-Site": "same-site"},
			http.StatusForbidden},
		{"a preflight", http.MethodOptions, "", map[string]string{"Origin": "https://evil.example",
			"Access-Control-Request-Method": "POST"}, http.StatusForbidden},
		{"a GET", http.MethodGet, "alice", nil, http.StatusMethodNotAllowed},
		{"a cookie instead of a token", http.MethodPost, "", map[string]string{"Cookie": "session=" + x.toks["alice"]},
			http.StatusUnauthorized},
	} {
		code, _, text := x.step(t, tc.method, "begin", ticket, tc.owner, nil, tc.hdr)
		if code != tc.want {
			t.Errorf("%s: %d %q, want %d", tc.name, code, text, tc.want)
		}
	}
	if code, _, text := x.step(t, http.MethodPost, "begin", ticket[:len(ticket)-4]+"AAAA", "alice", nil, nil); code !=
		http.StatusForbidden {
		t.Errorf("a forged ticket: %d %q, want 403", code, text)
	}
	if code, _, text := x.step(t, http.MethodPost, "in", ticket, "alice", nil, nil); code != http.StatusConflict {
		t.Errorf("the link's ticket for a later step: %d %q, want 409", code, text)
	}
	long := strings.Repeat("<script>", 500)
	if code, _, text := x.step(t, http.MethodPost, long, ticket, "alice", nil, nil); code != http.StatusConflict ||
		len(text) > 200 {
		t.Errorf("a made-up step: %d, %d bytes of answer, want 409 repeating a little of it", code, len(text))
	}
	code, next, text := x.step(t, http.MethodPost, "begin", ticket, "alice", nil, nil)
	if code != http.StatusOK || next == "" || !strings.Contains(text, `"manifest":null`) {
		t.Fatalf("alice redeeming her link after all that: %d %q (next %q)", code, text, next)
	}
	if code, _, text := x.step(t, http.MethodPost, "begin", ticket, "alice", nil, nil); code != http.StatusGone {
		t.Errorf("the link replayed: %d %q, want 410", code, text)
	}
	_, late := x.link(t)
	x.clock.Advance(synclink.TTL)
	if code, _, text := x.step(t, http.MethodPost, "begin", late, "alice", nil, nil); code != http.StatusGone ||
		!strings.Contains(text, "expired") {
		t.Errorf("an expired link: %d %q, want 410", code, text)
	}
	x.untouched(t, "after the refusals")
}

// syncTar is a stream of entries, each header with its content ("" for none), then the deletions and manifest
// as WriteSyncTar sends them.
func syncTar(t *testing.T, manifest string, entries ...any) *bytes.Buffer {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for i := 0; i < len(entries); i += 2 {
		hdr, content := entries[i].(*tar.Header), entries[i+1].(string)
		hdr.Size = int64(len(content))
		if hdr.Typeflag != tar.TypeReg {
			hdr.Size = 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		_, _ = tw.Write([]byte(content))
	}
	for _, part := range []struct{ name, data string }{{"deletes", ""}, {"manifest", manifest}} {
		_ = tw.WriteHeader(&tar.Header{Name: part.name, Typeflag: tar.TypeReg, Size: int64(len(part.data)),
			Format: tar.FormatPAX, PAXRecords: map[string]string{"E2BMCP.sync": part.name}})
		_, _ = tw.Write([]byte(part.data))
	}
	tw.Close()
	return &b
}

// Each stream a sync in's step refuses leaves the sandbox as it was: nothing in the directory, no scratch file;
// and the well-formed one after them lands whole, with its sizes (never its contents) in the audit log.
func TestSyncLinkRefusedStreamsLeaveTheSandboxUntouched(t *testing.T) {
	for _, target := range []string{"emulator", "envd"} {
		t.Run(target, func(t *testing.T) {
			var sandboxes e2btest.Options
			if target == "envd" {
				startRealEnvd(t).Stop() // skips, saying why, where the real envd cannot run
				sandboxes.Envd = e2btest.RealEnvds()
			}
			testRefusedStreams(t, newSyncLinkFixture(t, sandboxes))
		})
	}
}

func testRefusedStreams(t *testing.T, x *syncLinkFixture) {
	man := `{"version":1,"local":"/home/me/project","remote":"/home/user/project","entries":[]}`
	reg := func(name string) *tar.Header { return &tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644} }
	padded := make([]any, 0, 80)
	for i := range 40 { // each entry within the limits, their PAX records past the step's cap
		h := reg("pad" + string(rune('a'+i%26)) + string(rune('a'+i/26)))
		h.PAXRecords = map[string]string{"E2BMCP.pad": strings.Repeat("p", 400<<10)}
		padded = append(padded, h, "x")
	}
	for _, tc := range []struct {
		name   string
		stream *bytes.Buffer
		want   int
		says   string
	}{
		{"a path climbing out", syncTar(t, man, reg("ok.txt"), "fine", reg("../evil"), "evil"),
			http.StatusUnprocessableEntity, "not a clean relative path"},
		{"an absolute path", syncTar(t, man, reg("/home/user/.bashrc"), "evil"), http.StatusUnprocessableEntity,
			"not a clean relative path"},
		{"a symlink out of the tree", syncTar(t, man, &tar.Header{Name: "out", Typeflag: tar.TypeSymlink,
			Linkname: "../../../etc"}, ""), http.StatusUnprocessableEntity, "outside the tree"},
		{"a hard link", syncTar(t, man, reg("a"), "a", &tar.Header{Name: "b", Typeflag: tar.TypeLink, Linkname: "a"},
			""), http.StatusUnprocessableEntity, "a hard link"},
		{"a device", syncTar(t, man, &tar.Header{Name: "null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}, ""),
			http.StatusUnprocessableEntity, "a device"},
		{"a file over the limit", syncTar(t, man, reg("big"), strings.Repeat("b", 1<<20+1)),
			http.StatusUnprocessableEntity, "over the 1.0 MiB limit"},
		{"a manifest of another directory", syncTar(t, strings.Replace(man, `"remote":"/home/user/project"`,
			`"remote":"/home/user"`, 1), reg("a"), "a"), http.StatusUnprocessableEntity, "not of /home/user/project"},
		{"a body over the cap", syncTar(t, man, padded...), http.StatusRequestEntityTooLarge, "over the server's limit"},
	} {
		_, ticket := x.link(t)
		code, next, text := x.step(t, http.MethodPost, "begin", ticket, "alice", nil, nil)
		if code != http.StatusOK {
			t.Fatalf("%s: begin: %d %q", tc.name, code, text)
		}
		code, _, text = x.step(t, http.MethodPost, "in", next, "alice", tc.stream, nil)
		if code != tc.want || !strings.Contains(text, tc.says) {
			t.Errorf("%s: %d %q, want %d saying %q", tc.name, code, text, tc.want, tc.says)
		}
		x.untouched(t, tc.name)
	}

	_, ticket := x.link(t)
	_, next, _ := x.step(t, http.MethodPost, "begin", ticket, "alice", nil, nil)
	ok := syncTar(t, man, &tar.Header{Name: "sub/", Typeflag: tar.TypeDir, Mode: 0o755}, "", reg("sub/hello.txt"),
		"contents-of-hello\n", &tar.Header{Name: "link", Typeflag: tar.TypeSymlink, Linkname: "sub/hello.txt"}, "")
	size := ok.Len()
	// A sync through a link is a step of the sandbox, as e2b_sync_in is: the checkpoint policy acts on it.
	mustOK(t, x.c, "e2b_set_checkpoint_policy", map[string]any{"sandbox_id": x.id, "every_steps": 1})
	code, _, text := x.step(t, http.MethodPost, "in", next, "alice", ok, nil)
	if code != http.StatusOK || !strings.Contains(text, `"checkpoint_id":"`) {
		t.Fatalf("a well-formed stream: %d %q", code, text)
	}
	mustOK(t, x.c, "e2b_set_checkpoint_policy", map[string]any{"sandbox_id": x.id, "every_steps": 0})
	out := mustOK(t, x.c, "e2b_exec", map[string]any{"sandbox_id": x.id, "command": "cat /home/user/project/link; ls /tmp | " +
		"grep -c e2b-mcp-sync; test -f " + shellquote.Quote("/home/user/.e2b-mcp-sync") + " || ls /home/user/.e2b-mcp-sync | wc -l"})
	if got := out["stdout"].(string); got != "contents-of-hello\n0\n1\n" {
		t.Errorf("after the sync in the sandbox has %q", got)
	}
	got := lastEntry(t, x.f, synclink.AuditTool)
	if got.Outcome != "ok" || got.Owner != "alice" || got.Session != "s1" || got.Args["step"] != "in" ||
		got.Transfer == nil || got.Transfer.FilesIn != 3 || got.Transfer.BytesIn != int64(size) {
		t.Errorf("the audit entry of the step: %+v (transfer %+v), want 3 files and %d bytes in", got, got.Transfer, size)
	}
	raw, err := os.ReadFile(filepath.Join(x.f.dir, "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "contents-of-hello") {
		t.Error("the audit log holds a file's contents")
	}
	var entries []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(string(raw)), "\n") {
		var e map[string]any
		_ = json.Unmarshal([]byte(line), &e)
		entries = append(entries, e)
	}
	if len(entries) == 0 {
		t.Fatal("an empty audit log")
	}
}

// A sync out's link takes its steps in order, each once: the listing, a fetch of clean paths inside the tree
// only, and a new base only on a link made with apply; the fetch's sizes are in the audit log.
func TestSyncLinkOutSteps(t *testing.T) {
	x := newSyncLinkFixture(t, e2btest.Options{})
	mustOK(t, x.c, "e2b_exec", map[string]any{"sandbox_id": x.id, "command": "mkdir -p /home/user/project/sub && " +
		"echo secret > /home/user/outside.txt && echo hello > /home/user/project/sub/a.txt"})
	man := `{"version":1,"local":"/home/me/project","remote":"/home/user/project","entries":[]}`
	outLink := func(apply bool) string {
		res := mustOK(t, x.c, "e2b_sync_out", map[string]any{"sandbox_id": x.id, "remote_path": "project",
			"local_path": "/home/me/project", "apply": apply})
		_, ticket, err := synclink.SplitLink(strings.Split(res["command"].(string), "'")[1])
		if err != nil {
			t.Fatal(err)
		}
		return ticket
	}
	if code, _, text := x.step(t, http.MethodPost, "begin", outLink(false), "alice", nil, nil); code !=
		http.StatusUnprocessableEntity || !strings.Contains(text, "No sync in into /home/user/project") {
		t.Fatalf("a sync out before any sync in: %d %q", code, text)
	}
	_, in := x.link(t)
	_, next, _ := x.step(t, http.MethodPost, "begin", in, "alice", nil, nil)
	if code, _, text := x.step(t, http.MethodPost, "in", next, "alice", syncTar(t, man), nil); code != http.StatusOK {
		t.Fatalf("sync in: %d %q", code, text)
	}

	steps := func(apply bool) (list, fetch string) {
		code, next, text := x.step(t, http.MethodPost, "begin", outLink(apply), "alice", nil, nil)
		if code != http.StatusOK || !strings.Contains(text, `"remote":"/home/user/project"`) {
			t.Fatalf("begin: %d %q", code, text)
		}
		code, fetch, text = x.step(t, http.MethodPost, "list", next, "alice", strings.NewReader(`{"prune":[]}`), nil)
		if code != http.StatusOK || !strings.Contains(text, "sub/a.txt") {
			t.Fatalf("list: %d %q", code, text)
		}
		return next, fetch
	}
	list, _ := steps(false)
	if code, _, _ := x.step(t, http.MethodPost, "list", list, "alice", strings.NewReader(`{}`), nil); code !=
		http.StatusGone {
		t.Errorf("a step replayed: %d, want 410", code)
	}
	for _, bad := range []string{"../outside.txt", "/home/user/outside.txt", "sub/../../outside.txt"} {
		_, fetch := steps(false)
		code, _, text := x.step(t, http.MethodPost, "fetch", fetch, "alice", strings.NewReader("sub/a.txt\x00"+bad), nil)
		if code != http.StatusUnprocessableEntity || strings.Contains(text, "secret") {
			t.Errorf("a fetch of %q: %d (%d bytes, the outside file's content in them: %v), want 422", bad, code,
				len(text), strings.Contains(text, "secret"))
		}
	}
	_, fetch := steps(false)
	code, rebase, text := x.step(t, http.MethodPost, "fetch", fetch, "alice", strings.NewReader("sub/a.txt"), nil)
	if code != http.StatusOK || rebase != "" || !strings.Contains(text, "hello\n") {
		t.Fatalf("a fetch on a patch-only link: %d (next %q)", code, rebase)
	}
	if got := lastEntry(t, x.f, synclink.AuditTool); got.Args["step"] != "fetch" || got.Transfer == nil ||
		got.Transfer.FilesOut != 1 || got.Transfer.BytesOut != int64(len(text)) {
		t.Errorf("the fetch's audit entry: %+v (transfer %+v)", got, got.Transfer)
	}
	list, _ = steps(false)
	if code, _, _ := x.step(t, http.MethodPost, "rebase", list, "alice", strings.NewReader(man), nil); code !=
		http.StatusConflict {
		t.Errorf("a new base through a patch-only link: %d, want 409", code)
	}
	_, fetch = steps(true)
	_, rebase, _ = x.step(t, http.MethodPost, "fetch", fetch, "alice", strings.NewReader("sub/a.txt"), nil)
	if code, _, text := x.step(t, http.MethodPost, "rebase", rebase, "alice", strings.NewReader(man), nil); code !=
		http.StatusNoContent {
		t.Errorf("a new base after an apply: %d %q", code, text)
	}
}

// One member runs at most synclink.DefaultPerOwner steps at once: the next is told to wait (429) without its
// ticket being used up, and goes through once one has ended.
func TestSyncLinkStepsAtOnceAreBounded(t *testing.T) {
	x := newSyncLinkFixture(t, e2btest.Options{})
	type held struct {
		w    *io.PipeWriter
		done chan int
	}
	var stalled []held
	for range synclink.DefaultPerOwner {
		_, ticket := x.link(t)
		_, next, _ := x.step(t, http.MethodPost, "begin", ticket, "alice", nil, nil)
		pr, pw := io.Pipe()
		h := held{w: pw, done: make(chan int, 1)}
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, x.base+synclink.Path+"/in", pr)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(synclink.TicketHeader, next)
		req.Header.Set("Authorization", "Bearer "+x.toks["alice"])
		go func() {
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				h.done <- -1
				return
			}
			resp.Body.Close()
			h.done <- resp.StatusCode
		}()
		stalled = append(stalled, h)
		if _, err := pw.Write([]byte("x")); err != nil { // the request is on its way, its body begun
			t.Fatal(err)
		}
	}
	// A written byte says only that the client sent it, not that the server's step holds its place yet: until
	// all of them do, a step past the bound may still go through (on a link of its own, each time).
	var ticket string
	waitfor.Until(t, 30*time.Second, "a step past the bound to be told to wait (429)", func() bool {
		_, ticket = x.link(t)
		code, _, text := x.step(t, http.MethodPost, "begin", ticket, "alice", nil, nil)
		if code != http.StatusTooManyRequests && code != http.StatusOK {
			t.Fatalf("a step past the bound: %d %q, want 429", code, text)
		}
		return code == http.StatusTooManyRequests
	})
	for _, h := range stalled {
		h.w.Close() // a stream cut short
		if code := waitfor.Recv(t, h.done, 30*time.Second, "a stalled step to end"); code != http.StatusUnprocessableEntity {
			t.Errorf("a stream cut short: %d, want 422", code)
		}
	}
	code, text := 0, ""
	waitfor.Until(t, 30*time.Second, "the refused step to be let in", func() bool {
		code, _, text = x.step(t, http.MethodPost, "begin", ticket, "alice", nil, nil)
		return code != http.StatusTooManyRequests
	})
	if code != http.StatusOK {
		t.Fatalf("the refused step sent again: %d %q", code, text)
	}
	x.untouched(t, "after the cut streams")
}
