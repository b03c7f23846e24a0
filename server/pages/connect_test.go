package pages

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/server/oauth"
	"github.com/e2b-mcp/e2b-mcp/server/oauth/oauthtest"
	"github.com/e2b-mcp/e2b-mcp/state"
)

// testConnect is a connect page of proof, its store in memory, at http://127.0.0.1:1.
func testConnect(t testing.TB, prove Proof, signIn SignIn, store state.ConnectStore) *Connect {
	t.Helper()
	if store == nil {
		store = state.NewMemoryConnects(ConnectLimits)
	}
	c := NewConnect(ConnectOptions{Prove: prove, SignIn: signIn, Now: time.Now, Store: store,
		Log: slog.New(slog.NewTextHandler(t.Output(), nil))})
	c.SetBase("http://127.0.0.1:1")
	return c
}

// Whatever the connect page shows that is not its own (an owner's name, what the identity provider said) is
// escaped: markup in it never becomes the page's.
func TestConnectPageEscapes(t *testing.T) {
	const markup = `<script>alert("x")</script><img src=x onerror=alert(1)>`
	now := time.Now()
	store := state.NewMemoryConnects(ConnectLimits)
	link := state.ConnectKeyOf("link")
	if err := store.AddConnectLink(link, state.ConnectLink{Owner: markup, Expires: now.Add(time.Minute)}, now); err != nil {
		t.Fatal(err)
	}
	const signingIn = "signing-in-cookie"
	if err := store.AddConnectSession(state.ConnectKeyOf(signingIn), state.ConnectSession{Link: link, SigningIn: true,
		Expires: now.Add(time.Minute)}, now); err != nil {
		t.Fatal(err)
	}
	check := func(name string, c *Connect, req *http.Request, wantStatus int) {
		t.Helper()
		w := httptest.NewRecorder()
		c.ServeHTTP(w, req)
		body := w.Body.String()
		if w.Code != wantStatus {
			t.Fatalf("%s: %d, want %d\n%s", name, w.Code, wantStatus, body)
		}
		if strings.Contains(body, "<script") || strings.Contains(body, "<img") {
			t.Errorf("%s: markup came through unescaped:\n%s", name, body)
		}
		if !strings.Contains(body, "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;") {
			t.Errorf("%s: the escaped text is not in the page:\n%s", name, body)
		}
	}

	local := testConnect(t, ProveLocal, nil, store)
	check("the form for an owner named with markup", local, httptest.NewRequest(http.MethodGet, PathConnect+"link", nil), http.StatusOK)

	viaIdP := testConnect(t, ProveSignIn, &oauth.SignIn{}, store)
	callback := PathConnectCallback + "?state=" + url.QueryEscape(fromCookie(signingIn, forState)) + "&error=" + url.QueryEscape(markup)
	check("the identity provider's error", viaIdP, withCookie(httptest.NewRequest(http.MethodGet, callback, nil), signingIn), http.StatusForbidden)
}

// On its way to the identity provider, a browser that opens its link again is sent with the same sign-in (the
// same state); another browser gets one of its own.
func TestConnectSignInReopenedKeepsTheBrowsersSignIn(t *testing.T) {
	iss := oauthtest.NewIssuer(t)
	store := state.NewMemoryConnects(ConnectLimits)
	c := testConnect(t, ProveSignIn, oauth.NewSignIn(oauth.NewAuthServer(iss.URL, http.DefaultClient, nil), "page",
		"http://127.0.0.1:1"+PathConnectCallback, "sub"), store)
	link, _, err := c.Link("alice")
	if err != nil {
		t.Fatal(err)
	}
	path := strings.TrimPrefix(link, "http://127.0.0.1:1")
	open := func(cookie string) (string, string) {
		t.Helper()
		req := httptest.NewRequest(http.MethodGet, path, nil)
		if cookie != "" {
			req = withCookie(req, cookie)
		}
		w := httptest.NewRecorder()
		c.ServeHTTP(w, req)
		to, _ := url.Parse(w.Header().Get("Location"))
		if w.Code != http.StatusFound || !strings.HasPrefix(to.String(), iss.URL+"/auth") {
			t.Fatalf("GET %s: %d to %q", path, w.Code, to)
		}
		set := ""
		for _, ck := range w.Result().Cookies() {
			if ck.Name == connectCookie {
				set = ck.Value
			}
		}
		return to.Query().Get("state"), set
	}
	state1, cookie := open("")
	if cookie == "" {
		t.Fatal("no cookie for the sign-in")
	}
	if again, set := open(cookie); again != state1 || (set != "" && set != cookie) {
		t.Error("the browser that opened the link again was sent with another sign-in")
	}
	if other, set := open(""); other == state1 || set == cookie {
		t.Error("a second browser was sent with the first one's sign-in")
	}
}

