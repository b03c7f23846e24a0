package pages

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/e2b-mcp/e2b-mcp/credentials"
	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/state"
)

// The connect page is where a member pastes their own E2B API key, so that nobody else ever holds it: the
// server verifies it with E2B and stores it under the member's identity, in the server's secret store. A call
// that finds no key for its owner gives a link to the page (the owner's live one, if they have one); the link is
// single-use, expires after ConnectLinkTTL and is bound to that owner: whoever opens it must prove to be that
// owner before the form is shown, by signing in with the team's identity provider (with OAuth), by pasting their
// bearer token (with a tokens file only), or by being on this machine (stdio, and HTTP on loopback without
// authentication). The page is plain HTML forms, with no JavaScript; the key and every token travel in POST
// bodies, never in a URL; the form carries a CSRF token tied to a SameSite=Lax cookie.

// ConnectLinkTTL is how long a connect link can be used.
const ConnectLinkTTL = 15 * time.Minute

// PathConnect is the connect page's path prefix: PathConnect + link ID. PathConnectCallback is where the identity
// provider sends the browser back to (the sign-in's redirect URI, at the page's origin), PathConnectSubmit where
// the form is posted.
const (
	PathConnect         = "/connect/"
	PathConnectCallback = PathConnect + "callback"
	PathConnectSubmit   = PathConnect + "submit"
)

const (
	connectCookie = "e2bmcp_connect"
	// maxConnectForm bounds a form POST: a key, a token and a CSRF token.
	maxConnectForm = 16 << 10
	// maxPendingConnects bounds the unexpired links a store holds: with maxLinksPerOwner, it takes 2,500 members
	// connecting at once to reach it.
	maxPendingConnects = 10000
	// maxLinksPerOwner is an owner's live links (one per replica, as a rule); a new one takes the oldest's place.
	maxLinksPerOwner = 4
	// maxSessionsPerLink is the browsers that can have a link open at once; a new one takes the place of the
	// oldest, one that has not signed in first. A browser that opens the link again keeps its own.
	maxSessionsPerLink = 4
	// MinLinkLife is how long an owner's live link must still work to be given again, rather than a new one: an
	// owner whose every call finds no key makes a link per ConnectLinkTTL-MinLinkLife at most, on each replica.
	MinLinkLife = ConnectLinkTTL / 2
)

// ConnectLimits are the bounds of the connect store.
var ConnectLimits = state.ConnectLimits{Links: maxPendingConnects, LinksPerOwner: maxLinksPerOwner,
	SessionsPerLink: maxSessionsPerLink}

// Proof is how the page knows that the person at the browser is the link's owner.
type Proof string

// The proofs of a link's owner.
const (
	ProveLocal  Proof = "local"  // the page is only reachable from this machine, whose user is the owner
	ProveToken  Proof = "token"  // the member pastes their e2b-mcp bearer token
	ProveSignIn Proof = "signin" // the member signs in with the identity provider (OpenID Connect, PKCE)
)

// SignIn signs a member in at the team's identity provider (oauth.SignIn): AuthURL is where the browser goes,
// Owner the owner the provider's answer names.
type SignIn interface {
	AuthURL(ctx context.Context, state, nonce, verifier string) (string, error)
	Owner(ctx context.Context, code, verifier, nonce string) (string, error)
}

// ConnectOptions are what the connect page needs.
type ConnectOptions struct {
	Prove   Proof
	Secrets credentials.SecretStore // where a member's key is stored
	// Verify asks E2B whether key is a key it accepts.
	Verify func(ctx context.Context, key string) error
	Tokens TokenOwners // ProveToken's
	SignIn SignIn      // ProveSignIn's
	Now    func() time.Time
	Store  state.ConnectStore
	Log    *slog.Logger
}

// Connect runs the connect page and the links to it. The links and the browsers' sessions are in a
// state.ConnectStore: this process's memory, or the database that replicas share, so that a link made by one
// replica works on every replica behind a load balancer (and is spent on all of them at once). The store keeps
// hashes of link IDs and cookies only; what else a session needs that must stay secret (the form's CSRF token,
// the sign-in's OAuth state, PKCE verifier and nonce) is derived from its cookie (fromCookie), which only the
// member's browser holds.
type Connect struct {
	prove   Proof
	secrets credentials.SecretStore
	verify  func(ctx context.Context, key string) error
	tokens  TokenOwners // ProveToken
	signIn  SignIn      // ProveSignIn
	now     func() time.Time
	store   state.ConnectStore
	log     *slog.Logger

	mu   sync.Mutex
	base string // the page's origin, e.g. https://mcp.example.com; "" until known
	// secureCookie marks the cookie Secure (the page is served over https).
	secureCookie bool
	waiters      map[string]chan struct{} // owner → closed when a key is stored for them through this process
	// live is each owner's newest link made by this process, given again while it has MinLinkLife to live. Only
	// this process knows a link's ID: the store keeps its hash.
	live map[string]liveLink
}

