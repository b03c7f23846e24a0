package oauth

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
	"github.com/e2b-mcp/e2b-mcp/server/oauth/oauthtest"
)

// The tests of this package mint their own tokens, to reach every refusal; tests/oauth_test.go signs in through a
// real OpenID Connect provider, and the server's tests check that a refusal is a 401 with the challenge.

// verifier checks the tokens of iss for oauthtest.Resource, the owner in ownerClaim ("" for the default), as cfg
// is changed by edit.
func verifier(iss *oauthtest.Issuer, ownerClaim string, edit ...func(*Config)) *Verifier {
	if ownerClaim == "" {
		ownerClaim = DefaultOwnerClaim
	}
	cfg := Config{Issuer: iss.URL, Resource: oauthtest.Resource, OwnerClaim: ownerClaim}
	for _, e := range edit {
		e(&cfg)
	}
	return NewVerifier(cfg, NewAuthServer(iss.URL, http.DefaultClient, nil))
}

// refusedToken checks that v refuses tok as a token (not for want of the authorization server).
func refusedToken(t *testing.T, v *Verifier, what, tok string) {
	t.Helper()
	if owner, err := v.Owner(t.Context(), tok); !errors.Is(err, ErrTokenRefused) {
		t.Errorf("%s: owner %q, error %v; want a refusal", what, owner, err)
	}
}

// Every way a token can be wrong is refused; only a token of the issuer, for this resource, unexpired, with an
// owner claim that names an owner, is let through.
func TestTokenChecks(t *testing.T) {
	iss := oauthtest.NewIssuer(t)
	other := oauthtest.NewKey(t)
	v := verifier(iss, "")
	edit := func(k string, v any) func(map[string]any) { return func(c map[string]any) { c[k] = v } }
	for _, tc := range []struct {
		name  string
		token string
	}{
		{"wrong audience", iss.Token(t, iss.Claims("alice", edit("aud", "https://other.example.test/mcp")), nil)},
		{"audience of the resource's prefix", iss.Token(t, iss.Claims("alice", edit("aud", "https://mcp.example.test")), nil)},
		{"no audience", iss.Token(t, iss.Claims("alice", func(c map[string]any) { delete(c, "aud") }), nil)},
		{"wrong issuer", iss.Token(t, iss.Claims("alice", edit("iss", "https://evil.example.test")), nil)},
		{"expired", iss.Token(t, iss.Claims("alice", edit("exp", time.Now().Add(-time.Minute).Unix())), nil)},
		{"signed by another key", iss.Token(t, iss.Claims("alice", nil), other)},
		{"unsigned", unsigned(iss.Claims("alice", nil))},
		{"tampered", tamper(iss.Token(t, iss.Claims("alice", nil), nil))},
		{"no owner claim", iss.Token(t, iss.Claims("alice", func(c map[string]any) { delete(c, "sub") }), nil)},
		{"owner with a control character", iss.Token(t, iss.Claims("al\nice", nil), nil)},
		{"reserved owner name", iss.Token(t, iss.Claims("state-data-key", nil), nil)},
		{"not a JWT", "e2bmcp_not-a-jwt"},
		{"JWS JSON serialization", jsonSerialized(t, iss, iss.Claims("alice", nil))},
	} {
		refusedToken(t, v, tc.name, tc.token)
	}
	if owner, err := v.Owner(t.Context(), iss.Token(t, iss.Claims("carol", nil), nil)); err != nil || owner != "carol" {
		t.Errorf("a valid token: owner %q, %v", owner, err)
	}
}

