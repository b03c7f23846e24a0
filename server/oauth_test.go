package server

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/credentials"
	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
)

// The tests of this file mint their own tokens, to reach every refusal; tests/oauth_test.go signs in through a
// real OpenID Connect provider.

const testResource = "https://mcp.example.test/mcp"

// testIssuer is an authorization server's discovery document and key set, served on loopback.
type testIssuer struct {
	url string
	key *rsa.PrivateKey
	kid string

	fetches  atomic.Int64 // requests for the key set
	mu       sync.Mutex
	extra    []jose.JSONWebKey // published beside key (a rotation's next key)
	keysDown bool              // the key set answers 500
}

// publish adds key to the key set under kid, as a provider rotating its keys does.
func (iss *testIssuer) publish(kid string, key *rsa.PrivateKey) {
	iss.mu.Lock()
	defer iss.mu.Unlock()
	iss.extra = append(iss.extra, jose.JSONWebKey{Key: &key.PublicKey, KeyID: kid, Algorithm: "RS256", Use: "sig"})
}

func (iss *testIssuer) setKeysDown(down bool) {
	iss.mu.Lock()
	defer iss.mu.Unlock()
	iss.keysDown = down
}

func newTestIssuer(t testing.TB) *testIssuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	iss := &testIssuer{key: key, kid: "k1"}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": iss.url, "jwks_uri": iss.url + "/keys", "authorization_endpoint": iss.url + "/auth",
			"token_endpoint": iss.url + "/token", "id_token_signing_alg_values_supported": []string{"RS256"},
		})
	})
	mux.HandleFunc("/keys", func(w http.ResponseWriter, _ *http.Request) {
		iss.fetches.Add(1)
		iss.mu.Lock()
		down := iss.keysDown
		keys := append([]jose.JSONWebKey{{Key: &key.PublicKey, KeyID: iss.kid, Algorithm: "RS256", Use: "sig"}}, iss.extra...)
		iss.mu.Unlock()
		if down {
			http.Error(w, "unavailable", http.StatusInternalServerError)
			return
		}
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: keys})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	iss.url = srv.URL
	return iss
}

// token signs claims as an access token (header typ at+jwt, RFC 9068) with key (the issuer's own unless another
// is given).
func (iss *testIssuer) token(t testing.TB, claims map[string]any, key *rsa.PrivateKey) string {
	t.Helper()
	if key == nil {
		key = iss.key
	}
	return iss.typed(t, "at+jwt", claims, key)
}

// typed signs claims with key under the header typ (none when typ is "").
func (iss *testIssuer) typed(t testing.TB, typ string, claims map[string]any, key *rsa.PrivateKey) string {
	t.Helper()
	return iss.signed(t, typ, iss.kid, claims, key)
}

