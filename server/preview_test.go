package server

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"

	"github.com/e2b-mcp/e2b-mcp/e2b/e2btest"
	"github.com/e2b-mcp/e2b-mcp/internal/waitfor"
	"github.com/e2b-mcp/e2b-mcp/server/preview"
)

// previewApp is a web app for the sandbox, python3 with nothing else: /headers answers the request's headers (and
// a traffic token header of its own), /away (and each path of AWAY) redirects out of the sandbox, /here to its own
// address, /cookies sets cookies for every preview's domain and one in place of the grant's, and /ws is a
// WebSocket (RFC 6455) echo of text messages.
const previewApp = `import base64, hashlib, http.server, json, sys

# Redirects a browser reads as leaving for another host: backslashes are slashes, tabs and newlines are dropped.
AWAY = {"/backslashes": "\\\\evil.example/", "/backslash-slash": "\\/evil.example/", "/tab": "/\t/evil.example/",
        "/scheme-backslashes": "http:\\\\evil.example/"}

class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def reply(self, code, body, **headers):
        self.send_response(code)
        for k, v in headers.items():
            self.send_header(k.replace("_", "-"), v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def do_GET(self):
        if self.path == "/headers":
            self.reply(200, json.dumps(dict(self.headers)).encode(), E2b_Traffic_Access_Token="from-the-app")
        elif self.path == "/away":
            self.reply(302, b"", Location="http://elsewhere.example/steal")
        elif self.path == "/here":
            self.reply(302, b"", Location="http://" + self.headers["Host"] + "/headers")
        elif self.path in AWAY:
            self.reply(302, b"", Location=AWAY[self.path])
        elif self.path == "/cookies":
            self.send_response(200)
            for c in ("session=abc; Domain=localhost; Path=/", "wide=1; path=/; domain=.localhost; HttpOnly", "e2b_preview=forged; Path=/", "theme=dark"):
                self.send_header("Set-Cookie", c)
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path == "/ws" and self.headers.get("Upgrade", "").lower() == "websocket":
            accept = base64.b64encode(hashlib.sha1((self.headers["Sec-WebSocket-Key"] + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
            self.send_response(101)
            self.send_header("Upgrade", "websocket")
            self.send_header("Connection", "Upgrade")
            self.send_header("Sec-WebSocket-Accept", accept)
            self.end_headers()
            self.wfile.flush()
            while True:
                head = self.rfile.read(2)
                if len(head) < 2 or head[0] & 0x0F == 8:
                    return
                n = head[1] & 0x7F
                if n == 126:
                    n = int.from_bytes(self.rfile.read(2), "big")
                mask = self.rfile.read(4)
                data = bytes(b ^ mask[i % 4] for i, b in enumerate(self.rfile.read(n)))
                out = b"echo: " + data
                self.wfile.write(bytes([0x81, len(out)]) + out)
                self.wfile.flush()
        else:
            self.reply(404, b"not here")

http.server.ThreadingHTTPServer(("0.0.0.0", int(sys.argv[1])), H).serve_forever()
`

// previewClient fetches as a browser does: names under localhost are this machine; redirects are not followed.
func previewClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, localhostAddr(addr))
		}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func localhostAddr(addr string) string {
	host, port, _ := net.SplitHostPort(addr)
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return net.JoinHostPort("127.0.0.1", port)
	}
	return addr
}

