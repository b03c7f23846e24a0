package server

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/credentials"
	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/internal/browsertest"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
	"github.com/e2b-mcp/e2b-mcp/policy"
	"github.com/e2b-mcp/e2b-mcp/server/pages"
)

const (
	connectKey = "e2b_" + "c0ffee" + "0123456789abcdef0123456789abcdef01"
	refusedKey = "e2b_" + "dead" + "0123456789abcdef0123456789abcdef0123"
	urlPattern = `https?://127\.0\.0\.1:\d+/connect/[A-Za-z0-9_-]+`
)

var linkRE = regexp.MustCompile(urlPattern)

// connectFixture is a server whose keys come from an encrypted key store, as in production, with an emulator that
// accepts only connectKey (and tokenKey for bob); the connect page is served on 127.0.0.1 (stdio) or on the HTTP
// listener.
type connectFixture struct {
	srv     *Server
	emu     *e2btest.Server
	secrets credentials.SecretStore
}

func newConnectFixture(t *testing.T, mutate func(*Config)) *connectFixture {
	t.Helper()
	emu, err := e2btest.New(e2btest.Options{APIKeys: []string{connectKey}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(emu.Close)
	mk, _ := writeMasterKey(t)
	secrets, err := credentials.OpenFileStore(filepath.Join(t.TempDir(), "keys.json"), mk)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Owner: "alice", Session: "s1", StateDir: t.TempDir(),
		Secrets: secrets,
		Backend: emulatorAt(emu.URL()),
		Logger:  testLogger(t),
	}
	if mutate != nil {
		mutate(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return &connectFixture{srv: srv, emu: emu, secrets: secrets}
}

func writeMasterKey(t *testing.T) (string, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "master.key")
	key := strings.Repeat("5a", 32)
	if err := writeFile(path, key); err != nil {
		t.Fatal(err)
	}
	return path, key
}

// browser is a member's browser (cookies kept, redirects followed) that knows the connect page's form.
type browser struct {
	*browsertest.Browser
	t *testing.T
}

func newBrowser(t *testing.T) *browser {
	return &browser{Browser: browsertest.New(t), t: t}
}

// post submits the connect form at the page's origin (origin "" sends no Origin header).
func (b *browser) post(pageURL, origin string, form url.Values) (int, string) {
	b.t.Helper()
	u, _ := url.Parse(pageURL)
	return b.PostForm(u.Scheme+"://"+u.Host+pages.PathConnectSubmit, origin, form)
}

// connectAt opens link and submits key with the page's CSRF token; it returns the final page.
func (b *browser) connectAt(link, key string, extra url.Values) (int, string) {
	b.t.Helper()
	code, page := b.Get(link)
	csrf := browsertest.CSRF(page)
	if code != http.StatusOK || csrf == "" {
		b.t.Fatalf("GET %s: %d, no form:\n%s", link, code, page)
	}
	form := url.Values{"csrf": {csrf}, "key": {key}}
	for k, v := range extra {
		form[k] = v
	}
	u, _ := url.Parse(link)
	return b.post(link, u.Scheme+"://"+u.Host, form)
}

// urlElicitor answers URL-mode elicitations by connecting key in a browser, after the answer (as a member does).
type urlElicitor struct {
	t   *testing.T
	key string

	mu   sync.Mutex
	urls []string
	done chan struct{}
}

func (e *urlElicitor) Elicit(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	e.mu.Lock()
	e.urls = append(e.urls, req.Params.URL)
	e.mu.Unlock()
	if req.Params.Mode != mcp.ElicitationModeURL {
		return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionDecline}}, nil
	}
	go func() {
		defer close(e.done)
		time.Sleep(50 * time.Millisecond)
		if code, page := newBrowser(e.t).connectAt(req.Params.URL, e.key, nil); code != http.StatusOK || !strings.Contains(page, "Connected") {
			e.t.Errorf("connecting through the page: %d\n%s", code, page)
		}
	}()
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept}}, nil
}