type liveLink struct {
	id      string
	expires time.Time
}

// NewConnect makes the page; it serves links once its origin is known (SetBase).
func NewConnect(o ConnectOptions) *Connect {
	return &Connect{
		prove: o.Prove, secrets: o.Secrets, verify: o.Verify, tokens: o.Tokens, signIn: o.SignIn, now: o.Now,
		store: o.Store, log: o.Log, waiters: map[string]chan struct{}{}, live: map[string]liveLink{},
	}
}

// SetBase sets the page's origin once it is known (the listener's address, or the public URL).
func (c *Connect) SetBase(base string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.base = strings.TrimSuffix(base, "/")
	c.secureCookie = strings.HasPrefix(base, "https://")
}

// Link returns the URL of a link for owner, and when it expires: the owner's live link if it still works for
// MinLinkLife, else a new one.
func (c *Connect) Link(owner string) (string, time.Time, error) {
	c.mu.Lock()
	base := c.base
	live, ok := c.live[owner]
	c.mu.Unlock()
	if base == "" {
		return "", time.Time{}, errors.New("the connect page is not being served")
	}
	now := c.now()
	if ok && live.expires.Sub(now) >= MinLinkLife {
		// Still there unless it was spent or made room for another of the owner's, on any replica.
		_, err := c.store.ConnectLink(state.ConnectKeyOf(live.id), now)
		if err == nil {
			return base + PathConnect + live.id, live.expires, nil
		}
		if !errors.Is(err, state.ErrNotFound) {
			return "", time.Time{}, err
		}
	}
	id, expires := RandomID(), now.Add(ConnectLinkTTL)
	if err := c.store.AddConnectLink(state.ConnectKeyOf(id), state.ConnectLink{Owner: owner,
		Expires: expires}, now); err != nil {
		return "", time.Time{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for o, l := range c.live {
		if !now.Before(l.expires) {
			delete(c.live, o)
		}
	}
	c.live[owner] = liveLink{id: id, expires: expires}
	return base + PathConnect + id, expires, nil
}

// WaitForKey waits until a key is stored for owner through this process's page (or, checked every two seconds,
// by any other means: another replica's page, `e2b-mcp auth login`), ctx ends, or limit passes. It reports
// whether a key is there.
func (c *Connect) WaitForKey(ctx context.Context, owner string, limit time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		if _, err := credentials.APIKey(c.secrets, owner); err == nil {
			return true
		}
		c.mu.Lock()
		ch, ok := c.waiters[owner]
		if !ok {
			ch = make(chan struct{})
			c.waiters[owner] = ch
		}
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			return false
		case <-ch:
		case <-tick.C:
		}
	}
}

// stored wakes whoever waits for owner's key.
func (c *Connect) stored(owner string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ch, ok := c.waiters[owner]; ok {
		close(ch)
		delete(c.waiters, owner)
	}
}

// ServeHTTP serves the page: GET PathConnect+ID (the link), GET PathConnectCallback (back from the identity
// provider), POST PathConnectSubmit (the form).
func (c *Connect) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	setPageHeaders(w.Header())
	switch {
	case r.URL.Path == PathConnectSubmit:
		if r.Method != http.MethodPost {
			c.page(w, http.StatusMethodNotAllowed, pageMessage{Title: "Not here", Text: "Submit the form on the connect page."})
			return
		}
		c.submit(w, r)
	case r.Method != http.MethodGet && r.Method != http.MethodHead:
		c.page(w, http.StatusMethodNotAllowed, pageMessage{Title: "Not here", Text: "Open the link you were given."})
	case r.URL.Path == PathConnectCallback && c.signIn != nil:
		c.callback(w, r)
	default:
		c.open(w, r, strings.TrimPrefix(r.URL.Path, PathConnect))
	}
}

var (
	errLinkGone = pageMessage{Title: "This link cannot be used",
		Text: "The link has expired or was already used. Call the tool again from your assistant to get a new one."}
	errStale = pageMessage{Title: "Refused",
		Text: "The form is stale or did not come from this page. Open the link from your assistant again."}
	errSignInUnknown = pageMessage{Title: "Sign-in not recognised",
		Text: "This sign-in was not started from this browser, or took too long. Open the link from your assistant again."}
)

