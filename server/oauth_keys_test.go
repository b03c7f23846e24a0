package server

import (
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
)

// manualClock is a clock that moves only when the test says.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func newManualClock() *manualClock { return &manualClock{now: time.Now()} }

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func rsaKey(t testing.TB) *rsa.PrivateKey {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// status posts tools/list with the bearer token and returns the status code (an error where the request fails),
// for use from several goroutines.
func status(base, token string) (int, error) {
	req, err := http.NewRequest(http.MethodPost, base+PathMCP, strings.NewReader(toolsList))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// refused reports whether an HTTP status refuses the caller.
func refused(code int) bool {
	return code == http.StatusUnauthorized || code == http.StatusTooManyRequests
}

// Tokens that name a key the authorization server never published (forged ones, another provider's) or that a
// known key does not verify make the server fetch the provider's key set at most once per interval: 1,000 of
// them, from a cold start and from four clients at once, fetch it once, and a valid token is then let in with
// the keys of that fetch.
func TestOAuthUnknownKeysFetchKeySetOnce(t *testing.T) {
	iss := newTestIssuer(t)
	base := oauthFixture(t, iss, "", "")
	other := rsaKey(t)
	unknownKid := iss.signed(t, "at+jwt", "nope", iss.claims("alice", nil), other)
	wrongKey := iss.token(t, iss.claims("alice", nil), other) // names the provider's key k1

	var wg sync.WaitGroup
	var letIn, failed atomic.Int64
	for range 4 {
		wg.Go(func() {
			for i := range 250 {
				tok := unknownKid
				if i%5 == 0 {
					tok = wrongKey
				}
				code, err := status(base, tok)
				switch {
				case err != nil:
					failed.Add(1)
				case !refused(code):
					letIn.Add(1)
				}
			}
		})
	}
	waitfor.Return(t, 2*time.Minute, "the requests with forged tokens", wg.Wait)
	if letIn.Load() != 0 || failed.Load() != 0 {
		t.Fatalf("%d forged tokens let in, %d requests failed", letIn.Load(), failed.Load())
	}
	if n := iss.fetches.Load(); n != 1 {
		t.Errorf("1,000 tokens of unknown keys fetched the key set %d times, want once", n)
	}
	if code, err := status(base, iss.token(t, iss.claims("alice", nil), nil)); err != nil || refused(code) {
		t.Errorf("a valid token after them: %d %v", code, err)
	}
	if n := iss.fetches.Load(); n != 1 {
		t.Errorf("the key set was fetched %d times, want once", n)
	}
}

// A provider rotating its keys: a token of the new key is let in once the interval since the last fetch has
// passed (the next fetch finds the key), and not before; the keys fetched serve every later token, ID tokens of
// the connect page's sign-in included, without another fetch.
func TestOAuthKeySetRefetchedOncePerInterval(t *testing.T) {
	iss := newTestIssuer(t)
	clock := newManualClock()
	as := &authServer{issuer: iss.url, client: http.DefaultClient, now: clock.Now}
	v := newOAuthVerifier(OAuthConfig{Issuer: iss.url, Resource: testResource, OwnerClaim: DefaultOwnerClaim}, as)
	owner := func(tok string) error { _, err := v.owner(t.Context(), tok); return err }
	fetches := func(want int64, when string) {
		t.Helper()
		if n := iss.fetches.Load(); n != want {
			t.Errorf("%s: %d fetches of the key set, want %d", when, n, want)
		}
	}

	old := iss.token(t, iss.claims("alice", nil), nil)
	if err := owner(old); err != nil {
		t.Fatal(err)
	}
	next := rsaKey(t)
	iss.publish("k2", next)
	rotated := iss.signed(t, "at+jwt", "k2", iss.claims("alice", nil), next)
	if err := owner(rotated); err == nil {
		t.Error("a key published after the last fetch verified a token within the interval")
	}
	fetches(1, "within the interval")

	clock.advance(keysRefetchInterval)
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
	if _, err := signIn.Verify(t.Context(), iss.typed(t, "JWT", iss.claims("alice", nil), iss.key)); err != nil {
		t.Errorf("an ID token for the sign-in: %v", err)
	}
	fetches(2, "tokens of keys already fetched")
}

// A key set the provider could not serve is asked for again after a short wait, not a whole interval, and a
// failed fetch keeps the keys of the last good one.
func TestOAuthKeySetRetriedAfterFailure(t *testing.T) {
	iss := newTestIssuer(t)
	clock := newManualClock()
	v := newOAuthVerifier(OAuthConfig{Issuer: iss.url, Resource: testResource, OwnerClaim: DefaultOwnerClaim},
		&authServer{issuer: iss.url, client: http.DefaultClient, now: clock.Now})
	valid := iss.token(t, iss.claims("alice", nil), nil)
	owner := func(tok string) error { _, err := v.owner(t.Context(), tok); return err }

	iss.setKeysDown(true)
	for range 3 {
		if err := owner(valid); err == nil {
			t.Fatal("let in without keys")
		}
	}
	if n := iss.fetches.Load(); n != 1 {
		t.Errorf("%d fetches while the key set fails, want 1 before the retry wait", n)
	}
	iss.setKeysDown(false)
	clock.advance(keysRetryInterval)
	if err := owner(valid); err != nil {
		t.Errorf("after the retry wait: %v", err)
	}

	iss.setKeysDown(true)
	clock.advance(keysRefetchInterval)
	if err := owner(iss.signed(t, "at+jwt", "nope", iss.claims("alice", nil), rsaKey(t))); err == nil {
		t.Error("an unknown key let in")
	}
	if err := owner(valid); err != nil {
		t.Errorf("a key of the last good fetch, after a failed one: %v", err)
	}
	if n := iss.fetches.Load(); n != 3 {
		t.Errorf("%d fetches, want 3", n)
	}
}

// Forged tokens from an address never lock its members out. Behind the TLS proxy or HAProxy a team puts in front,
// every member shares one address: after a flood of junk tokens from it, a member whose access token expired
// must still get the 401 and its challenge (clients start the OAuth sign-in on 401, never on 429), a valid token
// is let in, and a request without one gets the challenge too. Past the budget a refusal carries Retry-After and
// is no longer logged one by one.
func TestForgedTokensDoNotLockMembersOut(t *testing.T) {
	iss := newTestIssuer(t)
	base := oauthFixture(t, iss, "", "")
	challenged := func(what, token string) http.Header {
		t.Helper()
		code, hdr, _ := do(t, http.MethodPost, base+PathMCP, token, toolsList, nil)
		if code != http.StatusUnauthorized || !strings.Contains(hdr.Get("WWW-Authenticate"), "resource_metadata=") {
			t.Fatalf("%s: %d, WWW-Authenticate %q; want 401 and the challenge", what, code, hdr.Get("WWW-Authenticate"))
		}
		return hdr
	}
	for i := range 3 * refusalBurst {
		challenged(fmt.Sprintf("junk token %d", i+1), fmt.Sprintf("Bearer junk-%d", i))
	}
	expired := iss.token(t, iss.claims("alice", func(c map[string]any) { c["exp"] = time.Now().Add(-time.Minute).Unix() }), nil)
	if hdr := challenged("the member's expired token", "Bearer "+expired); !strings.Contains(hdr.Get("WWW-Authenticate"), `error="invalid_token"`) ||
		hdr.Get("Retry-After") == "" {
		t.Errorf("the expired token's answer past the budget: WWW-Authenticate %q, Retry-After %q", hdr.Get("WWW-Authenticate"), hdr.Get("Retry-After"))
	}
	challenged("no token", "")
	if code, _, _ := do(t, http.MethodPost, base+PathMCP, "Bearer "+iss.token(t, iss.claims("alice", nil), nil), toolsList, nil); refused(code) {
		t.Errorf("the member's new token from the same address: %d", code)
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
	for range refusalBurst {
		refuse("198.51.100.9, 203.0.113.7")
	}
	if refuse("203.0.113.7").Get("Retry-After") == "" {
		t.Error("the address past its budget was not told to wait")
	}
	// The client's own part of the header is not believed: only the entry the proxy added counts.
	if refuse("203.0.113.7, 203.0.113.8").Get("Retry-After") != "" {
		t.Error("another address behind the same proxy was told to wait for the first one's refusals")
	}
}

// The refusals' budget is per address (every port of an IPv4 address, every address of an IPv6 /64), refills
// with time, and its table stays bounded however many addresses send refused tokens; the log takes a bounded
// number of refusals whatever the addresses.
func TestRefusalBudget(t *testing.T) {
	clock := newManualClock()
	r := newRefusals(clock.Now)
	waitOf := func(addr string) time.Duration {
		wait, _ := r.refuse(addr)
		return wait
	}
	spend := func(addr string) {
		t.Helper()
		for i := range refusalBurst {
			if wait := waitOf(addr); wait != 0 {
				t.Fatalf("%s: refusal %d told to wait %v", addr, i+1, wait)
			}
		}
	}
	spend("192.0.2.1:1000")
	if wait := waitOf("192.0.2.1:2000"); wait <= 0 || wait > refusalEvery {
		t.Errorf("another port of a spent address: wait %v", wait)
	}
	if wait := waitOf("192.0.2.2:1000"); wait != 0 {
		t.Errorf("another address: wait %v", wait)
	}
	spend("[2001:db8::1]:443")
	if wait := waitOf("[2001:db8::ffff]:443"); wait <= 0 {
		t.Error("another address of the same IPv6 /64 was not told to wait")
	}
	if wait := waitOf("[2001:db8:0:1::1]:443"); wait != 0 {
		t.Errorf("another /64: wait %v", wait)
	}
	clock.advance(refusalEvery)
	if wait := waitOf("192.0.2.1:1000"); wait != 0 {
		t.Errorf("after %v: wait %v", refusalEvery, wait)
	}

	logged := 0
	for i := range 2 * maxRefusalAddrs {
		if _, logIt := r.refuse(fmt.Sprintf("10.%d.%d.%d:1", i>>16&0xff, i>>8&0xff, i&0xff)); logIt {
			logged++
		}
	}
	if logged > logBurst {
		t.Errorf("%d of %d refusals from as many addresses logged at once, want at most %d", logged, 2*maxRefusalAddrs, logBurst)
	}
	if n := len(r.byAddr); n > maxRefusalAddrs {
		t.Errorf("%d addresses kept, want at most %d", n, maxRefusalAddrs)
	}
	// A full table makes room for a new address rather than count it over a budget it never spent.
	if wait := waitOf("198.51.100.1:1"); wait != 0 {
		t.Errorf("a new address while the table is full: wait %v", wait)
	}
	if n := len(r.byAddr); n > maxRefusalAddrs {
		t.Errorf("%d addresses kept, want at most %d", n, maxRefusalAddrs)
	}
}
