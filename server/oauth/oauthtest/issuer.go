// Package oauthtest is an authorization server for tests: an OpenID Connect discovery document and a key set
// served on loopback, and access tokens signed as the tests need them, to reach every refusal. tests/oauth_test.go
// signs in through a real OpenID Connect provider instead.
package oauthtest

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Resource is the resource URL of the server the tokens are for, their audience.
const Resource = "https://mcp.example.test/mcp"

// Issuer is an authorization server's discovery document and key set, served on loopback.
type Issuer struct {
	URL string
	Key *rsa.PrivateKey // the key the key set publishes under KID
	KID string

	fetches  atomic.Int64 // requests for the key set
	mu       sync.Mutex
	extra    []jose.JSONWebKey // published beside Key (a rotation's next key)
	keysDown bool              // the key set answers 500
}

// NewIssuer serves an issuer until the test ends.
func NewIssuer(t testing.TB) *Issuer {
	t.Helper()
	iss := &Issuer{Key: NewKey(t), KID: "k1"}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer": iss.URL, "jwks_uri": iss.URL + "/keys", "authorization_endpoint": iss.URL + "/auth",
			"token_endpoint": iss.URL + "/token", "id_token_signing_alg_values_supported": []string{"RS256"},
		})
	})
	mux.HandleFunc("/keys", func(w http.ResponseWriter, _ *http.Request) {
		iss.fetches.Add(1)
		iss.mu.Lock()
		down := iss.keysDown
		keys := append([]jose.JSONWebKey{{Key: &iss.Key.PublicKey, KeyID: iss.KID, Algorithm: "RS256", Use: "sig"}},
			iss.extra...)
		iss.mu.Unlock()
		if down {
			http.Error(w, "unavailable", http.StatusInternalServerError)
			return
		}
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: keys})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	iss.URL = srv.URL
	return iss
}

// NewKey is a new RSA key (2048 bits) to sign with.
func NewKey(t testing.TB) *rsa.PrivateKey {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// Fetches is how many requests for the key set the issuer has answered.
func (iss *Issuer) Fetches() int64 { return iss.fetches.Load() }

// Publish adds key to the key set under kid, as a provider rotating its keys does.
func (iss *Issuer) Publish(kid string, key *rsa.PrivateKey) {
	iss.mu.Lock()
	defer iss.mu.Unlock()
	iss.extra = append(iss.extra, jose.JSONWebKey{Key: &key.PublicKey, KeyID: kid, Algorithm: "RS256", Use: "sig"})
}

// SetKeysDown makes the key set answer 500 (down) or the keys again.
func (iss *Issuer) SetKeysDown(down bool) {
	iss.mu.Lock()
	defer iss.mu.Unlock()
	iss.keysDown = down
}

// Token signs claims as an access token (header typ at+jwt, RFC 9068) with key (the issuer's own unless another
// is given).
func (iss *Issuer) Token(t testing.TB, claims map[string]any, key *rsa.PrivateKey) string {
	t.Helper()
	if key == nil {
		key = iss.Key
	}
	return iss.Typed(t, "at+jwt", claims, key)
}

// Typed signs claims with key under the header typ (none when typ is "").
func (iss *Issuer) Typed(t testing.TB, typ string, claims map[string]any, key *rsa.PrivateKey) string {
	t.Helper()
	return iss.Signed(t, typ, iss.KID, claims, key)
}

// Signed signs claims with key under the header typ (none when typ is "") and kid.
func (iss *Issuer) Signed(t testing.TB, typ, kid string, claims map[string]any, key *rsa.PrivateKey) string {
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

// Claims are a valid access token's claims for owner (for Resource, expiring in five minutes, with a verified
// email owner@example.test), changed by edit.
func (iss *Issuer) Claims(owner string, edit func(map[string]any)) map[string]any {
	now := time.Now()
	c := map[string]any{
		"iss": iss.URL, "sub": owner, "aud": []string{"some-client", Resource},
		"iat": now.Unix(), "exp": now.Add(5 * time.Minute).Unix(),
		"email": owner + "@example.test", "email_verified": true,
	}
	if edit != nil {
		edit(c)
	}
	return c
}
