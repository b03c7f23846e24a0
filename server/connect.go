package server

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/e2b-mcp/e2b-mcp/credentials"
	"github.com/e2b-mcp/e2b-mcp/e2b"
)

// The connect page is where a member pastes their own E2B API key, so that nobody else ever holds it: the
// server verifies it with E2B and stores it under the member's identity, in the server's secret store. A call
// that finds no key for its owner makes a link to the page; the link is single-use, expires after ConnectLinkTTL
// and is bound to that owner: whoever opens it must prove to be that owner before the form is shown, by signing
// in with the team's identity provider (with OAuth), by pasting their bearer token (with a tokens file only), or
// by being on this machine (stdio, and HTTP on loopback without authentication). The page is plain HTML forms,
// with no JavaScript; the key and every token travel in POST bodies, never in a URL; the form carries a CSRF
// token tied to a SameSite=Lax cookie.

// ConnectLinkTTL is how long a connect link can be used.
const ConnectLinkTTL = 15 * time.Minute

// PathConnect is the connect page's path prefix: PathConnect + link ID.
const PathConnect = "/connect/"

const (
	pathConnectCallback = PathConnect + "callback" // the identity provider's redirect back to the page
	pathConnectSubmit   = PathConnect + "submit"   // the form's POST
	connectCookie       = "e2bmcp_connect"
	// maxConnectForm bounds a form POST: a key, a token and a CSRF token.
	maxConnectForm = 16 << 10
	// maxPendingConnects bounds the links and browser sessions held in memory.
	maxPendingConnects = 10000
)

// How the page knows that the person at the browser is the link's owner.
const (
	proveLocal  = "local"  // the page is only reachable from this machine, whose user is the owner
	proveToken  = "token"  // the member pastes their e2b-mcp bearer token
	proveSignIn = "signin" // the member signs in with the identity provider (OpenID Connect, PKCE)
)

// connectLink is one link to the page.
type connectLink struct {
	owner   string
	expires time.Time
}

// connectSession is one browser's visit, after its owner was established: the cookie holds its ID, the form its
// CSRF token.
type connectSession struct {
	link    string
	owner   string // "" until proven (proveToken proves it at submit)
	csrf    string
	expires time.Time
	// Sign-in in progress (proveSignIn): the PKCE verifier and the nonce of the authorization request.
	verifier, nonce string
}

// connector runs the connect page and the links to it.
type connector struct {
	prove   string
	secrets credentials.SecretStore
	verify  func(ctx context.Context, key string) error
	tokens  *credentials.Tokens // proveToken
	signIn  *signIn             // proveSignIn
	now     func() time.Time

	mu   sync.Mutex
	base string // the page's origin, e.g. https://mcp.example.com; "" until known
	// secureCookie marks the cookie Secure (the page is served over https).
	secureCookie bool
	links        map[string]connectLink
	sessions     map[string]*connectSession // cookie value → session; sign-ins in progress are keyed by state too
	waiters      map[string]chan struct{}   // owner → closed when a key is stored for them
}

func newConnector(prove string, secrets credentials.SecretStore, verify func(context.Context, string) error, now func() time.Time) *connector {
	return &connector{
		prove: prove, secrets: secrets, verify: verify, now: now,
		links: map[string]connectLink{}, sessions: map[string]*connectSession{}, waiters: map[string]chan struct{}{},
	}
}

// setBase sets the page's origin once it is known (the listener's address, or the public URL).
func (c *connector) setBase(base string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.base = strings.TrimSuffix(base, "/")
	c.secureCookie = strings.HasPrefix(base, "https://")
}

func randomID() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand never fails on supported platforms
	return base64.RawURLEncoding.EncodeToString(b)
}

// newLink makes a link for owner and returns its URL.
func (c *connector) newLink(owner string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.base == "" {
		return "", errors.New("the connect page is not being served")
	}
	c.sweepLocked()
	if len(c.links) >= maxPendingConnects {
		return "", errors.New("too many connect links are waiting; try again in a few minutes")
	}
	id := randomID()
	c.links[id] = connectLink{owner: owner, expires: c.now().Add(ConnectLinkTTL)}
	return c.base + PathConnect + id, nil
}

// sweepLocked forgets expired links and sessions.
func (c *connector) sweepLocked() {
	now := c.now()
	for id, l := range c.links {
		if !now.Before(l.expires) {
			delete(c.links, id)
		}
	}
	for id, s := range c.sessions {
		if !now.Before(s.expires) {
			delete(c.sessions, id)
		}
	}
}

// link returns an unexpired, unused link.
func (c *connector) link(id string) (connectLink, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.links[id]
	if !ok || !c.now().Before(l.expires) {
		return connectLink{}, false
	}
	return l, true
}

