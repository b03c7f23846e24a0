package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The OpenID Connect provider of these tests is tests/oidcop, the example provider of zitadel/oidc (a module
// of its own, so that the server's module does not depend on it), built once per run.
var oidcProvider struct {
	once sync.Once
	bin  string
	err  error
}

func buildOIDCProvider(t *testing.T) string {
	t.Helper()
	oidcProvider.once.Do(func() {
		dir, err := os.MkdirTemp("", "e2b-mcp-oidcop-")
		if err != nil {
			oidcProvider.err = err
			return
		}
		oidcProvider.bin = filepath.Join(dir, "oidcop")
		cmd := exec.Command("go", "build", "-o", oidcProvider.bin, ".")
		cmd.Dir = "oidcop"
		if out, err := cmd.CombinedOutput(); err != nil {
			oidcProvider.err = err
			oidcProvider.bin = string(out)
		}
	})
	if oidcProvider.err != nil {
		t.Fatalf("building the OpenID Connect provider (tests/oidcop): %v\n%s", oidcProvider.err, oidcProvider.bin)
	}
	return oidcProvider.bin
}

// startOIDCProvider starts a provider whose access tokens name audience, with the public clients given as
// ID=REDIRECT_URI, and returns its issuer URL.
func (x *h) startOIDCProvider(audience string, clients ...string) string {
	x.t.Helper()
	bin := buildOIDCProvider(x.t.(*testing.T))
	ctx, cancel := context.WithCancel(context.Background())
	args := []string{"-listen", "127.0.0.1:0", "-audience", audience}
	for _, c := range clients {
		args = append(args, "-client", c)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stderr = x.capture("oidcop stderr")
	out, err := cmd.StdoutPipe()
	if err != nil {
		x.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		x.t.Fatal(err)
	}
	x.t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		lines <- line
	}()
	select {
	case line := <-lines:
		var ready struct{ Issuer string }
		if err := json.Unmarshal([]byte(line), &ready); err != nil || ready.Issuer == "" {
			x.t.Fatalf("oidcop did not start: %q", line)
		}
		return ready.Issuer
	case <-time.After(30 * time.Second):
		x.t.Fatal("oidcop did not start within 30s")
	}
	return ""
}

// runOAuthFlow signs user in through the provider with the TypeScript SDK's OAuth client and calls tools (only
// signs in, with mode "token-only"); it returns the flow's last line and the access token it got.
func (x *h) runOAuthFlow(node, mcpURL, clientID, redirect, user string, mode ...string) (map[string]any, string) {
	x.t.Helper()
	ctx, cancel := context.WithTimeout(x.t.Context(), 2*time.Minute)
	defer cancel()
	tokenFile := x.path("token-" + user)
	args := append([]string{filepath.Join("js", "oauth.mjs"), mcpURL, clientID, redirect, user, "verysecure", tokenFile}, mode...)
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Env = x.env()
	stdout, stderr := x.capture("oauth.mjs "+user+" stdout"), x.capture("oauth.mjs "+user+" stderr")
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Run(); err != nil {
		x.t.Fatalf("oauth.mjs %s: %v\nstdout:\n%s\nstderr:\n%s", user, err, stdout, stderr)
	}
	last, err := lastJSONLine(stdout.String())
	if err != nil || last["ok"] != true {
		x.t.Fatalf("oauth.mjs %s did not finish:\n%s\nstderr:\n%s", user, stdout, stderr)
	}
	token, err := os.ReadFile(tokenFile)
	if err != nil || len(token) == 0 {
		x.t.Fatalf("oauth.mjs %s wrote no token: %v", user, err)
	}
	if id := str(last, "sandbox_id"); id != "" {
		the.noteSandbox(id)
	}
	return last, string(token)
}

// A headless team server: members sign in through a real OpenID Connect provider with the TypeScript SDK's
// OAuth client (discovery, authorization code with PKCE), each acts with their own E2B key from the encrypted
// key store and sees only their own sandboxes; a real token meant for another server, or from another provider,
// is refused.
func TestOAuthSignInThroughOIDCProvider(t *testing.T) {
	t.Parallel()
	node := requireNode(t)
	x := newH(t)
	x.headless = true
	const clientID = "e2b-mcp-test"
	redirect := "http://127.0.0.1:" + strings.Split(freePort(t), ":")[1] + "/callback"
	port := freePort(t)
	public := "http://" + port
	issuer := x.startOIDCProvider(public+"/mcp", clientID+"="+redirect)

	mk, masterHex := x.masterKeyFile("master.key")
	x.noMasterKeyLeak(masterHex)
	keys := map[string]string{}
	for _, owner := range []string{"id1", "id2"} { // the provider's subjects of test-user@127.0.0.1 and test-user2
		keys[owner] = newAPIKey()
		the.noteKey(keys[owner])
		x.mustRun(strings.NewReader(keys[owner]+"\n"), "auth", "login", "--owner", owner, "--api-url", the.emu.URL(),
			"--master-key-file", mk, "--state-dir", x.path("state"))
	}
	oauthArgs := func(public, issuer string) []string {
		return x.serveArgs("operator", "team", "--transport", "http", "--master-key-file", mk,
			"--public-url", public, "--oauth-issuer", issuer, "--oauth-scope", "openid")
	}
	srv := x.startHTTPOn(port, oauthArgs(public, issuer)...)

	first, token1 := x.runOAuthFlow(node, public+"/mcp", clientID, redirect, "test-user@127.0.0.1")
	second, _ := x.runOAuthFlow(node, public+"/mcp", clientID, redirect, "test-user2")
	for owner, last := range map[string]map[string]any{"id1": first, "id2": second} {
		id := str(last, "sandbox_id")
		if sb, _ := the.emu.Sandbox(id); sb.Team != keys[owner] {
			t.Errorf("the sandbox of %s was not made with their own key", owner)
		}
		if ids, _ := last["sandboxes"].([]any); len(ids) != 1 || ids[0] != id {
			t.Errorf("%s lists %v, want only their own sandbox %s", owner, ids, id)
		}
	}
	if !srv.stderr.shows("OAuth access tokens of "+issuer, 30*time.Second) {
		t.Errorf("serve does not say it accepts the provider's tokens:\n%s", srv.stderr)
	}

	// The same real token, sent to a server at another URL (wrong audience), or to one that trusts another
	// provider (wrong issuer and signing key), is refused; a tampered copy is refused by the first server too.
	if code := postMCP(t, public, token1); code == http.StatusUnauthorized {
		t.Fatalf("the signed-in token itself: %d", code)
	}
	// The ID token the provider issued beside that access token carries this server's URL in its audience too
	// (the provider puts the requested audience in both) and is signed by the same keys, but it says who signed
	// in to the client, not what the client may do here: it is refused.
	idToken, err := os.ReadFile(x.path("token-test-user@127.0.0.1") + ".id")
	if err != nil || len(idToken) == 0 {
		t.Fatalf("the provider sent no ID token beside the access token: %v", err)
	}
	if code := postMCP(t, public, string(idToken)); code != http.StatusUnauthorized {
		t.Errorf("the provider's ID token as a bearer token: %d, want 401", code)
	}
	// This provider types its access tokens JWT, as most do; a server of the same URL that requires at+jwt
	// refuses them.
	strictPort := freePort(t)
	strict := x.startHTTPOn(strictPort, append(oauthArgs(public, issuer), "--oauth-require-at-jwt")...)
	if !strict.stderr.shows("OAuth access tokens typed at+jwt of "+issuer, 30*time.Second) {
		t.Errorf("serve --oauth-require-at-jwt does not say it accepts only at+jwt:\n%s", strict.stderr)
	}
	if code := postMCP(t, "http://"+strictPort, token1); code != http.StatusUnauthorized {
		t.Errorf("an access token typed JWT at a server that requires at+jwt: %d, want 401", code)
	}
	otherPort := freePort(t)
	x.startHTTPOn(otherPort, oauthArgs("http://"+otherPort, issuer)...)
	if code := postMCP(t, "http://"+otherPort, token1); code != http.StatusUnauthorized {
		t.Errorf("a token for %s at a server whose URL is http://%s: %d, want 401", public, otherPort, code)
	}
	otherIssuer := x.startOIDCProvider(public+"/mcp", clientID+"="+redirect)
	thirdPort := freePort(t)
	x.startHTTPOn(thirdPort, oauthArgs("http://"+thirdPort, otherIssuer)...)
	if code := postMCP(t, "http://"+thirdPort, token1); code != http.StatusUnauthorized {
		t.Errorf("a token of another provider: %d, want 401", code)
	}
	parts := strings.Split(token1, ".")
	if code := postMCP(t, public, parts[0]+"."+parts[1]+"."+strings.Repeat("A", len(parts[2]))); code != http.StatusUnauthorized {
		t.Errorf("a token with a forged signature: %d, want 401", code)
	}
}