func previewGet(t *testing.T, link string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, link, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := previewClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// openPreview opens a link as a browser does: it follows the redirect that moves the grant to a cookie, and
// returns the cookie and the page it then shows.
func openPreview(t *testing.T, link string) (cookie, page string) {
	t.Helper()
	resp, _ := previewGet(t, link, nil)
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 || strings.Contains(resp.Header.Get("Location"), preview.GrantParam) {
		t.Fatalf("opening %s: HTTP %d, cookies %v, Location %q", link, resp.StatusCode, resp.Cookies(), resp.Header.Get("Location"))
	}
	ck := resp.Cookies()[0]
	if !ck.HttpOnly || ck.Domain != "" || ck.Path != "/" {
		t.Fatalf("the grant's cookie: %+v", ck)
	}
	u, _ := url.Parse(link)
	_, page = previewGet(t, u.Scheme+"://"+u.Host+resp.Header.Get("Location"), map[string]string{"Cookie": ck.Name + "=" + ck.Value})
	return ck.Name + "=" + ck.Value, page
}

// grantOf is the grant of the link p makes for port of the owner's sandbox, valid for ttl (expired for a
// negative one).
func grantOf(t *testing.T, p *preview.Proxy, owner, sandboxID string, port int, ttl time.Duration) string {
	t.Helper()
	link, _, err := p.Link(owner, sandboxID, port, ttl)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query().Get(preview.GrantParam)
}

func waitListening(t *testing.T, c *client.Client, id string, port int) map[string]any {
	t.Helper()
	var res map[string]any
	waitfor.Until(t, 30*time.Second, fmt.Sprintf("something to listen on %d", port), func() bool {
		res = mustOK(t, c, "e2b_get_url", map[string]any{"sandbox_id": id, "port": port})
		return res["listening"] == true
	})
	return res
}

// With private previews, a sandbox's ports answer only this server's proxy, and the proxy only a link's grant for
// that owner, sandbox and port, unexpired and unaltered; what passes keeps the server's credentials to itself.
func TestPrivatePreview(t *testing.T) {
	f := newFixture(t, fixtureOpts{mutate: func(c *Config, _ *e2btest.Server) { c.PrivatePreviews = true }})
	c := connect(t, f.srv, eras[0], nil)
	id := createSandbox(t, c)
	mustOK(t, c, "e2b_write_file", map[string]any{"sandbox_id": id, "path": "app.py", "content": previewApp})
	mustOK(t, c, "e2b_exec", map[string]any{"sandbox_id": id, "background": true, "timeout_ms": 100,
		"command": "echo hi > hello.txt; python3 -m http.server 8000"})
	mustOK(t, c, "e2b_exec", map[string]any{"sandbox_id": id, "background": true, "timeout_ms": 100, "command": "python3 app.py 8001"})
	res := waitListening(t, c, id, 8000)
	link, _ := res["url"].(string)
	if res["access"] != "private" || !strings.HasPrefix(link, "http://8000-"+id+".localhost:") || res["expires_at"] == "" {
		t.Fatalf("the link: %v", res)
	}

	// The sandbox itself refuses whoever lacks its traffic token, as E2B does.
	if resp, body := previewGet(t, "http://8000-"+id+".localhost:"+f.emu.URL()[strings.LastIndex(f.emu.URL(), ":")+1:]+"/", nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("the sandbox's port without the token: HTTP %d %s", resp.StatusCode, body)
	}

	cookie, page := openPreview(t, link)
	if !strings.Contains(page, "Directory listing") || !strings.Contains(page, "hello.txt") {
		t.Fatalf("the page: %s", page)
	}

	u, _ := url.Parse(link)
	grant := u.Query().Get(preview.GrantParam)
	proxyPort := u.Port()
	at := func(port int, path string) string {
		return fmt.Sprintf("http://%d-%s.localhost:%s%s", port, id, proxyPort, path)
	}
	p := f.srv.previews
	refused := map[string]struct {
		link   string
		cookie string
		want   int
	}{
		"no grant":              {at(8000, "/"), "", http.StatusForbidden},
		"altered grant":         {at(8000, "/?"+preview.GrantParam+"="+grant[:len(grant)-2]+"AA"), "", http.StatusForbidden},
		"altered owner":         {at(8000, "/?"+preview.GrantParam+"="+base64.RawURLEncoding.EncodeToString([]byte("bob"))+grant[strings.Index(grant, "."):]), "", http.StatusForbidden},
		"expired grant":         {at(8000, "/?"+preview.GrantParam+"="+grantOf(t, p, "alice", id, 8000, -time.Second)), "", http.StatusForbidden},
		"another port's link":   {at(8001, "/?"+preview.GrantParam+"="+grant), "", http.StatusForbidden},
		"another port's cookie": {at(8001, "/headers"), cookie, http.StatusForbidden},
		"another owner's grant": {at(8000, "/?"+preview.GrantParam+"="+grantOf(t, p, "bob", id, 8000, time.Hour)), "", http.StatusSeeOther},
		"a rebound domain":      {"http://127.0.0.1:" + proxyPort + "/", cookie, http.StatusNotFound},
	}
	for name, r := range refused {
		hdr := map[string]string{}
		if r.cookie != "" {
			hdr["Cookie"] = r.cookie
		}
		if name == "a rebound domain" {
			hdr["Host"] = "attacker.example:" + proxyPort
		}
		if resp, body := previewGet(t, r.link, hdr); resp.StatusCode != r.want || strings.Contains(body, "Directory listing") {
			t.Errorf("%s: HTTP %d %s", name, resp.StatusCode, body)
		}
	}
	// Bob's grant is a valid grant, but Bob has no such sandbox: once it is a cookie, it opens nothing.
	bobs := preview.GrantCookie + "=" + grantOf(t, p, "bob", id, 8000, time.Hour)
	if resp, body := previewGet(t, at(8000, "/"), map[string]string{"Cookie": bobs}); resp.StatusCode != http.StatusNotFound {
		t.Errorf("another owner's grant: HTTP %d %s", resp.StatusCode, body)
	}

	// What reaches the app, and what comes back.
	res8001 := waitListening(t, c, id, 8001)
	appCookie, _ := openPreview(t, res8001["url"].(string))
	resp, body := previewGet(t, at(8001, "/headers"), map[string]string{"Cookie": appCookie + "; theme=dark",
		"Authorization": "Bearer the-servers-token", "E2b-Traffic-Access-Token": "browsers-guess"})
	if resp.StatusCode != http.StatusOK || resp.Header.Get("E2b-Traffic-Access-Token") != "" {
		t.Fatalf("headers: HTTP %d, header %q", resp.StatusCode, resp.Header.Get("E2b-Traffic-Access-Token"))
	}
	for _, leaked := range []string{preview.GrantCookie + "=", "the-servers-token", "browsers-guess", "Authorization"} {
		if strings.Contains(body, leaked) {
			t.Errorf("the app was sent %q: %s", leaked, body)
		}
	}
	if !strings.Contains(body, "theme=dark") {
		t.Errorf("the app's own cookie did not reach it: %s", body)
	}
	if resp, body := previewGet(t, at(8001, "/away"), map[string]string{"Cookie": appCookie}); resp.StatusCode != http.StatusBadGateway || resp.Header.Get("Location") != "" {
		t.Errorf("a redirect out of the sandbox: HTTP %d %q %s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	if resp, _ := previewGet(t, at(8001, "/here"), map[string]string{"Cookie": appCookie}); resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != at(8001, "/headers") {
		t.Errorf("a redirect within the sandbox: HTTP %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}

	// Read as a browser reads them, these redirects leave the sandbox too.
	for _, path := range []string{"/backslashes", "/backslash-slash", "/tab", "/scheme-backslashes"} {
		if resp, body := previewGet(t, at(8001, path), map[string]string{"Cookie": appCookie}); resp.StatusCode != http.StatusBadGateway || resp.Header.Get("Location") != "" {
			t.Errorf("a redirect out of the sandbox (%s): HTTP %d %q %s", path, resp.StatusCode, resp.Header.Get("Location"), body)
		}
	}
	// The app's cookies stay with its own preview: none reaches the other previews through Domain, and none takes
	// the grant's place.
	resp, _ = previewGet(t, at(8001, "/cookies"), map[string]string{"Cookie": appCookie})
	set := resp.Header.Values("Set-Cookie")
	if len(set) != 3 || !slices.Contains(set, "theme=dark") {
		t.Errorf("the app's cookies: %q", set)
	}
	for _, line := range set {
		if strings.Contains(strings.ToLower(line), "domain") || strings.HasPrefix(line, preview.GrantCookie+"=") {
			t.Errorf("a cookie of the app leaves its preview or replaces the grant: %q", line)
		}
	}
	// A page of another site cannot open a WebSocket to the preview with the browser's cookie.
	if _, _, resp := wsHandshake(t, at(8001, "/ws"), appCookie, "http://evil.example"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a WebSocket from another site's page: HTTP %d", resp.StatusCode)
	}

	// A page of another preview (here of port 8001) may link to this one, but not send it requests of its own.
	for _, mode := range []string{"cors", "no-cors", "websocket"} {
		if resp, body := previewGet(t, at(8000, "/hello.txt"), map[string]string{"Cookie": cookie, "Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": mode}); resp.StatusCode != http.StatusForbidden {
			t.Errorf("a %s request of another preview's page: HTTP %d %s", mode, resp.StatusCode, body)
		}
	}
	if resp, body := previewGet(t, at(8000, "/hello.txt"), map[string]string{"Cookie": cookie, "Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "navigate"}); resp.StatusCode != http.StatusOK || body != "hi\n" {
		t.Errorf("a link followed from another preview: HTTP %d %q", resp.StatusCode, body)
	}

	// A WebSocket through the proxy.
	if got := wsEcho(t, at(8001, "/ws"), appCookie, "hot reload"); got != "echo: hot reload" {
		t.Errorf("websocket echo: %q", got)
	}
}

// wsHandshake sends a WebSocket handshake for link with cookie, as a page of origin does, and returns the
// connection (closed with the test) and the answer.
func wsHandshake(t *testing.T, link, cookie, origin string) (net.Conn, *bufio.Reader, *http.Response) {
	t.Helper()
	u, _ := url.Parse(link)
	conn, err := net.DialTimeout("tcp", localhostAddr(u.Host), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	key := make([]byte, 16)
	_, _ = rand.Read(key)
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"+
		"Sec-WebSocket-Version: 13\r\nOrigin: %s\r\nCookie: %s\r\n\r\n", u.RequestURI(), u.Host, base64.StdEncoding.EncodeToString(key), origin, cookie)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("websocket handshake: %v", err)
	}
	return conn, br, resp
}

// wsEcho opens a WebSocket at link with cookie, from a page of the preview itself, sends msg and returns the
// first text message back.
func wsEcho(t *testing.T, link, cookie, msg string) string {
	t.Helper()
	u, _ := url.Parse(link)
	conn, br, resp := wsHandshake(t, link, cookie, "http://"+u.Host)
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("websocket handshake: %v", resp)
	}
	mask := [4]byte{1, 2, 3, 4}
	frame := []byte{0x81, 0x80 | byte(len(msg)), mask[0], mask[1], mask[2], mask[3]}
	for i := range len(msg) {
		frame = append(frame, msg[i]^mask[i%4])
	}
	if _, err := conn.Write(frame); err != nil {
		t.Fatal(err)
	}
	head := make([]byte, 2)
	if _, err := io.ReadFull(br, head); err != nil {
		t.Fatal(err)
	}
	n := int(head[1] & 0x7F)
	if n == 126 {
		var ext [2]byte
		_, _ = io.ReadFull(br, ext[:])
		n = int(binary.BigEndian.Uint16(ext[:]))
	}
	data := make([]byte, n)
	if _, err := io.ReadFull(br, data); err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// A team server serves previews at the preview URL's domain, dispatched by host name: a preview host never
// reaches the server's endpoints, the server's host never the proxy.
func TestPrivatePreviewOnATeamServer(t *testing.T) {
	f := newFixture(t, fixtureOpts{transport: TransportHTTP, mutate: func(c *Config, _ *e2btest.Server) {
		c.PublicURL, c.PreviewURL = "https://mcp.test", "https://preview.test"
	}})
	web := httptest.NewServer(f.srv.Handler())
	t.Cleanup(web.Close)
	c := connect(t, f.srv, eras[0], nil)
	id := createSandbox(t, c)
	mustOK(t, c, "e2b_exec", map[string]any{"sandbox_id": id, "background": true, "timeout_ms": 100,
		"command": "echo hi > hello.txt; python3 -m http.server 8000"})
	res := waitListening(t, c, id, 8000)
	link, _ := res["url"].(string)
	host := "8000-" + id + ".preview.test"
	if res["access"] != "private" || !strings.HasPrefix(link, "https://"+host+"/?"+preview.GrantParam+"=") {
		t.Fatalf("the link: %v", res)
	}
	u, _ := url.Parse(link)
	get := func(host, pathQuery, cookie string) (*http.Response, string) {
		hdr := map[string]string{"Host": host}
		if cookie != "" {
			hdr["Cookie"] = cookie
		}
		return previewGet(t, web.URL+pathQuery, hdr)
	}
	resp, _ := get(host, "/?"+u.RawQuery, "")
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 || !resp.Cookies()[0].Secure {
		t.Fatalf("opening the link: HTTP %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	cookie := preview.GrantCookie + "=" + resp.Cookies()[0].Value
	if resp, page := get(host, "/", cookie); resp.StatusCode != http.StatusOK || !strings.Contains(page, "hello.txt") {
		t.Fatalf("the preview: HTTP %d %s", resp.StatusCode, page)
	}
	// The server's endpoints at a preview host are the app's paths, and need the grant like any.
	if resp, body := get(host, "/mcp", ""); resp.StatusCode != http.StatusForbidden {
		t.Errorf("/mcp at a preview host without the grant: HTTP %d %s", resp.StatusCode, body)
	}
	if resp, body := get(host, "/metrics", cookie); resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "File not found") {
		t.Errorf("/metrics at a preview host reached more than the app: HTTP %d %s", resp.StatusCode, body)
	}
	// The server's own host is not a preview, whatever it carries.
	if resp, body := get("mcp.test", "/?"+u.RawQuery, cookie); strings.Contains(body, "hello.txt") || resp.StatusCode == http.StatusSeeOther {
		t.Errorf("the server's host served the preview: HTTP %d %s", resp.StatusCode, body)
	}
	// Any other name under the preview domain is the proxy's, and refused.
	if resp, _ := get("preview.test", "/mcp", cookie); resp.StatusCode != http.StatusNotFound {
		t.Errorf("the preview domain itself: HTTP %d", resp.StatusCode)
	}
}

func TestPreviewConfig(t *testing.T) {
	good := Config{Owner: "alice", StateDir: t.TempDir()}
	for _, tc := range []struct {
		mistake func(*Config)
		want    string
	}{
		{func(c *Config) { c.PreviewURL = "https://preview.test" }, "--preview-url is for HTTP servers"},
		{func(c *Config) { c.Transport, c.PreviewURL = TransportHTTP, "http://preview.test" }, "must use https"},
		{func(c *Config) { c.Transport, c.PreviewURL = TransportHTTP, "https://preview.test/app" }, "nothing more"},
		{func(c *Config) {
			c.Transport, c.PublicURL, c.PreviewURL = TransportHTTP, "https://mcp.example.com", "https://example.com"
		}, "shares its domain"},
		{func(c *Config) {
			c.Transport, c.PublicURL, c.PreviewURL = TransportHTTP, "https://example.com", "https://preview.example.com"
		}, "shares its domain"},
		{func(c *Config) {
			c.Transport, c.Listen, c.PrivatePreviews, c.TokensFile = TransportHTTP, "0.0.0.0:8080", true, "tokens.yaml"
		}, "needs --preview-url"},
	} {
		bad := good
		tc.mistake(&bad)
		if _, err := bad.Check(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Check: %v, want %q", err, tc.want)
		}
	}
	ok := good
	ok.Transport, ok.PublicURL, ok.PreviewURL = TransportHTTP, "https://mcp.example.com", "https://example-preview.net"
	if c, err := ok.Check(); err != nil || !c.PrivatePreviews {
		t.Errorf("a preview URL of its own domain: %v, private previews %v", err, c.PrivatePreviews)
	}
}