// The way back from the identity provider counts only in the browser that started the sign-in: a callback
// without that browser's cookie, or with another state, is refused (no login CSRF, no session fixation). The
// state is derived from the cookie, not the cookie itself, which never leaves the browser.
func TestConnectCallbackNeedsTheBrowsersState(t *testing.T) {
	now := time.Now()
	store := state.NewMemoryConnects(ConnectLimits)
	c := testConnect(t, ProveSignIn, &oauth.SignIn{}, store)
	link := state.ConnectKeyOf("link")
	if err := store.AddConnectLink(link, state.ConnectLink{Owner: "alice", Expires: now.Add(time.Minute)}, now); err != nil {
		t.Fatal(err)
	}
	for cookie, signingIn := range map[string]bool{"cookie-1": true, "form-cookie": false} {
		if err := store.AddConnectSession(state.ConnectKeyOf(cookie), state.ConnectSession{Link: link, Owner: "", SigningIn: signingIn,
			Expires: now.Add(time.Minute)}, now); err != nil {
			t.Fatal(err)
		}
	}
	callback := func(state string) string { return PathConnectCallback + "?code=x&state=" + url.QueryEscape(state) }
	for name, req := range map[string]*http.Request{
		"no cookie":                   httptest.NewRequest(http.MethodGet, callback(fromCookie("cookie-1", forState)), nil),
		"another state":               withCookie(httptest.NewRequest(http.MethodGet, callback(fromCookie("cookie-2", forState)), nil), "cookie-1"),
		"another cookie":              withCookie(httptest.NewRequest(http.MethodGet, callback(fromCookie("cookie-1", forState)), nil), "cookie-2"),
		"the cookie as the state":     withCookie(httptest.NewRequest(http.MethodGet, callback("cookie-1"), nil), "cookie-1"),
		"another value of the cookie": withCookie(httptest.NewRequest(http.MethodGet, callback(fromCookie("cookie-1", forCSRF)), nil), "cookie-1"),
		"a form's session":            withCookie(httptest.NewRequest(http.MethodGet, callback(fromCookie("form-cookie", forState)), nil), "form-cookie"),
	} {
		w := httptest.NewRecorder()
		c.ServeHTTP(w, req)
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "Sign-in not recognised") {
			t.Errorf("%s: %d %s", name, w.Code, w.Body)
		}
	}
}

func withCookie(r *http.Request, v string) *http.Request {
	r.AddCookie(&http.Cookie{Name: connectCookie, Value: v})
	return r
}

// A GET of a link by a browser without a session of it (a script hammering the link), once the link holds its
// bound of sessions: each makes one and drops one.
func BenchmarkConnectOpenHammered(b *testing.B) {
	c := testConnect(b, ProveLocal, nil, nil)
	link, _, err := c.Link("alice")
	if err != nil {
		b.Fatal(err)
	}
	path := strings.TrimPrefix(link, "http://127.0.0.1:1")
	for b.Loop() {
		w := httptest.NewRecorder()
		c.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		if w.Code != http.StatusOK {
			b.Fatalf("GET: %d", w.Code)
		}
	}
}
