package server

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/server/oauth"
	"github.com/e2b-mcp/e2b-mcp/state"
)

// Whatever the connect page shows that is not its own (an owner's name, what the identity provider said) is
// escaped: markup in it never becomes the page's.
func TestConnectPageEscapes(t *testing.T) {
	const markup = `<script>alert("x")</script><img src=x onerror=alert(1)>`
	now := time.Now()
	store := state.NewMemoryConnects(connectLimits)
	link := state.ConnectKeyOf("link")
	if err := store.AddConnectLink(link, state.ConnectLink{Owner: markup, Expires: now.Add(time.Minute)}, now); err != nil {
		t.Fatal(err)
	}
	const signingIn = "signing-in-cookie"
	if err := store.AddConnectSession(state.ConnectKeyOf(signingIn), state.ConnectSession{Link: link, SigningIn: true,
		Expires: now.Add(time.Minute)}, now); err != nil {
		t.Fatal(err)
	}
	check := func(name string, c *connector, req *http.Request, wantStatus int) {
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

	local := newConnector(proveLocal, nil, nil, time.Now, store, testLogger(t))
	local.setBase("http://127.0.0.1:1")
	check("the form for an owner named with markup", local, httptest.NewRequest(http.MethodGet, PathConnect+"link", nil), http.StatusOK)

	viaIdP := newConnector(proveSignIn, nil, nil, time.Now, store, testLogger(t))
	viaIdP.signIn = &oauth.SignIn{}
	viaIdP.setBase("http://127.0.0.1:1")
	callback := pathConnectCallback + "?state=" + url.QueryEscape(fromCookie(signingIn, forState)) + "&error=" + url.QueryEscape(markup)
	check("the identity provider's error", viaIdP, withCookie(httptest.NewRequest(http.MethodGet, callback, nil), signingIn), http.StatusForbidden)
}