func urlClient(t *testing.T, srv *Server, version string, e client.ElicitationHandler) *client.Client {
	t.Helper()
	c, err := client.NewInProcessClientWithOptions(srv.mcp, client.WithProtocolVersion(version), client.WithElicitationHandler(e))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var req mcp.InitializeRequest
	req.Params.ProtocolVersion = version
	req.Params.ClientInfo = mcp.Implementation{Name: "server-test", Version: "1"}
	req.Params.Capabilities.Elicitation = &mcp.ElicitationCapability{Form: &struct{}{}, URL: &struct{}{}}
	if _, err := c.Initialize(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	return c
}

// A call made before the member has a key completes once they connect it through the page the client opens
// (URL-mode elicitation), in both protocol eras; the key is verified with E2B and stored under the owner.
func TestConnectThroughURLElicitation(t *testing.T) {
	for _, version := range eras {
		t.Run(version, func(t *testing.T) {
			f := newConnectFixture(t, nil)
			e := &urlElicitor{t: t, key: connectKey, done: make(chan struct{})}
			c := urlClient(t, f.srv, version, e)
			id := createSandbox(t, c)
			waitfor.Recv(t, e.done, time.Minute, "the connect page's form to be sent")
			if sb, _ := f.emu.Sandbox(id); sb.Team != connectKey {
				t.Error("the waiting call did not run with the connected key")
			}
			if got, err := credentials.APIKey(f.secrets, "alice"); err != nil || got != connectKey {
				t.Errorf("stored key: %v", err)
			}
			if len(e.urls) != 1 || !linkRE.MatchString(e.urls[0]) {
				t.Errorf("elicited URLs %q", e.urls)
			}
			// The link was single-use.
			if code, _ := newBrowser(t).Get(e.urls[0]); code != http.StatusNotFound {
				t.Errorf("the used link answered %d, want 404", code)
			}
		})
	}
}

// A client that cannot open URLs gets the ConnectionRequired answer naming the page; after connecting, the
// same call succeeds.
func TestConnectionRequiredNamesThePage(t *testing.T) {
	f := newConnectFixture(t, nil)
	c := connect(t, f.srv, mcp.ProtocolVersion20260728, nil)
	msg := mustFail(t, c, "e2b_create_sandbox", map[string]any{})
	link := linkRE.FindString(msg)
	if !strings.HasPrefix(msg, "No E2B API key is connected for alice. Open http://127.0.0.1:") || link == "" {
		t.Fatalf("without a key: %q", msg)
	}
	if code, page := newBrowser(t).connectAt(link, connectKey, nil); code != http.StatusOK {
		t.Fatalf("connect: %d\n%s", code, page)
	}
	createSandbox(t, c)
}

// Every way to misuse the page is refused, leaves nothing stored, and no page ever shows the key.
func TestConnectPageRefusals(t *testing.T) {
	f := newConnectFixture(t, nil)
	link, _, err := f.srv.pages.connectLink("alice")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(link)
	origin := u.Scheme + "://" + u.Host
	b := newBrowser(t)
	code, page := b.Get(link)
	csrf := browsertest.CSRF(page)
	if code != http.StatusOK || csrf == "" || strings.Contains(page, "<script") {
		t.Fatalf("the form: %d\n%s", code, page)
	}
	good := url.Values{"csrf": {csrf}, "key": {connectKey}}
	with := func(k, v string) url.Values {
		form := url.Values{}
		for kk, vv := range good {
			form[kk] = vv
		}
		form.Set(k, v)
		return form
	}
	for _, tc := range []struct {
		name   string
		b      *browser
		origin string
		form   url.Values
		want   int
	}{
		{"another site's form", b, "https://evil.example", good, http.StatusForbidden},
		{"no cookie (another browser)", newBrowser(t), origin, good, http.StatusForbidden},
		{"wrong CSRF token", b, origin, with("csrf", "x"+csrf), http.StatusForbidden},
		{"no CSRF token", b, origin, with("csrf", ""), http.StatusForbidden},
		{"not a key", b, origin, with("key", "hunter2-not-a-key"), http.StatusBadRequest},
		{"a key E2B refuses", b, origin, with("key", refusedKey), http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, page := tc.b.post(link, tc.origin, tc.form)
			if code != tc.want {
				t.Errorf("%d, want %d\n%s", code, tc.want, page)
			}
			for _, secret := range []string{connectKey, refusedKey, "hunter2-not-a-key"} {
				if strings.Contains(page, secret) {
					t.Error("the page shows the submitted key")
				}
			}
			if _, err := credentials.APIKey(f.secrets, "alice"); err == nil {
				t.Fatal("a refused submission stored a key")
			}
		})
	}
	// A GET carrying the key in its URL is not a submission.
	if code, _ := b.Get(origin + pages.PathConnectSubmit + "?key=" + connectKey + "&csrf=" + csrf); code != http.StatusMethodNotAllowed {
		t.Errorf("GET submit: %d", code)
	}
	if code, page := b.post(link, origin, good); code != http.StatusOK || !strings.Contains(page, "ending in "+connectKey[len(connectKey)-4:]) {
		t.Fatalf("the good submission: %d\n%s", code, page)
	}
	// Spent: neither the link nor the form works again.
	if code, _ := b.post(link, origin, good); code != http.StatusForbidden {
		t.Errorf("second submission: %d, want 403", code)
	}
	if code, _ := newBrowser(t).Get(link); code != http.StatusNotFound {
		t.Errorf("second visit: %d, want 404", code)
	}
	if code, _ := newBrowser(t).Get(origin + pages.PathConnect + "made-up-link"); code != http.StatusNotFound {
		t.Errorf("an unknown link: %d, want 404", code)
	}
}