// storeFailed answers a request the connect store could not serve: a link or session that is not there (or
// expired, or was spent) gets gone, anything else (the database out of reach, too many visits) a page asking to
// try again, and the log says why.
func (c *Connect) storeFailed(w http.ResponseWriter, err error, gone pageMessage, goneStatus int) {
	switch {
	case errors.Is(err, state.ErrNotFound):
		c.page(w, goneStatus, gone)
	case errors.Is(err, state.ErrTooManyConnects):
		c.page(w, http.StatusServiceUnavailable, pageMessage{Title: "Busy", Text: "Too many members are connecting at the " +
			"moment; try again in a few minutes."})
	default:
		c.log.Error("connect page: the store of links and sessions failed", "error", err)
		c.page(w, http.StatusServiceUnavailable, pageMessage{Title: "Try again", Text: "The server could not reach its " +
			"store; try again in a moment."})
	}
}

// open answers a link: straight to the form when this machine vouches for the owner or the form asks for the
// member's token, else first to the identity provider. A browser that already has a session of this link (its
// cookie names one) carries on with it, so that opening the link again takes no room of the link's; any other
// browser gets a session of its own, under a cookie of its own.
func (c *Connect) open(w http.ResponseWriter, r *http.Request, id string) {
	now := c.now()
	link := state.ConnectKeyOf(id)
	l, err := c.store.ConnectLink(link, now)
	if err != nil {
		c.storeFailed(w, err, errLinkGone, http.StatusNotFound)
		return
	}
	cookie, sess, err := c.session(r)
	had := err == nil && sess.Link == link
	if !had {
		cookie = RandomID()
		sess = state.ConnectSession{Link: link, SigningIn: c.prove == ProveSignIn, Expires: now.Add(ConnectLinkTTL)}
		if c.prove == ProveLocal {
			sess.Owner = l.Owner
		}
	}
	if sess.SigningIn {
		to, err := c.signIn.AuthURL(r.Context(), fromCookie(cookie, forState), fromCookie(cookie, forNonce),
			fromCookie(cookie, forVerifier))
		if err != nil {
			c.page(w, http.StatusBadGateway, pageMessage{Title: "Sign-in unavailable",
				Text: "The team's identity provider cannot be reached; try again in a moment."})
			return
		}
		if had || c.keep(w, cookie, sess) {
			http.Redirect(w, r, to, http.StatusFound)
		}
		return
	}
	if had || c.keep(w, cookie, sess) {
		c.form(w, l.Owner, cookie)
	}
}

// keep stores a browser session under its cookie and sets the cookie; false (with the answer written) when the
// store refused it. For a sign-in in progress, the cookie ties the way back from the identity provider to this
// browser (no login CSRF).
func (c *Connect) keep(w http.ResponseWriter, cookie string, sess state.ConnectSession) bool {
	if err := c.store.AddConnectSession(state.ConnectKeyOf(cookie), sess, c.now()); err != nil {
		c.storeFailed(w, err, errLinkGone, http.StatusNotFound)
		return false
	}
	c.mu.Lock()
	secure := c.secureCookie
	c.mu.Unlock()
	http.SetCookie(w, &http.Cookie{
		Name: connectCookie, Value: cookie, Path: PathConnect, MaxAge: int(ConnectLinkTTL / time.Second),
		HttpOnly: true, Secure: secure,
		// Lax, not Strict: the way back from the identity provider is a navigation from another site. Lax still
		// keeps the cookie off every cross-site POST.
		SameSite: http.SameSiteLaxMode,
	})
	return true
}

// session is the browser's session, by its cookie; an error wrapping state.ErrNotFound when it has none.
func (c *Connect) session(r *http.Request) (string, state.ConnectSession, error) {
	ck, err := r.Cookie(connectCookie)
	if err != nil {
		return "", state.ConnectSession{}, fmt.Errorf("no connect cookie: %w", state.ErrNotFound)
	}
	sess, err := c.store.ConnectSession(state.ConnectKeyOf(ck.Value), c.now())
	return ck.Value, sess, err
}

