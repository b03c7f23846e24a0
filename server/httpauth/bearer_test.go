package httpauth

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/internal/clocktest"
	"github.com/e2b-mcp/e2b-mcp/server/oauth"
	"github.com/e2b-mcp/e2b-mcp/server/oauth/oauthtest"
)

// Forged tokens from an address never lock its members out. Behind the TLS proxy or HAProxy a team puts in front,
// every member shares one address: after a flood of junk tokens from it, a member whose access token expired
// must still get the 401 and its challenge (clients start the OAuth sign-in on 401, never on 429), a valid token
// is let in, and a request without one gets the challenge too. Past the budget a refusal carries Retry-After and
// is no longer logged one by one.
func TestForgedTokensDoNotLockMembersOut(t *testing.T) {
	iss := oauthtest.NewIssuer(t)
	cfg := oauth.Config{Issuer: iss.URL, Resource: oauthtest.Resource, OwnerClaim: oauth.DefaultOwnerClaim}
	b := New(Options{OAuth: oauth.NewVerifier(cfg, oauth.NewAuthServer(iss.URL, http.DefaultClient, nil)),
		Challenge: cfg.Challenge, Log: slog.New(slog.NewTextHandler(t.Output(), nil))})
	ask := func(token string) (*httptest.ResponseRecorder, string, bool) {
		t.Helper()
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		r.RemoteAddr = "192.0.2.1:4711"
		if token != "" {
			r.Header.Set("Authorization", token)
		}
		w := httptest.NewRecorder()
		owner, ok := b.Owner(w, r)
		return w, owner, ok
	}
	challenged := func(what, token string) http.Header {
		t.Helper()
		w, _, ok := ask(token)
		if ok || w.Code != http.StatusUnauthorized || !strings.Contains(w.Header().Get("WWW-Authenticate"), "resource_metadata=") {
			t.Fatalf("%s: let in %v, %d, WWW-Authenticate %q; want 401 and the challenge", what, ok, w.Code,
				w.Header().Get("WWW-Authenticate"))
		}
		return w.Header()
	}
	for i := range 3 * refusalBurst {
		challenged(fmt.Sprintf("junk token %d", i+1), fmt.Sprintf("Bearer junk-%d", i))
	}
	expired := iss.Token(t, iss.Claims("alice", func(c map[string]any) { c["exp"] = time.Now().Add(-time.Minute).Unix() }), nil)
	if hdr := challenged("the member's expired token", "Bearer "+expired); !strings.Contains(hdr.Get("WWW-Authenticate"), `error="invalid_token"`) ||
		hdr.Get("Retry-After") == "" {
		t.Errorf("the expired token's answer past the budget: WWW-Authenticate %q, Retry-After %q", hdr.Get("WWW-Authenticate"), hdr.Get("Retry-After"))
	}
	if hdr := challenged("no token", ""); strings.Contains(hdr.Get("WWW-Authenticate"), "invalid_token") {
		t.Errorf("no token was answered as a refused one: %q", hdr.Get("WWW-Authenticate"))
	}
	if _, owner, ok := ask("Bearer " + iss.Token(t, iss.Claims("alice", nil), nil)); !ok || owner != "alice" {
		t.Errorf("the member's new token from the same address: owner %q, let in %v", owner, ok)
	}
}

// tokenOwners is a tokens file of one token per owner.
type tokenOwners map[string]string

func (o tokenOwners) Owner(token string) (string, bool) {
	owner, ok := o[token]
	return owner, ok
}

// The client's address is the last entry of the trusted proxy's header, whatever the client wrote before it; a
// header that holds no address, or none configured, leaves the connection's.
func TestClientAddr(t *testing.T) {
	for _, tc := range []struct {
		header string
		values []string
		want   string
	}{
		{"", []string{"203.0.113.7"}, "198.51.100.1:443"},
		{"X-Forwarded-For", nil, "198.51.100.1:443"},
		{"X-Forwarded-For", []string{"203.0.113.7"}, "203.0.113.7"},
		{"X-Forwarded-For", []string{"198.51.100.9, 203.0.113.7"}, "203.0.113.7"},
		{"X-Forwarded-For", []string{"10.0.0.1", "198.51.100.9,2001:db8::1"}, "2001:db8::1"},
		{"X-Forwarded-For", []string{"203.0.113.7, not-an-address"}, "198.51.100.1:443"},
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = "198.51.100.1:443"
		for _, v := range tc.values {
			r.Header.Add("X-Forwarded-For", v)
		}
		if got := clientAddr(r, tc.header); got != tc.want {
			t.Errorf("%q of %q: %q, want %q", tc.header, tc.values, got, tc.want)
		}
	}
}

// A tokens file's token names its owner; any other token, or none, is refused with the plain challenge.
func TestTokensFile(t *testing.T) {
	b := New(Options{Tokens: tokenOwners{"e2bmcp_carol": "carol"}, Log: slog.New(slog.NewTextHandler(t.Output(), nil))})
	for header, want := range map[string]string{
		"Bearer e2bmcp_carol":   "carol",
		"bearer  e2bmcp_carol ": "carol",
		"Bearer e2bmcp_dave":    "",
		"Basic e2bmcp_carol":    "",
		"e2bmcp_carol":          "",
		"":                      "",
	} {
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		r.Header.Set("Authorization", header)
		w := httptest.NewRecorder()
		owner, ok := b.Owner(w, r)
		switch {
		case want != "" && (!ok || owner != want):
			t.Errorf("%q: owner %q, let in %v; want %s", header, owner, ok, want)
		case want == "" && (ok || w.Code != http.StatusUnauthorized || w.Header().Get("WWW-Authenticate") != `Bearer realm="e2b-mcp"`):
			t.Errorf("%q: let in %v as %q, %d %q; want 401", header, ok, owner, w.Code, w.Header().Get("WWW-Authenticate"))
		}
	}
}

// The refusals' budget is per address (every port of an IPv4 address, every address of an IPv6 /64), refills
// with time, and its table stays bounded however many addresses send refused tokens; the log takes a bounded
// number of refusals whatever the addresses.
func TestRefusalBudget(t *testing.T) {
	clock := clocktest.New(time.Now())
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
	clock.Advance(refusalEvery)
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
