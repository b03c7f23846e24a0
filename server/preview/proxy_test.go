package preview

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// teamProxy is the proxy of a team server whose previews are at https://*.preview.test, its clock at now. It
// reaches no sandbox: the tests here stop before a request would.
func teamProxy(t *testing.T, now time.Time) *Proxy {
	t.Helper()
	p, err := New(Options{Key: []byte("0123456789abcdef0123456789abcdef"), URL: "https://Preview.test",
		Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// A link's grant opens the owner's preview of that sandbox and port alone, until it expires, and only as made.
func TestGrant(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	p := teamProxy(t, now)
	link, expires, err := p.Link("alice", "sbx1", 8000, time.Hour)
	if err != nil || !expires.Equal(now.Add(time.Hour)) {
		t.Fatalf("Link: %v, expires %v", err, expires)
	}
	u, _ := url.Parse(link)
	if u.Scheme != "https" || u.Host != "8000-sbx1.preview.test" || u.Path != "/" {
		t.Fatalf("the link: %s", link)
	}
	grant := u.Query().Get(GrantParam)
	if got := p.owner(grant, "sbx1", 8000); got != "alice" {
		t.Fatalf("the grant's owner: %q", got)
	}
	o64, rest, _ := strings.Cut(grant, ".")
	for name, check := range map[string]func() string{
		"another sandbox": func() string { return p.owner(grant, "sbx2", 8000) },
		"another port":    func() string { return p.owner(grant, "sbx1", 8001) },
		"another owner": func() string {
			return p.owner(strings.Replace(grant, o64, "Ym9i", 1), "sbx1", 8000) // "bob"
		},
		"a later expiry": func() string {
			exp, mac, _ := strings.Cut(rest, ".")
			return p.owner(o64+"."+exp+"9."+mac, "sbx1", 8000)
		},
		"an altered MAC": func() string { return p.owner(grant[:len(grant)-2]+"AA", "sbx1", 8000) },
		"no MAC":         func() string { return p.owner(o64+"."+strings.Split(rest, ".")[0], "sbx1", 8000) },
		"another key": func() string {
			other := teamProxy(t, now)
			other.key = []byte("another key of 32 bytes, exactly")
			return other.owner(grant, "sbx1", 8000)
		},
		"expired": func() string {
			later := teamProxy(t, now.Add(time.Hour))
			return later.owner(grant, "sbx1", 8000)
		},
	} {
		if got := check(); got != "" {
			t.Errorf("%s: the grant passed for %q", name, got)
		}
	}
}

// A team server's previews are told apart by host name: the preview domain and its names go to the proxy, every
// other host to the server; a local proxy, on its own listener, takes nothing of the server's.
func TestRoute(t *testing.T) {
	p := teamProxy(t, time.Now())
	server := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("the server")) })
	h := p.Route(server)
	for host, toServer := range map[string]bool{
		"mcp.test":                 true,
		"preview.test.evil":        true,
		"notpreview.test":          true,
		"preview.test":             false,
		"PREVIEW.test:443":         false,
		"8000-sbx1.preview.test":   false,
		"x.8000-sbx1.preview.test": false,
	} {
		req := httptest.NewRequest(http.MethodGet, "/mcp", nil)
		req.Host = host
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if got := rec.Body.String() == "the server"; got != toServer {
			t.Errorf("%s: to the server %v, want %v (HTTP %d %s)", host, got, toServer, rec.Code, rec.Body)
		}
	}
	local, err := New(Options{Key: []byte("k"), Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.Host = "8000-sbx1.localhost"
	rec := httptest.NewRecorder()
	local.Route(server).ServeHTTP(rec, req)
	if rec.Body.String() != "the server" {
		t.Errorf("a local proxy took a request of the server: HTTP %d %s", rec.Code, rec.Body)
	}
}

// What the proxy refuses before it looks for the sandbox, and how a link's grant becomes a cookie.
func TestServeBeforeTheSandbox(t *testing.T) {
	now := time.Now()
	p := teamProxy(t, now)
	link, _, err := p.Link("alice", "sbx1", 8000, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(link)
	grant := u.Query().Get(GrantParam)
	serve := func(host, target string, hdr map[string]string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, target, nil)
		req.Host = host
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		p.ServeHTTP(rec, req)
		return rec
	}
	const host = "8000-sbx1.preview.test"
	for name, tc := range map[string]struct {
		host, target string
		hdr          map[string]string
		want         int
	}{
		"the bare domain":      {"preview.test", "/", nil, http.StatusNotFound},
		"a port out of range":  {"70000-sbx1.preview.test", "/", nil, http.StatusNotFound},
		"port zero":            {"0-sbx1.preview.test", "/", nil, http.StatusNotFound},
		"a port in the host":   {host + ":8443", "/", nil, http.StatusNotFound},
		"a deeper name":        {"a." + host, "/", nil, http.StatusNotFound},
		"no grant":             {host, "/", nil, http.StatusForbidden},
		"another port's grant": {"8001-sbx1.preview.test", "/?" + GrantParam + "=" + grant, nil, http.StatusForbidden},
		"a grant as a cookie of another port": {"8001-sbx1.preview.test", "/",
			map[string]string{"Cookie": GrantCookie + "=" + grant}, http.StatusForbidden},
		"a fetch of another preview's page": {host, "/", map[string]string{"Cookie": GrantCookie + "=" + grant,
			"Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "cors"}, http.StatusForbidden},
		"a WebSocket of another site's page": {host, "/ws", map[string]string{"Cookie": GrantCookie + "=" + grant,
			"Upgrade": "websocket", "Origin": "https://evil.example"}, http.StatusForbidden},
	} {
		rec := serve(tc.host, tc.target, tc.hdr)
		if rec.Code != tc.want || rec.Header().Get("Cache-Control") != "no-store" {
			t.Errorf("%s: HTTP %d (Cache-Control %q), want %d: %s", name, rec.Code,
				rec.Header().Get("Cache-Control"), tc.want, rec.Body)
		}
	}

	rec := serve(host, "/app?x=1&"+GrantParam+"="+grant, nil)
	cookies := rec.Result().Cookies()
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/app?x=1" || len(cookies) != 1 {
		t.Fatalf("opening the link: HTTP %d, Location %q, cookies %v", rec.Code, rec.Header().Get("Location"), cookies)
	}
	if c := cookies[0]; c.Name != GrantCookie || c.Value != grant || !c.HttpOnly || !c.Secure || c.Domain != "" ||
		c.SameSite != http.SameSiteLaxMode {
		t.Errorf("the grant's cookie: %+v", c)
	}
}

// The previewed app's cookies stay with its own preview, and the grant's cookie never reaches the app.
func TestCookies(t *testing.T) {
	h := http.Header{}
	for _, c := range []string{"session=abc; Domain=preview.test; Path=/", "wide=1; path=/; domain=.preview.test; HttpOnly",
		GrantCookie + "=forged; Path=/", "theme=dark"} {
		h.Add("Set-Cookie", c)
	}
	scopeCookies(h)
	want := []string{"session=abc; Path=/", "wide=1; path=/; HttpOnly", "theme=dark"}
	if got := h.Values("Set-Cookie"); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("the app's cookies: %q, want %q", got, want)
	}

	h = http.Header{"Cookie": {"a=1; " + GrantCookie + "=g; b=2", GrantCookie + "=g"}}
	withoutCookie(h, GrantCookie)
	if got := h.Values("Cookie"); len(got) != 1 || got[0] != "a=1; b=2" {
		t.Errorf("the cookies sent on: %q", got)
	}
	h = http.Header{"Cookie": {GrantCookie + "=g"}}
	if withoutCookie(h, GrantCookie); len(h.Values("Cookie")) != 0 {
		t.Errorf("the grant alone was sent on: %q", h.Values("Cookie"))
	}
}

// A redirect is judged as a browser will follow it (the WHATWG URL parser): spaces and controls around it, tabs
// and newlines within it, and backslashes for slashes change nothing of where it goes.
func TestPreviewRedirectAsBrowsersRead(t *testing.T) {
	public := &url.URL{Scheme: "https", Host: "8000-sbx.e2b.app"}
	target := &url.URL{Scheme: "http", Host: "127.0.0.1:49983"}
	const self = "http://8000-sbx.localhost:41000"
	for loc, want := range map[string]string{
		"/next?to=\\\\x":                          "/next?to=\\\\x",
		"page.html":                               "page.html",
		"HTTP://8000-sbx.e2b.app/x":               self + "/x",
		"http://8000-sbx.e2b.app\\@evil.example/": self + "/@evil.example/",
		"\\\\evil.example/":                       "",
		"\\/evil.example/":                        "",
		"/\\evil.example/":                        "",
		"  //evil.example/":                       "",
		"\t\\\\evil.example":                      "",
		"/\t/evil.example/":                       "",
		"ht\ntp://evil.example/":                  "",
		"http:\\\\evil.example/":                  "",
		"https:evil.example":                      "",
		"javascript:alert(1)":                     "",
	} {
		resp := &http.Response{Header: http.Header{"Location": {loc}}}
		err := sameSandboxRedirect(resp, public, target, self)
		switch got := resp.Header.Get("Location"); {
		case want == "" && !errors.Is(err, errLeftSandbox):
			t.Errorf("%q: let through as %q", loc, got)
		case want != "" && (err != nil || got != want):
			t.Errorf("%q: %q, %v; want %q", loc, got, err, want)
		}
	}
}