// callback completes the sign-in: the state must be the one this browser's cookie gives, the ID token must be
// the provider's, for this page, with the nonce of this sign-in, and name the link's owner.
func (c *Connect) callback(w http.ResponseWriter, r *http.Request) {
	cookie, sess, err := c.session(r)
	if err != nil {
		c.storeFailed(w, err, errSignInUnknown, http.StatusBadRequest)
		return
	}
	got := r.URL.Query().Get("state")
	if !sess.SigningIn || got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(fromCookie(cookie, forState))) != 1 {
		c.page(w, http.StatusBadRequest, errSignInUnknown)
		return
	}
	l, err := c.store.ConnectLink(sess.Link, c.now())
	if err != nil {
		c.storeFailed(w, err, errLinkGone, http.StatusNotFound)
		return
	}
	if e := r.URL.Query().Get("error"); e != "" {
		c.page(w, http.StatusForbidden, pageMessage{Title: "Sign-in failed", Text: "The identity provider said: " + e})
		return
	}
	owner, err := c.signIn.Owner(r.Context(), r.URL.Query().Get("code"), fromCookie(cookie, forVerifier),
		fromCookie(cookie, forNonce))
	if err != nil {
		c.page(w, http.StatusForbidden, pageMessage{Title: "Sign-in failed", Text: "The sign-in could not be checked. Open " +
			"the link from your assistant again."})
		return
	}
	if owner != l.Owner {
		c.page(w, http.StatusForbidden, pageMessage{Title: "This link is not yours",
			Text: "You signed in as " + owner + ", but this link was made for another member. Ask your own " +
				"assistant for a link."})
		return
	}
	// A new session for the form: the sign-in's is spent.
	if err := c.store.DeleteConnectSession(state.ConnectKeyOf(cookie)); err != nil {
		c.storeFailed(w, err, errSignInUnknown, http.StatusBadRequest)
		return
	}
	form := RandomID()
	if c.keep(w, form, state.ConnectSession{Link: sess.Link, Owner: owner, Expires: c.now().Add(ConnectLinkTTL)}) {
		c.form(w, owner, form)
	}
}

// submit takes the form: same origin, the cookie's session, its CSRF token, the member proven, the key of E2B's
// form and accepted by E2B; then the link is spent and the key stored under the link's owner.
func (c *Connect) submit(w http.ResponseWriter, r *http.Request) {
	if !c.sameOrigin(r) {
		c.page(w, http.StatusForbidden, pageMessage{Title: "Refused", Text: "The form was sent from another site."})
		return
	}
	if !readForm(w, r, maxConnectForm, c.page) {
		return
	}
	cookie, sess, err := c.session(r)
	if err != nil {
		c.storeFailed(w, err, errStale, http.StatusForbidden)
		return
	}
	if sess.SigningIn || subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")),
		[]byte(fromCookie(cookie, forCSRF))) != 1 {
		c.page(w, http.StatusForbidden, errStale)
		return
	}
	l, err := c.store.ConnectLink(sess.Link, c.now())
	if err != nil {
		c.storeFailed(w, err, errLinkGone, http.StatusNotFound)
		return
	}
	owner := sess.Owner
	if c.prove == ProveToken {
		var ok bool
		owner, ok = c.tokens.Owner(strings.TrimSpace(r.PostForm.Get("token")))
		if !ok || owner != l.Owner {
			c.formError(w, l.Owner, cookie, "That is not the e2b-mcp token of "+l.Owner+".")
			return
		}
	}
	if owner == "" || owner != l.Owner {
		c.page(w, http.StatusForbidden, pageMessage{Title: "This link is not yours", Text: "This link was made for " +
			"another member."})
		return
	}
	key := strings.TrimSpace(r.PostForm.Get("key"))
	if err := credentials.CheckAPIKeyForm(key); err != nil {
		c.formError(w, owner, cookie, "That is not an E2B API key: it starts with e2b_ followed by letters and digits.")
		return
	}
	if err := c.verify(r.Context(), key); err != nil {
		msg := "E2B could not be reached to check the key; try again in a moment."
		if errors.Is(err, e2b.ErrUnauthorized) {
			msg = "E2B does not accept that key. Copy it again from the E2B dashboard."
		}
		c.formError(w, owner, cookie, msg)
		return
	}
	// Spend the link before storing, so that two submits at once (on any replicas) cannot both store.
	if _, err := c.store.SpendConnectLink(sess.Link, c.now()); err != nil {
		c.storeFailed(w, err, errLinkGone, http.StatusNotFound)
		return
	}
	if err := credentials.SetAPIKey(c.secrets, owner, key); err != nil {
		c.log.Error("connect page: storing a member's key", "owner", owner, "error", err)
		c.page(w, http.StatusInternalServerError, pageMessage{Title: "Not stored",
			Text: "The key is valid but could not be stored; the server's log says why. Ask the operator."})
		return
	}
	c.stored(owner)
	c.page(w, http.StatusOK, pageMessage{Title: "Connected",
		Text: fmt.Sprintf("Your E2B API key ending in %s is stored for %s. You can close this page; your "+
			"assistant carries on.", credentials.LastFour(key), owner)})
}

// sameOrigin refuses a POST whose Origin (or, without one, Referer) names another site. Browsers send Origin on
// every cross-site POST, so the check never rests on the cookie alone.
func (c *Connect) sameOrigin(r *http.Request) bool {
	c.mu.Lock()
	base := c.base
	c.mu.Unlock()
	o := postOrigin(r)
	return o == "" || o == base
}
