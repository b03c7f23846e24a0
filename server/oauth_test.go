package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/credentials"
	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/server/oauth"
	"github.com/e2b-mcp/e2b-mcp/server/oauth/oauthtest"
)

// The checks of an access token are server/oauth's, tested there; these test that the server asks them of every
// HTTP request, answers a refusal with 401 and the challenge, and acts for the owner a token names.

func oauthFixture(t *testing.T, iss *oauthtest.Issuer, ownerClaim, tokensFile string, edit ...func(*oauth.Config)) string {
	t.Helper()
	f := newFixture(t, fixtureOpts{tokensFile: tokensFile, transport: TransportHTTP, mutate: func(c *Config, _ *e2btest.Server) {
		c.OAuth = &oauth.Config{Issuer: iss.URL, Resource: oauthtest.Resource, OwnerClaim: ownerClaim, Scopes: []string{"openid"}}
		for _, e := range edit {
			e(c.OAuth)
		}
	}})
	return serveHTTP(t, f)
}

func TestOAuthMetadataAndChallenge(t *testing.T) {
	iss := oauthtest.NewIssuer(t)
	base := oauthFixture(t, iss, "", "")

	for _, path := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"} {
		code, _, body := do(t, http.MethodGet, base+path, "", "", nil)
		var meta map[string]any
		if err := json.Unmarshal([]byte(body), &meta); code != http.StatusOK || err != nil {
			t.Fatalf("%s: %d %s", path, code, body)
		}
		if meta["resource"] != oauthtest.Resource {
			t.Errorf("%s: resource = %v", path, meta["resource"])
		}
		if as, _ := meta["authorization_servers"].([]any); len(as) != 1 || as[0] != iss.URL {
			t.Errorf("%s: authorization_servers = %v", path, meta["authorization_servers"])
		}
	}

	code, hdr, _ := do(t, http.MethodPost, base+PathMCP, "", toolsList, nil)
	want := `Bearer resource_metadata="https://mcp.example.test/.well-known/oauth-protected-resource/mcp", scope="openid"`
	if code != http.StatusUnauthorized || hdr.Get("WWW-Authenticate") != want {
		t.Errorf("without a token: %d, WWW-Authenticate %q; want 401 and %q", code, hdr.Get("WWW-Authenticate"), want)
	}
	code, hdr, _ = do(t, http.MethodPost, base+PathMCP, "Bearer "+iss.Token(t, iss.Claims("alice", func(c map[string]any) { c["aud"] = "elsewhere" }), nil), toolsList, nil)
	if code != http.StatusUnauthorized || !strings.Contains(hdr.Get("WWW-Authenticate"), `error="invalid_token"`) {
		t.Errorf("with a refused token: %d, WWW-Authenticate %q", code, hdr.Get("WWW-Authenticate"))
	}
}

// A refused token gets 401 whatever the reason; a valid token acts for its owner alone, and with
// RequireAccessTokenType a token typed JWT is refused.
func TestOAuthTokenChecks(t *testing.T) {
	iss := oauthtest.NewIssuer(t)
	base := oauthFixture(t, iss, "", "")
	strict := oauthFixture(t, iss, "", "", func(c *oauth.Config) { c.RequireAccessTokenType = true })
	for name, tc := range map[string]struct {
		base, token string
	}{
		"expired": {base, iss.Token(t, iss.Claims("alice", func(c map[string]any) {
			c["exp"] = time.Now().Add(-time.Minute).Unix()
		}), nil)},
		"signed by another key":    {base, iss.Token(t, iss.Claims("alice", nil), oauthtest.NewKey(t))},
		"not a JWT":                {base, "e2bmcp_not-a-jwt"},
		"typed JWT, at+jwt wanted": {strict, iss.Typed(t, "JWT", iss.Claims("alice", nil), iss.Key)},
		"an ID token, typed JWT":   {base, iss.Typed(t, "JWT", iss.Claims("alice", func(c map[string]any) { c["nonce"] = "n" }), iss.Key)},
	} {
		if code, _, _ := do(t, http.MethodPost, tc.base+PathMCP, "Bearer "+tc.token, toolsList, nil); code != http.StatusUnauthorized {
			t.Errorf("%s: %d, want 401", name, code)
		}
	}
	if code, _, _ := do(t, http.MethodPost, base+PathMCP, "Bearer "+iss.Typed(t, "JWT", iss.Claims("alice", nil), iss.Key), toolsList, nil); code == http.StatusUnauthorized {
		t.Errorf("a token typed JWT without RequireAccessTokenType: %d, want it let in", code)
	}

	c := streamableClient(t, base, iss.Token(t, iss.Claims("carol", nil), nil), "", mcp.ProtocolVersion20260728)
	id := createSandbox(t, c)
	d := streamableClient(t, base, iss.Token(t, iss.Claims("dave", nil), nil), "", mcp.ProtocolVersion20260728)
	if ids := listIDs(t, d); len(ids) != 0 {
		t.Errorf("another owner's token lists %v", ids)
	}
	msg := mustFail(t, d, "e2b_exec", map[string]any{"sandbox_id": id, "command": "true"})
	if !strings.Contains(msg, "not found") {
		t.Errorf("another owner's sandbox: %q", msg)
	}
}

// With the email owner claim, the verified address names the owner; an unverified one gets 401.
func TestOAuthOwnerClaim(t *testing.T) {
	iss := oauthtest.NewIssuer(t)
	base := oauthFixture(t, iss, "email", "")
	unverified := iss.Token(t, iss.Claims("erin", func(c map[string]any) { c["email_verified"] = false }), nil)
	if code, _, _ := do(t, http.MethodPost, base+PathMCP, "Bearer "+unverified, toolsList, nil); code != http.StatusUnauthorized {
		t.Errorf("an unverified email: %d, want 401", code)
	}
	c := streamableClient(t, base, iss.Token(t, iss.Claims("erin", nil), nil), "", mcp.ProtocolVersion20260728)
	createSandbox(t, c)
}