// Links expire.
func TestConnectLinkExpires(t *testing.T) {
	now := time.Now()
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	f := newConnectFixture(t, func(c *Config) { c.Now = clock })
	link, _, err := f.srv.pages.connectLink("alice")
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	now = now.Add(pages.ConnectLinkTTL + time.Second)
	mu.Unlock()
	if code, _ := newBrowser(t).Get(link); code != http.StatusNotFound {
		t.Errorf("an expired link: %d, want 404", code)
	}
}

// With bearer tokens (and no identity provider), the form asks for the member's token: a link leaked to
// another member is useless to them.
func TestConnectPageWithTokensAsksForTheToken(t *testing.T) {
	tokens, toks := tokensFor(t, "alice", "bob")
	f := newConnectFixture(t, func(c *Config) { c.TokensFile = tokens; c.Transport = TransportHTTP })
	base := serveHTTP(t, &fixture{srv: f.srv})
	c := streamableClient(t, base, toks["alice"], "", mcp.ProtocolVersion20260728)
	msg := mustFail(t, c, "e2b_create_sandbox", map[string]any{})
	link := regexp.MustCompile(`http://127\.0\.0\.1:\d+/connect/[A-Za-z0-9_-]+`).FindString(msg)
	if link == "" {
		t.Fatalf("no link in %q", msg)
	}
	b := newBrowser(t)
	if code, page := b.connectAt(link, connectKey, url.Values{"token": {toks["bob"]}}); code != http.StatusBadRequest || strings.Contains(page, toks["bob"]) {
		t.Errorf("bob's token on alice's link: %d\n%s", code, page)
	}
	if _, err := credentials.APIKey(f.secrets, "alice"); err == nil {
		t.Fatal("bob bound a key to alice")
	}
	if code, page := newBrowser(t).connectAt(link, connectKey, url.Values{"token": {toks["alice"]}}); code != http.StatusOK {
		t.Fatalf("alice's own token: %d\n%s", code, page)
	}
	createSandbox(t, c)
}

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o600) }

// A connect request's state never passes for an approval of the same call: the two are signed with different
// keys.
func TestConnectTicketIsNoApproval(t *testing.T) {
	f := newConnectFixture(t, nil)
	b := policy.BindingFor("alice", "s1", "e2b_manage_sandbox", map[string]any{"sandbox_id": "x", "action": "delete"})
	state, err := f.srv.pages.connectTickets.Issue(b)
	if err != nil {
		t.Fatal(err)
	}
	if f.srv.elicit.Redeem(state, b) == nil {
		t.Fatal("a connect request's state was accepted as an approval")
	}
	if f.srv.pages.connectTickets.Redeem(state, b) != nil {
		t.Fatal("the connect request's own state was refused")
	}
}