// waitForKey waits until a key is stored for owner through the page (or, checked every few seconds, by any
// other means, such as `e2b-mcp auth login`), ctx ends, or limit passes. It reports whether a key is there.
func (c *connector) waitForKey(ctx context.Context, owner string, limit time.Duration) bool {
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
func (c *connector) stored(owner string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ch, ok := c.waiters[owner]; ok {
		close(ch)
		delete(c.waiters, owner)
	}
}

// ServeHTTP serves the page: GET PathConnect+ID (the link), GET pathConnectCallback (back from the identity
// provider), POST pathConnectSubmit (the form).
func (c *connector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin") // not no-referrer: that makes the form's Origin "null"
	h.Set("X-Content-Type-Options", "nosniff")
	switch {
	case r.URL.Path == pathConnectSubmit:
		if r.Method != http.MethodPost {
			c.page(w, http.StatusMethodNotAllowed, pageMessage{Title: "Not here", Text: "Submit the form on the connect page."})
			return
		}
		c.submit(w, r)
	case r.Method != http.MethodGet && r.Method != http.MethodHead:
		c.page(w, http.StatusMethodNotAllowed, pageMessage{Title: "Not here", Text: "Open the link you were given."})
	case r.URL.Path == pathConnectCallback && c.signIn != nil:
		c.callback(w, r)
	default:
		c.open(w, r, strings.TrimPrefix(r.URL.Path, PathConnect))
	}
}

var errLinkGone = pageMessage{Title: "This link cannot be used",
	Text: "The link has expired or was already used. Call the tool again from your assistant to get a new one."}

// open answers a link: straight to the form when this machine vouches for the owner or the form asks for the
// member's token, else first to the identity provider.
func (c *connector) open(w http.ResponseWriter, r *http.Request, id string) {
	l, ok := c.link(id)
	if !ok {
		c.page(w, http.StatusNotFound, errLinkGone)
		return
	}
	sess := &connectSession{link: id, csrf: randomID(), expires: c.now().Add(ConnectLinkTTL)}
	if c.prove == proveLocal {
		sess.owner = l.owner
	}
	if c.prove == proveSignIn {
		sess.verifier, sess.nonce = randomID(), randomID()
		state := randomID()
		to, err := c.signIn.authURL(r.Context(), state, sess.nonce, sess.verifier)
		if err != nil {
			c.page(w, http.StatusBadGateway, pageMessage{Title: "Sign-in unavailable",
				Text: "The team's identity provider cannot be reached; try again in a moment."})
			return
		}
		c.keep(state, sess, w)
		http.Redirect(w, r, to, http.StatusFound)
		return
	}
	c.keep(randomID(), sess, w)
	c.form(w, l.owner, sess)
}

// keep stores a browser session under id and sets the cookie that names it. For a sign-in in progress, id is
// also the OAuth state, and the cookie ties the callback to this browser (no login CSRF).
func (c *connector) keep(id string, sess *connectSession, w http.ResponseWriter) {
	c.mu.Lock()
	c.sweepLocked()
	if len(c.sessions) < maxPendingConnects {
		c.sessions[id] = sess
	}
	secure := c.secureCookie
	c.mu.Unlock()
	http.SetCookie(w, &http.Cookie{
		Name: connectCookie, Value: id, Path: PathConnect, MaxAge: int(ConnectLinkTTL / time.Second),
		HttpOnly: true, Secure: secure,
		// Lax, not Strict: the way back from the identity provider is a navigation from another site. Lax still
		// keeps the cookie off every cross-site POST.
		SameSite: http.SameSiteLaxMode,
	})
}

// session is the browser's session, by its cookie.
func (c *connector) session(r *http.Request) (string, *connectSession, bool) {
	ck, err := r.Cookie(connectCookie)
	if err != nil {
		return "", nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.sessions[ck.Value]
	if !ok || !c.now().Before(s.expires) {
		return "", nil, false
	}
	return ck.Value, s, true
}

// callback completes the sign-in: the state must be the one this browser's cookie holds, the ID token must be
// the provider's, for this page, with the nonce of this sign-in, and name the link's owner.
func (c *connector) callback(w http.ResponseWriter, r *http.Request) {
	id, sess, ok := c.session(r)
	state := r.URL.Query().Get("state")
	if !ok || state == "" || subtle.ConstantTimeCompare([]byte(state), []byte(id)) != 1 || sess.verifier == "" {
		c.page(w, http.StatusBadRequest, pageMessage{Title: "Sign-in not recognised",
			Text: "This sign-in was not started from this browser, or took too long. Open the link from your assistant again."})
		return
	}
	l, ok := c.link(sess.link)
	if !ok {
		c.page(w, http.StatusNotFound, errLinkGone)
		return
	}
	if e := r.URL.Query().Get("error"); e != "" {
		c.page(w, http.StatusForbidden, pageMessage{Title: "Sign-in failed", Text: "The identity provider said: " + e})
		return
	}
	owner, err := c.signIn.owner(r.Context(), r.URL.Query().Get("code"), sess.verifier, sess.nonce)
	if err != nil {
		c.page(w, http.StatusForbidden, pageMessage{Title: "Sign-in failed", Text: "The sign-in could not be checked. Open the link from your assistant again."})
		return
	}
	if owner != l.owner {
		c.page(w, http.StatusForbidden, pageMessage{Title: "This link is not yours",
			Text: "You signed in as " + owner + ", but this link was made for another member. Ask your own assistant for a link."})
		return
	}
	// A new session for the form: the sign-in's state is spent.
	c.mu.Lock()
	delete(c.sessions, id)
	c.mu.Unlock()
	form := &connectSession{link: sess.link, owner: owner, csrf: randomID(), expires: c.now().Add(ConnectLinkTTL)}
	c.keep(randomID(), form, w)
	c.form(w, owner, form)
}

// submit takes the form: same origin, the cookie's session, its CSRF token, the member proven, the key of E2B's
// form and accepted by E2B; then the key is stored under the link's owner and the link is spent.
func (c *connector) submit(w http.ResponseWriter, r *http.Request) {
	if !c.sameOrigin(r) {
		c.page(w, http.StatusForbidden, pageMessage{Title: "Refused", Text: "The form was sent from another site."})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxConnectForm)
	if err := r.ParseForm(); err != nil {
		c.page(w, http.StatusBadRequest, pageMessage{Title: "Refused", Text: "The form could not be read."})
		return
	}
	_, sess, ok := c.session(r)
	if !ok || subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(sess.csrf)) != 1 {
		c.page(w, http.StatusForbidden, pageMessage{Title: "Refused",
			Text: "The form is stale or did not come from this page. Open the link from your assistant again."})
		return
	}
	l, ok := c.link(sess.link)
	if !ok {
		c.page(w, http.StatusNotFound, errLinkGone)
		return
	}
	owner := sess.owner
	if c.prove == proveToken {
		owner, ok = c.tokens.Owner(strings.TrimSpace(r.PostForm.Get("token")))
		if !ok || owner != l.owner {
			c.formError(w, l.owner, sess, "That is not the e2b-mcp token of "+l.owner+".")
			return
		}
	}
	if owner == "" || owner != l.owner {
		c.page(w, http.StatusForbidden, pageMessage{Title: "This link is not yours", Text: "This link was made for another member."})
		return
	}
	key := strings.TrimSpace(r.PostForm.Get("key"))
	if err := credentials.CheckAPIKeyForm(key); err != nil {
		c.formError(w, owner, sess, "That is not an E2B API key: it starts with e2b_ followed by letters and digits.")
		return
	}
	if err := c.verify(r.Context(), key); err != nil {
		msg := "E2B could not be reached to check the key; try again in a moment."
		if errors.Is(err, e2b.ErrUnauthorized) {
			msg = "E2B does not accept that key. Copy it again from the E2B dashboard."
		}
		c.formError(w, owner, sess, msg)
		return
	}
	// Spend the link before storing, so that two submits at once cannot both store.
	c.mu.Lock()
	_, unused := c.links[sess.link]
	delete(c.links, sess.link)
	for id, s := range c.sessions {
		if s.link == sess.link {
			delete(c.sessions, id)
		}
	}
	c.mu.Unlock()
	if !unused {
		c.page(w, http.StatusNotFound, errLinkGone)
		return
	}
	if err := credentials.SetAPIKey(c.secrets, owner, key); err != nil {
		c.page(w, http.StatusInternalServerError, pageMessage{Title: "Not stored",
			Text: "The key is valid but could not be stored; the server's log says why. Ask the operator."})
		return
	}
	c.stored(owner)
	c.page(w, http.StatusOK, pageMessage{Title: "Connected",
		Text: fmt.Sprintf("Your E2B API key ending in %s is stored for %s. You can close this page; your assistant carries on.", credentials.LastFour(key), owner)})
}

// sameOrigin refuses a POST whose Origin (or, without one, Referer) names another site. Browsers send Origin on
// every cross-site POST, so the check never rests on the cookie alone.
func (c *connector) sameOrigin(r *http.Request) bool {
	c.mu.Lock()
	base := c.base
	c.mu.Unlock()
	o := r.Header.Get("Origin")
	if o == "" {
		if ref, err := url.Parse(r.Header.Get("Referer")); err == nil && ref.Host != "" {
			o = ref.Scheme + "://" + ref.Host
		}
	}
	return o == "" || o == base
}