// Tokens-file owners and OAuth owners cannot name each other, so a server whose tokens file holds a name an
// access token could carry does not start: with any owner claim but email the identity provider may give any
// name, a tokens-file owner's too; with email, every address.
func TestOAuthRefusesTokensFileOwnersItCouldName(t *testing.T) {
	iss := oauthtest.NewIssuer(t)
	carol, _ := tokensFor(t, "carol")
	dora, _ := tokensFor(t, "dora@example.test")
	for _, tc := range []struct{ claim, tokens, want string }{
		{"", carol, "--oauth-owner-claim email"},
		{"sub", carol, "--oauth-owner-claim email"},
		{"preferred_username", carol, "--oauth-owner-claim email"},
		{"upn", carol, "--oauth-owner-claim email"},
		{"email", dora, `"dora@example.test" has the form of an email address`},
	} {
		_, err := New(Config{Owner: "alice", Session: "s1", StateDir: t.TempDir(), Transport: TransportHTTP,
			TokensFile: tc.tokens, Backend: emulatorAt("http://127.0.0.1:1"), Secrets: newTestSecrets(), Logger: testLogger(t),
			OAuth: &oauth.Config{Issuer: iss.URL, Resource: oauthtest.Resource, OwnerClaim: tc.claim}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("owner claim %q beside %s: %v, want a refusal saying %s", tc.claim, tc.tokens, err, tc.want)
		}
	}
}

// With the email owner claim every OAuth owner is a verified address, so the tokens file beside it holds owners
// that are not (a script's or a service's name) and each kind of token names its own owner: an identity provider
// account whose email claim is a tokens-file owner's name gets nothing, and a tokens file that comes to name an
// address is unusable until fixed.
func TestOAuthEmailOwnersApartFromTokensFile(t *testing.T) {
	iss := oauthtest.NewIssuer(t)
	tokens, toks := tokensFor(t, "carol")
	base := oauthFixture(t, iss, "email", tokens)
	carol := streamableClient(t, base, toks["carol"], "", mcp.ProtocolVersion20260728)
	id := createSandbox(t, carol)

	posing := iss.Token(t, iss.Claims("x", func(c map[string]any) { c["email"] = "carol" }), nil)
	if code, _, _ := do(t, http.MethodPost, base+PathMCP, "Bearer "+posing, toolsList, nil); code != http.StatusUnauthorized {
		t.Errorf("an account whose email claim is carol: %d, want 401", code)
	}
	member := streamableClient(t, base, iss.Token(t, iss.Claims("carol", nil), nil), "", mcp.ProtocolVersion20260728)
	if ids := listIDs(t, member); len(ids) != 0 {
		t.Errorf("carol@example.test through OAuth lists %v, want none of the tokens file's carol", ids)
	}
	if msg := mustFail(t, member, "e2b_exec", map[string]any{"sandbox_id": id, "command": "true"}); !strings.Contains(msg, "not found") {
		t.Errorf("the tokens file's carol's sandbox through OAuth: %q", msg)
	}

	var address string
	if err := credentials.UpdateTokenFile(tokens, func(es []credentials.TokenEntry) ([]credentials.TokenEntry, error) {
		tok, e, err := credentials.NewTokenEntry("carol@example.test", time.Now())
		address = tok
		return append(es, e), err
	}); err != nil {
		t.Fatal(err)
	}
	for name, tok := range map[string]string{"the address's token": address, "carol's token": toks["carol"]} {
		if code, _, _ := do(t, http.MethodPost, base+PathMCP, "Bearer "+tok, toolsList, nil); code != http.StatusUnauthorized {
			t.Errorf("%s once the tokens file names an address: %d, want 401", name, code)
		}
	}
	if ids := listIDs(t, member); len(ids) != 0 {
		t.Errorf("OAuth after the change lists %v", ids)
	}
}

// With --client-address-header the budget is kept per address the trusted proxy names, not per the proxy's own.
func TestRefusalBudgetPerForwardedAddress(t *testing.T) {
	tokens, _ := tokensFor(t, "frank")
	base := serveHTTP(t, newFixture(t, fixtureOpts{tokensFile: tokens, transport: TransportHTTP,
		mutate: func(c *Config, _ *e2btest.Server) { c.ClientAddressHeader = "X-Forwarded-For" }}))
	refuse := func(forwarded string) http.Header {
		t.Helper()
		code, hdr, _ := do(t, http.MethodPost, base+PathMCP, "Bearer e2bmcp_wrong-token", toolsList, map[string]string{"X-Forwarded-For": forwarded})
		if code != http.StatusUnauthorized {
			t.Fatalf("a wrong token from %s: %d, want 401", forwarded, code)
		}
		return hdr
	}
	for i := 0; refuse("198.51.100.9, 203.0.113.7").Get("Retry-After") == ""; i++ {
		if i == 1000 {
			t.Fatal("1,000 wrong tokens from one address, and it was never told to wait")
		}
	}
	if refuse("203.0.113.7").Get("Retry-After") == "" {
		t.Error("the address past its budget was not told to wait")
	}
	// The client's own part of the header is not believed: only the entry the proxy added counts.
	if refuse("203.0.113.7, 203.0.113.8").Get("Retry-After") != "" {
		t.Error("another address behind the same proxy was told to wait for the first one's refusals")
	}
}
