package oauth

import (
	"net/http"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/clocktest"
	"github.com/e2b-mcp/e2b-mcp/server/oauth/oauthtest"
)

// A provider rotating its keys: a token of the new key is let in once the interval since the last fetch has
// passed (the next fetch finds the key), and not before; the keys fetched serve every later token, ID tokens of
// the connect page's sign-in included, without another fetch.
func TestOAuthKeySetRefetchedOncePerInterval(t *testing.T) {
	iss := oauthtest.NewIssuer(t)
	clock := clocktest.New(time.Now())
	as := NewAuthServer(iss.URL, http.DefaultClient, clock.Now)
	v := NewVerifier(Config{Issuer: iss.URL, Resource: oauthtest.Resource, OwnerClaim: DefaultOwnerClaim}, as)
	owner := func(tok string) error { _, err := v.Owner(t.Context(), tok); return err }
	fetches := func(want int64, when string) {
		t.Helper()
		if n := iss.Fetches(); n != want {
			t.Errorf("%s: %d fetches of the key set, want %d", when, n, want)
		}
	}

	old := iss.Token(t, iss.Claims("alice", nil), nil)
	if err := owner(old); err != nil {
		t.Fatal(err)
	}
	next := oauthtest.NewKey(t)
	iss.Publish("k2", next)
	rotated := iss.Signed(t, "at+jwt", "k2", iss.Claims("alice", nil), next)
	if err := owner(rotated); err == nil {
		t.Error("a key published after the last fetch verified a token within the interval")
	}
	fetches(1, "within the interval")

	clock.Advance(keysRefetchInterval)
	if err := owner(rotated); err != nil {
		t.Errorf("the new key after the interval: %v", err)
	}
	fetches(2, "after the interval")
	for _, tok := range []string{rotated, old, rotated} {
		if err := owner(tok); err != nil {
			t.Error(err)
		}
	}
	signIn, err := as.verifier(t.Context(), "some-client")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := signIn.Verify(t.Context(), iss.Typed(t, "JWT", iss.Claims("alice", nil), iss.Key)); err != nil {
		t.Errorf("an ID token for the sign-in: %v", err)
	}
	fetches(2, "tokens of keys already fetched")
}

// A key set the provider could not serve is asked for again after a short wait, not a whole interval, and a
// failed fetch keeps the keys of the last good one.
func TestOAuthKeySetRetriedAfterFailure(t *testing.T) {
	iss := oauthtest.NewIssuer(t)
	clock := clocktest.New(time.Now())
	v := NewVerifier(Config{Issuer: iss.URL, Resource: oauthtest.Resource, OwnerClaim: DefaultOwnerClaim},
		NewAuthServer(iss.URL, http.DefaultClient, clock.Now))
	valid := iss.Token(t, iss.Claims("alice", nil), nil)
	owner := func(tok string) error { _, err := v.Owner(t.Context(), tok); return err }

	iss.SetKeysDown(true)
	for range 3 {
		if err := owner(valid); err == nil {
			t.Fatal("let in without keys")
		}
	}
	if n := iss.Fetches(); n != 1 {
		t.Errorf("%d fetches while the key set fails, want 1 before the retry wait", n)
	}
	iss.SetKeysDown(false)
	clock.Advance(keysRetryInterval)
	if err := owner(valid); err != nil {
		t.Errorf("after the retry wait: %v", err)
	}

	iss.SetKeysDown(true)
	clock.Advance(keysRefetchInterval)
	if err := owner(iss.Signed(t, "at+jwt", "nope", iss.Claims("alice", nil), oauthtest.NewKey(t))); err == nil {
		t.Error("an unknown key let in")
	}
	if err := owner(valid); err != nil {
		t.Errorf("a key of the last good fetch, after a failed one: %v", err)
	}
	if n := iss.Fetches(); n != 3 {
		t.Errorf("%d fetches, want 3", n)
	}
}