// signed signs claims with key under the header typ (none when typ is "") and kid.
func (iss *testIssuer) signed(t testing.TB, typ, kid string, claims map[string]any, key *rsa.PrivateKey) string {
	t.Helper()
	opts := &jose.SignerOptions{}
	if typ != "" {
		opts = opts.WithType(jose.ContentType(typ))
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: key, KeyID: kid}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// claims are a valid access token's claims for owner, changed by edit.
func (iss *testIssuer) claims(owner string, edit func(map[string]any)) map[string]any {
	now := time.Now()
	c := map[string]any{
		"iss": iss.url, "sub": owner, "aud": []string{"some-client", testResource},
		"iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(),
		"email": owner + "@example.test", "email_verified": true,
	}
	if edit != nil {
		edit(c)
	}
	return c
}

func oauthFixture(t *testing.T, iss *testIssuer, ownerClaim, tokensFile string, edit ...func(*OAuthConfig)) string {
	t.Helper()
	f := newFixture(t, fixtureOpts{tokensFile: tokensFile, transport: TransportHTTP, mutate: func(c *Config, _ *e2btest.Server) {
		c.OAuth = &OAuthConfig{Issuer: iss.url, Resource: testResource, OwnerClaim: ownerClaim, Scopes: []string{"openid"}}
		for _, e := range edit {
			e(c.OAuth)
		}
	}})
	return serveHTTP(t, f)
}

func TestOAuthMetadataAndChallenge(t *testing.T) {
	iss := newTestIssuer(t)
	base := oauthFixture(t, iss, "", "")

	for _, path := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"} {
		code, _, body := do(t, http.MethodGet, base+path, "", "", nil)
		var meta map[string]any
		if err := json.Unmarshal([]byte(body), &meta); code != http.StatusOK || err != nil {
			t.Fatalf("%s: %d %s", path, code, body)
		}
		if meta["resource"] != testResource {
			t.Errorf("%s: resource = %v", path, meta["resource"])
		}
		if as, _ := meta["authorization_servers"].([]any); len(as) != 1 || as[0] != iss.url {
			t.Errorf("%s: authorization_servers = %v", path, meta["authorization_servers"])
		}
	}

	code, hdr, _ := do(t, http.MethodPost, base+PathMCP, "", toolsList, nil)
	want := `Bearer resource_metadata="https://mcp.example.test/.well-known/oauth-protected-resource/mcp", scope="openid"`
	if code != http.StatusUnauthorized || hdr.Get("WWW-Authenticate") != want {
		t.Errorf("without a token: %d, WWW-Authenticate %q; want 401 and %q", code, hdr.Get("WWW-Authenticate"), want)
	}
	code, hdr, _ = do(t, http.MethodPost, base+PathMCP, "Bearer "+iss.token(t, iss.claims("alice", func(c map[string]any) { c["aud"] = "elsewhere" }), nil), toolsList, nil)
	if code != http.StatusUnauthorized || !strings.Contains(hdr.Get("WWW-Authenticate"), `error="invalid_token"`) {
		t.Errorf("with a refused token: %d, WWW-Authenticate %q", code, hdr.Get("WWW-Authenticate"))
	}
}

// Every way a token can be wrong gets 401; only a token of the issuer, for this resource, unexpired, with an
// owner claim that names an owner, is let through.
func TestOAuthTokenChecks(t *testing.T) {
	iss := newTestIssuer(t)
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	base := oauthFixture(t, iss, "", "")
	edit := func(k string, v any) func(map[string]any) { return func(c map[string]any) { c[k] = v } }
	for _, tc := range []struct {
		name  string
		token string
	}{
		{"wrong audience", iss.token(t, iss.claims("alice", edit("aud", "https://other.example.test/mcp")), nil)},
		{"audience of the resource's prefix", iss.token(t, iss.claims("alice", edit("aud", "https://mcp.example.test")), nil)},
		{"no audience", iss.token(t, iss.claims("alice", func(c map[string]any) { delete(c, "aud") }), nil)},
		{"wrong issuer", iss.token(t, iss.claims("alice", edit("iss", "https://evil.example.test")), nil)},
		{"expired", iss.token(t, iss.claims("alice", edit("exp", time.Now().Add(-time.Minute).Unix())), nil)},
		{"signed by another key", iss.token(t, iss.claims("alice", nil), other)},
		{"unsigned", unsigned(iss.claims("alice", nil))},
		{"tampered", tamper(iss.token(t, iss.claims("alice", nil), nil))},
		{"no owner claim", iss.token(t, iss.claims("alice", func(c map[string]any) { delete(c, "sub") }), nil)},
		{"owner with a control character", iss.token(t, iss.claims("al\nice", nil), nil)},
		{"reserved owner name", iss.token(t, iss.claims("state-data-key", nil), nil)},
		{"not a JWT", "e2bmcp_not-a-jwt"},
		{"JWS JSON serialization", jsonSerialized(t, iss, iss.claims("alice", nil))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, _ := do(t, http.MethodPost, base+PathMCP, "Bearer "+tc.token, toolsList, nil)
			if code != http.StatusUnauthorized {
				t.Errorf("%d, want 401", code)
			}
		})
	}

	c := streamableClient(t, base, iss.token(t, iss.claims("carol", nil), nil), "", mcp.ProtocolVersion20260728)
	id := createSandbox(t, c)
	d := streamableClient(t, base, iss.token(t, iss.claims("dave", nil), nil), "", mcp.ProtocolVersion20260728)
	if ids := listIDs(t, d); len(ids) != 0 {
		t.Errorf("another owner's token lists %v", ids)
	}
	msg := mustFail(t, d, "e2b_exec", map[string]any{"sandbox_id": id, "command": "true"})
	if !strings.Contains(msg, "not found") {
		t.Errorf("another owner's sandbox: %q", msg)
	}
}