// jsonSerialized signs claims with the issuer's key as a valid access token would be, but in the JWS JSON
// serialization, which a JWT never uses (RFC 7519, section 1): a token must be compact.
func jsonSerialized(t testing.TB, iss *oauthtest.Issuer, claims map[string]any) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: iss.Key, KeyID: iss.KID}},
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
func TestTokenType(t *testing.T) {
	iss := oauthtest.NewIssuer(t)
	plain := verifier(iss, "")
	strict := verifier(iss, "", func(c *Config) { c.RequireAccessTokenType = true })
	with := func(extra map[string]any) map[string]any {
		return iss.Claims("alice", func(c map[string]any) {
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
		plain, strictOK bool // let in by the verifier, and by one that requires at+jwt
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
		tok := iss.Typed(t, tc.typ, tc.claims, iss.Key)
		for _, v := range []struct {
			name string
			v    *Verifier
			ok   bool
		}{{"plain", plain, tc.plain}, {"strict", strict, tc.strictOK}} {
			if v.ok {
				if _, err := v.v.Owner(t.Context(), tok); err != nil {
					t.Errorf("%s, %s: refused (%v), want it let in", tc.name, v.name, err)
				}
			} else {
				refusedToken(t, v.v, tc.name+", "+v.name, tok)
			}
		}
	}
}

// The owner can be named by another claim. An email names an owner only when the token says it is verified
// (email_verified true, not false, not missing, not the string "true") and it is an address.
func TestOwnerClaim(t *testing.T) {
	iss := oauthtest.NewIssuer(t)
	v := verifier(iss, "email")
	for name, edit := range map[string]func(map[string]any){
		"unverified email":            func(c map[string]any) { c["email_verified"] = false },
		"no email_verified claim":     func(c map[string]any) { delete(c, "email_verified") },
		"email_verified a string":     func(c map[string]any) { c["email_verified"] = "true" },
		"an email that is no address": func(c map[string]any) { c["email"] = "erin" },
	} {
		refusedToken(t, v, name, iss.Token(t, iss.Claims("erin", edit), nil))
	}
	if owner, err := v.Owner(t.Context(), iss.Token(t, iss.Claims("erin", nil), nil)); err != nil ||
		owner != "erin@example.test" {
		t.Errorf("a verified email: owner %q, %v", owner, err)
	}
}

// An authorization server that cannot be discovered is no refusal of the token: the server answers it as its own
// failure, and finds the provider once it is back.
func TestUndiscoverable(t *testing.T) {
	iss := oauthtest.NewIssuer(t)
	v := NewVerifier(Config{Issuer: iss.URL + "/nowhere", Resource: oauthtest.Resource, OwnerClaim: DefaultOwnerClaim},
		NewAuthServer(iss.URL+"/nowhere", http.DefaultClient, nil))
	if _, err := v.Owner(t.Context(), iss.Token(t, iss.Claims("alice", nil), nil)); err == nil ||
		errors.Is(err, ErrTokenRefused) {
		t.Errorf("an issuer without discovery: %v, want an error that is no refusal", err)
	}
}

// Tokens that name a key the authorization server never published (forged ones, another provider's) or that a
// known key does not verify make the verifier fetch the provider's key set at most once per interval: 1,000 of
// them, from a cold start and from four callers at once, fetch it once, and a valid token is then let in with
// the keys of that fetch.
func TestUnknownKeysFetchKeySetOnce(t *testing.T) {
	iss := oauthtest.NewIssuer(t)
	v := verifier(iss, "")
	other := oauthtest.NewKey(t)
	unknownKid := iss.Signed(t, "at+jwt", "nope", iss.Claims("alice", nil), other)
	wrongKey := iss.Token(t, iss.Claims("alice", nil), other) // names the provider's key k1

	var wg sync.WaitGroup
	var letIn, failed atomic.Int64
	for range 4 {
		wg.Go(func() {
			for i := range 250 {
				tok := unknownKid
				if i%5 == 0 {
					tok = wrongKey
				}
				_, err := v.Owner(t.Context(), tok)
				switch {
				case err == nil:
					letIn.Add(1)
				case !errors.Is(err, ErrTokenRefused):
					failed.Add(1)
				}
			}
		})
	}
	waitfor.Return(t, 2*time.Minute, "the checks of forged tokens", wg.Wait)
	if letIn.Load() != 0 || failed.Load() != 0 {
		t.Fatalf("%d forged tokens let in, %d checks failed otherwise", letIn.Load(), failed.Load())
	}
	if n := iss.Fetches(); n != 1 {
		t.Errorf("1,000 tokens of unknown keys fetched the key set %d times, want once", n)
	}
	if _, err := v.Owner(t.Context(), iss.Token(t, iss.Claims("alice", nil), nil)); err != nil {
		t.Errorf("a valid token after them: %v", err)
	}
	if n := iss.Fetches(); n != 1 {
		t.Errorf("the key set was fetched %d times, want once", n)
	}
}

func TestChallenge(t *testing.T) {
	c := Config{Issuer: "https://idp.example.test", Resource: oauthtest.Resource, Scopes: []string{"openid", "email"}}
	const meta = `Bearer resource_metadata="https://mcp.example.test/.well-known/oauth-protected-resource/mcp"`
	if got, want := c.Challenge(false), meta+`, scope="openid email"`; got != want {
		t.Errorf("without a token: %q, want %q", got, want)
	}
	if got := c.Challenge(true); !strings.HasPrefix(got, meta) || !strings.Contains(got, `error="invalid_token"`) {
		t.Errorf("with a refused token: %q", got)
	}
	c.Scopes = nil
	if got := c.Challenge(false); got != meta {
		t.Errorf("without scopes: %q, want %q", got, meta)
	}
}

// BenchmarkOwner is what every HTTP request with an OAuth access token pays to be let in: the JWT's RS256
// signature, issuer, audience and expiry checked (the provider's keys fetched once), and its owner claim read.
func BenchmarkOwner(b *testing.B) {
	iss := oauthtest.NewIssuer(b)
	v := verifier(iss, "")
	tok := iss.Token(b, iss.Claims("alice", nil), nil)
	b.ReportAllocs()
	for b.Loop() {
		if owner, err := v.Owner(b.Context(), tok); err != nil || owner != "alice" {
			b.Fatal(owner, err)
		}
	}
}
