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

// A remote address whose bearer tokens keep being refused is told to wait (429 with Retry-After) after a burst
// of refusals; its valid tokens are still let in (members behind one proxy share an address), and a request
// without a token still gets the 401 challenge that starts an OAuth client's sign-in.
func TestRefusedTokensRateLimited(t *testing.T) {
	tokens, toks := tokensFor(t, "frank")
	base := serveHTTP(t, newFixture(t, fixtureOpts{tokensFile: tokens, transport: TransportHTTP}))
	for i := range refusalBurst {
		if code, _, _ := do(t, http.MethodPost, base+PathMCP, "Bearer e2bmcp_wrong-token", toolsList, nil); code != http.StatusUnauthorized {
			t.Fatalf("refusal %d: %d, want 401", i+1, code)
		}
	}
	code, hdr, _ := do(t, http.MethodPost, base+PathMCP, "Bearer e2bmcp_wrong-token", toolsList, nil)
	if code != http.StatusTooManyRequests || hdr.Get("Retry-After") != "1" {
		t.Errorf("after %d refusals: %d, Retry-After %q; want 429 and 1", refusalBurst, code, hdr.Get("Retry-After"))
	}
	if code, _, _ := do(t, http.MethodPost, base+PathMCP, "Bearer "+toks["frank"], toolsList, nil); refused(code) {
		t.Errorf("a valid token from the same address: %d", code)
	}
	if code, _, _ := do(t, http.MethodPost, base+PathMCP, "", toolsList, nil); code != http.StatusUnauthorized {
		t.Errorf("no token from the same address: %d, want 401", code)
	}
}

// The refusals' budget is per address (every port of an IPv4 address, every address of an IPv6 /64), refills
// with time, and its table stays bounded however many addresses send refused tokens.
func TestRefusalBudget(t *testing.T) {
	clock := newManualClock()
	r := newRefusals(clock.Now)
	spend := func(addr string) {
		t.Helper()
		for i := range refusalBurst {
			if wait := r.refuse(addr); wait != 0 {
				t.Fatalf("%s: refusal %d told to wait %v", addr, i+1, wait)
			}
		}
	}
	spend("192.0.2.1:1000")
	if wait := r.refuse("192.0.2.1:2000"); wait <= 0 || wait > refusalEvery {
		t.Errorf("another port of a spent address: wait %v", wait)
	}
	if wait := r.refuse("192.0.2.2:1000"); wait != 0 {
		t.Errorf("another address: wait %v", wait)
	}
	spend("[2001:db8::1]:443")
	if wait := r.refuse("[2001:db8::ffff]:443"); wait <= 0 {
		t.Error("another address of the same IPv6 /64 was not told to wait")
	}
	if wait := r.refuse("[2001:db8:0:1::1]:443"); wait != 0 {
		t.Errorf("another /64: wait %v", wait)
	}
	clock.advance(refusalEvery)
	if wait := r.refuse("192.0.2.1:1000"); wait != 0 {
		t.Errorf("after %v: wait %v", refusalEvery, wait)
	}

	for i := range 2 * maxRefusalAddrs {
		r.refuse(fmt.Sprintf("10.%d.%d.%d:1", i>>16&0xff, i>>8&0xff, i&0xff))
	}
	if n := len(r.byAddr); n > maxRefusalAddrs {
		t.Errorf("%d addresses kept, want at most %d", n, maxRefusalAddrs)
	}
	if wait := r.refuse("198.51.100.1:1"); wait <= 0 {
		t.Error("a new address while the table is full of addresses within their budget was not told to wait")
	}
	clock.advance(refusalBurst * refusalEvery)
	if wait := r.refuse("198.51.100.1:1"); wait != 0 {
		t.Errorf("a new address once the others' budgets have refilled: wait %v", wait)
	}
}