// jsonSerialized signs claims with the issuer's key as a valid access token would be, but in the JWS JSON
// serialization, which a JWT never uses (RFC 7519, section 1): a token must be compact.
func jsonSerialized(t testing.TB, iss *testIssuer, claims map[string]any) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: iss.key, KeyID: iss.kid}},
		(&jose.SignerOptions{}).WithType("at+jwt"))
	if err != nil {
		t.Fatal(err)
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	return jws.FullSerialize()
}

func unsigned(claims map[string]any) string {
	b, _ := json.Marshal(claims)
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + enc(b) + "."
}

// tamper changes the payload of a signed token, keeping its signature.
func tamper(tok string) string {
	parts := strings.Split(tok, ".")
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	payload = []byte(strings.Replace(string(payload), `"sub":"alice"`, `"sub":"admin"`, 1))
	parts[1] = base64.RawURLEncoding.EncodeToString(payload)
	return strings.Join(parts, ".")
}

// Only access tokens are let in. An ID token of the same provider (it says who signed in to some client, and
// providers that add requested audiences put this server's URL in it too), a logout token or any other JWT the
// provider signs is refused, whatever its audience: by its header typ when the provider sets one, else by the
// claims only ID tokens carry. Tokens the provider marks as access tokens, and the plain "JWT" tokens most
// providers issue, still pass; with RequireAccessTokenType only at+jwt does.
func TestOAuthTokenType(t *testing.T) {
	iss := newTestIssuer(t)
	base := oauthFixture(t, iss, "", "")
	strict := oauthFixture(t, iss, "", "", func(c *OAuthConfig) { c.RequireAccessTokenType = true })
	with := func(extra map[string]any) map[string]any {
		return iss.claims("alice", func(c map[string]any) {
			for k, v := range extra {
				c[k] = v
			}
		})
	}
	idClaims := map[string]any{"nonce": "n-0S6_WzA2Mj", "at_hash": "77QmUPtjPfzWtF2AnpK9RQ", "azp": "some-client", "auth_time": time.Now().Unix()}
	accessClaims := map[string]any{"client_id": "some-client", "jti": "a1", "scope": "openid"}
	for _, tc := range []struct {
		name, typ       string
		claims          map[string]any
		plain, strictOK bool // let in by the server, and by a server that requires at+jwt
	}{
		{"ID token, typ JWT", "JWT", with(idClaims), false, false},
		{"ID token without typ", "", with(idClaims), false, false},
		{"ID token with only a nonce", "JWT", with(map[string]any{"nonce": "n"}), false, false},
		{"ID token with only at_hash", "JWT", with(map[string]any{"at_hash": "h"}), false, false},
		{"hybrid-flow ID token (c_hash)", "JWT", with(map[string]any{"c_hash": "h"}), false, false},
		{"FAPI ID token (s_hash)", "", with(map[string]any{"s_hash": "h"}), false, false},
		{"Keycloak ID token (typ claim ID)", "JWT", with(map[string]any{"typ": "ID", "azp": "some-client"}), false, false},
		{"Keycloak refresh token (typ claim Refresh)", "JWT", with(map[string]any{"typ": "Refresh"}), false, false},
		{"logout token", "logout+jwt", with(map[string]any{"events": map[string]any{"http://schemas.openid.net/event/backchannel-logout": map[string]any{}}}), false, false},
		{"security event token without typ", "", with(map[string]any{"events": map[string]any{"x": map[string]any{}}}), false, false},
		{"ID token typed as such", "id_token+jwt", with(nil), false, false},
		{"DPoP proof", "dpop+jwt", with(nil), false, false},
		{"JOSE", "JOSE", with(nil), false, false},
		{"empty typ", " ", with(nil), false, false},

		{"access token, typ at+jwt", "at+jwt", with(accessClaims), true, true},
		{"access token, typ application/at+jwt", "application/at+jwt", with(accessClaims), true, true},
		{"access token, typ AT+JWT", "AT+JWT", with(accessClaims), true, true},
		{"at+jwt carrying a nonce (the provider says what it is)", "at+jwt", with(map[string]any{"nonce": "n"}), true, true},
		{"access token, typ JWT (zitadel, Auth0, Entra)", "JWT", with(accessClaims), true, false},
		{"access token, typ application/jwt", "application/jwt", with(accessClaims), true, false},
		{"access token without typ", "", with(accessClaims), true, false},
		{"Keycloak access token (typ claim Bearer) with a nonce and azp", "JWT", with(map[string]any{"typ": "Bearer", "nonce": "n", "azp": "some-client"}), true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tok := iss.typed(t, tc.typ, tc.claims, iss.key)
			for _, srv := range []struct {
				base string
				ok   bool
			}{{base, tc.plain}, {strict, tc.strictOK}} {
				code, hdr, _ := do(t, http.MethodPost, srv.base+PathMCP, "Bearer "+tok, toolsList, nil)
				switch {
				case srv.ok && code == http.StatusUnauthorized:
					t.Errorf("%s: refused (%s), want it let in", srv.base, hdr.Get("WWW-Authenticate"))
				case !srv.ok && code != http.StatusUnauthorized:
					t.Errorf("%s: %d, want 401", srv.base, code)
				}
			}
		})
	}
}

