package tests

import (
	"context"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

var connectLinkRE = regexp.MustCompile(`http://127\.0\.0\.1:\d+/connect/[A-Za-z0-9_-]+`)

// connectURLClient connects an mcp-go client over streamable HTTP with an OAuth access token, declaring
// URL-mode elicitation, which e opens.
func (x *h) connectURLClient(base, token, version string, e client.ElicitationHandler) *client.Client {
	x.t.Helper()
	tr, err := transport.NewStreamableHTTP(base+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
	if err != nil {
		x.t.Fatal(err)
	}
	c := client.NewClient(tr, client.WithProtocolVersion(version), client.WithElicitationHandler(e))
	x.t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(x.t.Context(), 30*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		x.t.Fatal(err)
	}
	req := initRequest(version)
	req.Params.Capabilities.Elicitation = &mcp.ElicitationCapability{Form: &struct{}{}, URL: &struct{}{}}
	if _, err := c.Initialize(ctx, req); err != nil {
		x.t.Fatalf("initialize: %v", err)
	}
	return c
}

// The clients of a team server at the identity provider: the members' MCP clients, and the connect page's sign-in.
const mcpClient, pageClient = "e2b-mcp-test", "e2b-mcp-connect"

// startTeamProvider starts the OpenID Connect provider of a team server at public (http://host:port), with both
// clients, and returns its issuer and the MCP clients' redirect URI.
func (x *h) startTeamProvider(public string) (issuer, redirect string) {
	x.t.Helper()
	redirect = "http://127.0.0.1:" + strings.Split(freePort(x.t), ":")[1] + "/callback"
	return x.startOIDCProvider(public+"/mcp", mcpClient+"="+redirect, pageClient+"="+public+"/connect/callback"), redirect
}

// openInBrowser is a client's URL-mode elicitation handler: it says yes at once (as a client does once the user
// agreed to open the page) and hands the URL to the member, who acts in a browser meanwhile.
type openInBrowser struct {
	member func(url string)

	mu   sync.Mutex
	urls []string
	wg   sync.WaitGroup
}

func (o *openInBrowser) Elicit(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	if req.Params.Mode != mcp.ElicitationModeURL {
		return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionDecline}}, nil
	}
	o.mu.Lock()
	o.urls = append(o.urls, req.Params.URL)
	o.mu.Unlock()
	o.wg.Go(func() { o.member(req.Params.URL) })
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept}}, nil
}

