package server

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/credentials"
	"github.com/e2b-mcp/e2b-mcp/internal/browsertest"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
	"github.com/e2b-mcp/e2b-mcp/server/pages"
)

// hammer GETs link n times as a script does: no cookies kept, so that every request asks for a new session.
func hammer(t *testing.T, link string, n int) {
	t.Helper()
	c := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	const workers = 4
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				resp, err := c.Get(link)
				if err != nil {
					t.Error(err)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mu.Lock()
				codes[resp.StatusCode]++
				mu.Unlock()
			}
		})
	}
	waitfor.Return(t, 2*time.Minute, "the GETs of one link", wg.Wait)
	t.Logf("%d GETs of one link: %v", n, codes)
}

// A script hammering one leaked link holds no more than a few sessions of it: another member's new link opens,
// and so does the hammered link in its owner's browser.
func TestConnectLinkHammeredLeavesOtherLinksWorking(t *testing.T) {
	f := newConnectFixture(t, nil)
	link, _, err := f.srv.pages.connectLink("alice")
	if err != nil {
		t.Fatal(err)
	}
	hammer(t, link, pages.ConnectLimits.Links)
	bobs, _, err := f.srv.pages.connectLink("bob")
	if err != nil {
		t.Fatalf("bob's link after alice's was hammered: %v", err)
	}
	if code, page := newBrowser(t).Get(bobs); code != http.StatusOK || browsertest.CSRF(page) == "" {
		t.Fatalf("bob's new link after alice's was hammered: %d\n%s", code, page)
	}
	if code, page := newBrowser(t).connectAt(link, connectKey, nil); code != http.StatusOK || !strings.Contains(page, "Connected") {
		t.Fatalf("alice's hammered link in her browser: %d\n%s", code, page)
	}
}

// A member without a key who loops tool calls gets the same live link each time, not a new one per call: their
// calls cannot fill the store for the other members.
func TestRepeatedCallsGetTheOwnersLiveLink(t *testing.T) {
	f := newConnectFixture(t, nil)
	c := connect(t, f.srv, mcp.ProtocolVersion20260728, nil)
	first := linkRE.FindString(mustFail(t, c, "e2b_create_sandbox", map[string]any{}))
	second := linkRE.FindString(mustFail(t, c, "e2b_create_sandbox", map[string]any{}))
	if first == "" || first != second {
		t.Fatalf("two calls without a key named %q and %q, want one live link", first, second)
	}
	for range pages.ConnectLimits.Links {
		if _, _, err := f.srv.pages.connectLink("alice"); err != nil {
			t.Fatal(err)
		}
	}
	bobs, _, err := f.srv.pages.connectLink("bob")
	if err != nil {
		t.Fatalf("bob's link after alice's calls: %v", err)
	}
	if code, _ := newBrowser(t).Get(bobs); code != http.StatusOK {
		t.Fatalf("bob's link after alice's calls: %d", code)
	}
}

// A browser that opens its link again keeps its session (the same form, the same CSRF token); another browser
// opening the same link gets a session of its own, which does not stand for the first one's.
func TestConnectLinkReopenedKeepsTheBrowsersSession(t *testing.T) {
	f := newConnectFixture(t, nil)
	link, _, err := f.srv.pages.connectLink("alice")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(link)
	origin := u.Scheme + "://" + u.Host
	csrfOf := func(b *browser) string {
		t.Helper()
		code, page := b.Get(link)
		csrf := browsertest.CSRF(page)
		if code != http.StatusOK || csrf == "" {
			t.Fatalf("GET %s: %d\n%s", link, code, page)
		}
		return csrf
	}
	first := newBrowser(t)
	csrf := csrfOf(first)
	if again := csrfOf(first); again != csrf {
		t.Error("the browser that opened the link again got another session")
	}
	second := newBrowser(t)
	if other := csrfOf(second); other == csrf {
		t.Fatal("a second browser got the first one's session")
	}
	if code, _ := second.post(link, origin, url.Values{"csrf": {csrf}, "key": {connectKey}}); code != http.StatusForbidden {
		t.Errorf("the second browser posting the first one's CSRF token: %d, want 403", code)
	}
	if code, page := first.post(link, origin, url.Values{"csrf": {csrf}, "key": {connectKey}}); code != http.StatusOK {
		t.Fatalf("the first browser's form after a second browser opened the link: %d\n%s", code, page)
	}
}

// The live link is given again while it has at least pages.MinLinkLife to live, and each answer says how long it
// still works; then a new one. A link that was used is never given again.
func TestLiveLinkLifetime(t *testing.T) {
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	f := newConnectFixture(t, func(c *Config) { c.Now = clock })
	c := connect(t, f.srv, mcp.ProtocolVersion20260728, nil)
	call := func(wantMinutes string) string {
		t.Helper()
		msg := mustFail(t, c, "e2b_create_sandbox", map[string]any{})
		if !strings.Contains(msg, "(the link works once, for "+wantMinutes+")") {
			t.Errorf("want %s in %q", wantMinutes, msg)
		}
		return linkRE.FindString(msg)
	}
	first := call("15 minutes")
	advance(pages.ConnectLinkTTL - pages.MinLinkLife)
	if again := call("8 minutes"); again != first {
		t.Errorf("with %s left, a new link %q instead of %q", pages.MinLinkLife, again, first)
	}
	advance(time.Minute)
	second := call("15 minutes")
	if second == first {
		t.Fatal("a link with less than MinLinkLife left was given again")
	}
	if code, _ := newBrowser(t).Get(first); code != http.StatusOK {
		t.Errorf("the older link, still live: %d", code)
	}
	if code, page := newBrowser(t).connectAt(second, connectKey, nil); code != http.StatusOK {
		t.Fatalf("connect: %d\n%s", code, page)
	}
	if err := credentials.DeleteAPIKey(f.secrets, "alice"); err != nil {
		t.Fatal(err)
	}
	if third := call("15 minutes"); third == second || third == first {
		t.Errorf("after the key was removed, a used or older link %q", third)
	}
}