// The owner can be named by another claim. An email names an owner only when the token says it is verified
// (email_verified true, not false, not missing, not the string "true") and it is an address.
func TestOAuthOwnerClaim(t *testing.T) {
	iss := newTestIssuer(t)
	base := oauthFixture(t, iss, "email", "")
	for name, edit := range map[string]func(map[string]any){
		"unverified email":            func(c map[string]any) { c["email_verified"] = false },
		"no email_verified claim":     func(c map[string]any) { delete(c, "email_verified") },
		"email_verified a string":     func(c map[string]any) { c["email_verified"] = "true" },
		"an email that is no address": func(c map[string]any) { c["email"] = "erin" },
	} {
		tok := iss.token(t, iss.claims("erin", edit), nil)
		if code, _, _ := do(t, http.MethodPost, base+PathMCP, "Bearer "+tok, toolsList, nil); code != http.StatusUnauthorized {
			t.Errorf("%s: %d, want 401", name, code)
		}
	}
	c := streamableClient(t, base, iss.token(t, iss.claims("erin", nil), nil), "", mcp.ProtocolVersion20260728)
	createSandbox(t, c)
}

// Tokens-file owners and OAuth owners cannot name each other, so a server whose tokens file holds a name an
// access token could carry does not start: with any owner claim but email the identity provider may give any
// name, a tokens-file owner's too; with email, every address.
func TestOAuthRefusesTokensFileOwnersItCouldName(t *testing.T) {
	iss := newTestIssuer(t)
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
			OAuth: &OAuthConfig{Issuer: iss.url, Resource: testResource, OwnerClaim: tc.claim}})
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
	iss := newTestIssuer(t)
	tokens, toks := tokensFor(t, "carol")
	base := oauthFixture(t, iss, "email", tokens)
	carol := streamableClient(t, base, toks["carol"], "", mcp.ProtocolVersion20260728)
	id := createSandbox(t, carol)

	posing := iss.token(t, iss.claims("x", func(c map[string]any) { c["email"] = "carol" }), nil)
	if code, _, _ := do(t, http.MethodPost, base+PathMCP, "Bearer "+posing, toolsList, nil); code != http.StatusUnauthorized {
		t.Errorf("an account whose email claim is carol: %d, want 401", code)
	}
	member := streamableClient(t, base, iss.token(t, iss.claims("carol", nil), nil), "", mcp.ProtocolVersion20260728)
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

// BenchmarkOAuthOwner is what every HTTP request with an OAuth access token pays to be let in: the JWT's RS256
// signature, issuer, audience and expiry checked (the provider's keys fetched once), and its owner claim read.
func BenchmarkOAuthOwner(b *testing.B) {
	iss := newTestIssuer(b)
	v := newOAuthVerifier(OAuthConfig{Issuer: iss.url, Resource: testResource, OwnerClaim: DefaultOwnerClaim},
		&authServer{issuer: iss.url, client: http.DefaultClient})
	tok := iss.token(b, iss.claims("alice", nil), nil)
	b.ReportAllocs()
	for b.Loop() {
		if owner, err := v.owner(b.Context(), tok); err != nil || owner != "alice" {
			b.Fatal(owner, err)
		}
	}
}