// A headless team server (no D-Bus, keys in the encrypted key store) whose two members sign in through a real
// OpenID Connect provider and connect their own E2B keys on the connect page, in headless Chromium: a call made
// before the member's key exists completes once they connect it (URL elicitation, both protocol eras' way of
// asking); a client that cannot open URLs gets an answer naming the page; another member who signs in on the
// link is turned away; each member's sandboxes are made with their own key and seen by them alone.
func TestConnectPageInChromium(t *testing.T) {
	t.Parallel()
	node := requireNode(t)
	x := newH(t)
	x.headless = true
	requireChromedriver(t)

	port := freePort(t)
	public := "http://" + port
	issuer, redirect := x.startTeamProvider(public)
	mk, masterHex := x.masterKeyFile("master.key")
	x.noMasterKeyLeak(masterHex)
	x.startHTTPOn(port, x.serveArgs("operator", "team", "--transport", "http", "--master-key-file", mk,
		"--public-url", public, "--oauth-issuer", issuer, "--oauth-client-id", pageClient, "--oauth-scope", "openid")...)

	_, token1 := x.runOAuthFlow(node, public+"/mcp", mcpClient, redirect, "test-user@127.0.0.1", "token-only")
	_, token2 := x.runOAuthFlow(node, public+"/mcp", mcpClient, redirect, "test-user2", "token-only")
	key1, key2 := newAPIKey(), newAPIKey()
	the.noteKey(key1)
	the.noteKey(key2)

	// Member 2's client cannot open URLs: the answer names the page.
	plain := x.connectHTTP(public, token2, "")
	msg := fails(t, plain, "e2b_create_sandbox", map[string]any{})
	link2 := connectLinkRE.FindString(msg)
	if link2 == "" || !strings.HasPrefix(link2, public+"/connect/") || !strings.Contains(msg, "No E2B API key is connected for id2") {
		t.Fatalf("without a key and without URL elicitation: %q", msg)
	}

	// Member 1's client opens the page. Member 2 gets hold of the link first and signs in on it: turned away.
	// Then member 1 signs in and connects their key; the waiting call completes.
	opener := &openInBrowser{member: func(link string) {
		intruder := x.startChromium()
		intruder.open(link)
		intruder.signIn("test-user2")
		if p := intruder.waitFor("</h1>"); !strings.Contains(p, "This link is not yours") {
			t.Errorf("member 2 on member 1's link:\n%s", p)
		}
		owner := x.startChromium()
		owner.open(link)
		owner.signIn("test-user@127.0.0.1")
		if p := owner.connectKey(key1); !strings.Contains(p, "Connected") || !strings.Contains(p, "ending in "+key1[len(key1)-4:]) {
			t.Errorf("member 1 connecting:\n%s", p)
		}
	}}
	c1 := x.connectURLClient(public, token1, mcp.ProtocolVersion20251125, opener)
	id1 := create(t, c1, map[string]any{"title": "member 1"})
	waitfor.Return(t, time.Minute, "the browser to finish with the connect page", opener.wg.Wait)
	if sb, _ := the.emu.Sandbox(id1); sb.Team != key1 {
		t.Errorf("member 1's waiting call did not run with their own key")
	}
	if len(opener.urls) != 1 || !strings.HasPrefix(opener.urls[0], public+"/connect/") {
		t.Errorf("elicited URLs: %q", opener.urls)
	}
	if ids := sandboxIDs(t, c1); len(ids) != 1 || ids[0] != id1 {
		t.Errorf("member 1 lists %v", ids)
	}

	// Member 2 connects through the link they were given, and their call now goes through, with their key.
	b := x.startChromium()
	b.open(link2)
	b.signIn("test-user2")
	if p := b.connectKey(key2); !strings.Contains(p, "Connected") {
		t.Fatalf("member 2 connecting:\n%s", p)
	}
	id2 := create(t, plain, map[string]any{"title": "member 2"})
	if sb, _ := the.emu.Sandbox(id2); sb.Team != key2 {
		t.Error("member 2's sandbox was not made with their own key")
	}
	if ids := sandboxIDs(t, plain); len(ids) != 1 || ids[0] != id2 {
		t.Errorf("member 2 lists %v, want only %s", ids, id2)
	}
	// The used link is spent.
	b.open(link2)
	if p := b.waitFor("</h1>"); !strings.Contains(p, "cannot be used") {
		t.Errorf("a used link:\n%s", p)
	}
}

// A stdio server offers the connect page on 127.0.0.1: the answer of a call without a key names a one-time
// link there, the local user connects their key in a browser, and the same call then goes through.
func TestStdioConnectPageInChromium(t *testing.T) {
	t.Parallel()
	x := newH(t)
	x.headless = true
	requireChromedriver(t)
	owner := x.owner("local")
	mk, masterHex := x.masterKeyFile("master.key")
	x.noMasterKeyLeak(masterHex)
	s := x.startStdio(clientOpts{}, x.serveArgs(owner, "local", "--master-key-file", mk)...)
	msg := fails(t, s.Client, "e2b_create_sandbox", map[string]any{})
	link := connectLinkRE.FindString(msg)
	if link == "" || !strings.Contains(msg, "or run `e2b-mcp auth login` in a terminal") {
		t.Fatalf("without a key over stdio: %q", msg)
	}
	key := newAPIKey()
	the.noteKey(key)
	b := x.startChromium()
	b.open(link)
	if p := b.connectKey(key); !strings.Contains(p, "Connected") {
		t.Fatalf("connecting on the local page:\n%s", p)
	}
	id := create(t, s.Client, map[string]any{"title": "local"})
	if sb, _ := the.emu.Sandbox(id); sb.Team != key {
		t.Error("the sandbox was not made with the key connected on the local page")
	}
	b.open(link)
	if p := b.waitFor("</h1>"); !strings.Contains(p, "cannot be used") {
		t.Errorf("the used link:\n%s", p)
	}
}
