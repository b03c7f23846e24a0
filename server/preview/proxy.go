// Package preview is the proxy of private previews. With private previews, sandboxes are created with public traffic
// off: their ports answer only requests that carry the sandbox's traffic access token, which a browser cannot add and
// which only this server holds (it asks E2B for it when first needed, and keeps it in memory only). e2b_get_url then
// hands out a link to this server's preview proxy, which adds the token and passes requests (WebSockets too) to the
// port.
//
// Each previewed port has an origin of its own, <port>-<sandboxID>.<preview domain>, never one of this server's
// other origins, so that the previewed app's pages (which the sandbox controls) cannot reach the server's endpoints
// as a page of the server, share cookies with its pages, or read another port's preview. Over stdio (and on a
// loopback HTTP server) the domain is localhost, on a listener of its own on 127.0.0.1
// (http://<port>-<id>.localhost:<proxy port>); a team server serves previews at its preview URL's domain
// (https://<port>-<id>.preview.example.com, by wildcard DNS and certificate), on its own listener but dispatched
// by host name before anything else: a request for a preview host never reaches the server's other endpoints, and
// one for the server's host never reaches the proxy. The proxy serves nothing but previews, and only at such host
// names (a page of a domain rebound to 127.0.0.1 names its own domain, and gets nothing).
//
// A link carries a signed grant: owner, sandbox, port and expiry under an HMAC key of this server (or of the
// replicas that share its data key). The first request presents it in the query; the proxy puts it in a cookie of
// that origin alone (HttpOnly) and sends the browser on without it, so that it leaves the address bar and every
// Referer. Every request is checked afresh: an altered grant, an expired one, one for another sandbox or port (the
// host name is the sandbox and port), or one whose owner has no such sandbox, gets nothing. What reaches the
// sandbox never carries the grant's cookie, an Authorization, or a traffic token of the browser's; what comes back
// never carries a traffic token, and a redirect that leaves the sandbox is refused.
package preview

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/state"
)

const (
	// GrantParam is the query parameter a link carries its grant in, GrantCookie the cookie the grant then moves to.
	GrantParam  = "e2b_preview"
	GrantCookie = "e2b_preview"
	// KeyLabel names the grants' key where replicas derive it from the data key they share.
	KeyLabel           = "e2b-mcp preview links"
	localPreviewDomain = "localhost"
)

// Sandboxes are the sandboxes' records: a grant opens only a sandbox its owner has.
type Sandboxes interface {
	Sandbox(owner, id string) (state.SandboxRecord, error)
}

// Clients make the E2B client of an owner, which asks E2B for a sandbox's traffic token and reaches its ports.
type Clients interface {
	Client(ctx context.Context, owner string) (*e2b.Client, error)
}

// Options are what a Proxy needs.
type Options struct {
	Key []byte // signs the grants; replicas that share a data key derive the same one (KeyLabel)
	// URL (scheme://domain[:port], checked by the server's configuration) is where a team server serves previews;
	// "" serves them on a listener of the proxy's own on 127.0.0.1, at localhost.
	URL       string
	Sandboxes Sandboxes
	Clients   Clients
	Now       func() time.Time
	Log       interface{ Warn(string, ...any) }
}

// Proxy makes preview links (the tools' Previews) and serves them.
type Proxy struct {
	key       []byte
	now       func() time.Time
	sandboxes Sandboxes
	clients   Clients
	log       interface{ Warn(string, ...any) }
	// transport is the proxy's own: plain HTTP/1.1 to the sandboxes, so that WebSocket upgrades pass.
	transport *http.Transport

	// scheme and domain make the previews' origins: scheme://<port>-<id>.<domain>[:port]. local says the proxy
	// listens by itself on 127.0.0.1 (port is then its listener's, known once it listens).
	scheme, domain string
	local          bool
	hosts          *regexp.Regexp // <port>-<id>.<domain>[:port], lower case

	mu       sync.Mutex
	srv      *http.Server
	port     string            // the port in the previews' origins; "" for the scheme's default
	traffic  map[string]string // sandbox ID → its traffic access token, as E2B gave it
	startErr error
}

// New makes the proxy; a local one listens when the first link is made.
func New(o Options) (*Proxy, error) {
	p := &Proxy{key: o.Key, now: o.Now, sandboxes: o.Sandboxes, clients: o.Clients, log: o.Log,
		traffic: map[string]string{}, transport: http.DefaultTransport.(*http.Transport).Clone(),
		scheme: "http", domain: localPreviewDomain, local: true}
	if o.URL != "" {
		u, err := url.Parse(o.URL)
		if err != nil || u.Hostname() == "" {
			return nil, fmt.Errorf("the preview URL %q: want scheme://domain[:port]", o.URL)
		}
		p.scheme, p.domain, p.port, p.local = u.Scheme, strings.ToLower(u.Hostname()), u.Port(), false
	}
	p.hosts = regexp.MustCompile(`^([0-9]{1,5})-([a-z0-9]+)\.` + regexp.QuoteMeta(p.domain) + `(?::([0-9]+))?$`)
	return p, nil
}

// Route sends the requests for the preview domain of a team server to the proxy, and the rest to next. A local
// proxy has a listener of its own, and next gets everything.
func (p *Proxy) Route(next http.Handler) http.Handler {
	if p.local {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := strings.ToLower(r.Host)
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if host == p.domain || strings.HasSuffix(host, "."+p.domain) {
			p.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Link is a link to port of the owner's sandbox, for ttl (tools.Previews).
func (p *Proxy) Link(owner, sandboxID string, port int, ttl time.Duration) (string, time.Time, error) {
	origin, err := p.origin(port, sandboxID)
	if err != nil {
		return "", time.Time{}, err
	}
	expires := p.now().Add(ttl).Truncate(time.Second)
	return origin + "/?" + GrantParam + "=" + p.grant(owner, sandboxID, port, expires), expires, nil
}

// origin is the origin of port of the sandbox's preview; a local proxy starts listening first.
func (p *Proxy) origin(port int, sandboxID string) (string, error) {
	if p.local {
		if err := p.listen(); err != nil {
			return "", err
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	o := fmt.Sprintf("%s://%d-%s.%s", p.scheme, port, sandboxID, p.domain)
	if p.port != "" {
		o += ":" + p.port
	}
	return o, nil
}

// listen starts the proxy's listener on a free loopback port, once.
func (p *Proxy) listen() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.srv != nil || p.startErr != nil {
		return p.startErr
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		p.startErr = fmt.Errorf("starting the preview proxy on 127.0.0.1: %w", err)
		return p.startErr
	}
	_, p.port, _ = net.SplitHostPort(ln.Addr().String())
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 15 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return nil
}

// Close stops a local proxy's listener.
func (p *Proxy) Close() {
	p.mu.Lock()
	srv := p.srv
	p.mu.Unlock()
	if srv != nil {
		_ = srv.Close() // previews hold WebSockets open: they are cut, not waited for
	}
}

// grant is base64(owner) "." expiry (Unix seconds) "." MAC over owner, sandbox, port and expiry.
func (p *Proxy) grant(owner, sandboxID string, port int, expires time.Time) string {
	exp := strconv.FormatInt(expires.Unix(), 10)
	return base64.RawURLEncoding.EncodeToString([]byte(owner)) + "." + exp + "." + p.mac(owner, sandboxID, port, exp)
}

func (p *Proxy) mac(owner, sandboxID string, port int, exp string) string {
	m := hmac.New(sha256.New, p.key)
	fmt.Fprintf(m, "e2b-mcp/preview\x00%s\x00%s\x00%d\x00%s", owner, sandboxID, port, exp)
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// owner checks a grant for the sandbox and port and returns its owner; "" when it is not a valid, unexpired grant
// for them.
func (p *Proxy) owner(grant, sandboxID string, port int) string {
	o64, rest, ok1 := strings.Cut(grant, ".")
	exp, mac, ok2 := strings.Cut(rest, ".")
	owner, err := base64.RawURLEncoding.DecodeString(o64)
	if !ok1 || !ok2 || err != nil || !hmac.Equal([]byte(mac), []byte(p.mac(string(owner), sandboxID, port, exp))) {
		return ""
	}
	n, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || !p.now().Before(time.Unix(n, 0)) {
		return ""
	}
	return string(owner)
}

// errLeftSandbox is a redirect of the previewed app to somewhere outside it.
var errLeftSandbox = errors.New("redirect out of the sandbox")

func refuse(w http.ResponseWriter, status int, text string) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	http.Error(w, text, status)
}

// ServeHTTP serves one request of a preview.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m := p.hosts.FindStringSubmatch(strings.ToLower(r.Host))
	port, err := 0, error(nil)
	if m != nil {
		port, err = strconv.Atoi(m[1])
	}
	p.mu.Lock()
	wantPort := p.port
	p.mu.Unlock()
	if m == nil || err != nil || port < 1 || port > 65535 || m[3] != wantPort {
		refuse(w, http.StatusNotFound, "Not a preview address. Open the link exactly as it was given.")
		return
	}
	id := m[2]
	if fromAnotherPreview(r) {
		refuse(w, http.StatusForbidden, "Refused: a page of another preview asked for this one.")
		return
	}
	if crossOriginUpgrade(r, p.scheme+"://"+r.Host) {
		refuse(w, http.StatusForbidden, "Refused: a WebSocket opened by a page of another site.")
		return
	}
	if grant := r.URL.Query().Get(GrantParam); grant != "" {
		if p.owner(grant, id, port) == "" {
			refuse(w, http.StatusForbidden, "This preview link is not valid: it was altered, has expired, or is for "+
				"another sandbox or port. Ask your assistant for a new one.")
			return
		}
		// The grant moves to a cookie of this origin alone, and the address loses it.
		http.SetCookie(w, &http.Cookie{Name: GrantCookie, Value: grant, Path: "/", HttpOnly: true,
			Secure: p.scheme == "https", SameSite: http.SameSiteLaxMode})
		q := r.URL.Query()
		q.Del(GrantParam)
		u := url.URL{Path: r.URL.Path, RawQuery: q.Encode()}
		if u.Path == "" {
			u.Path = "/"
		}
		w.Header().Set("Cache-Control", "no-store")
		http.Redirect(w, r, u.String(), http.StatusSeeOther)
		return
	}
	owner := ""
	if ck, err := r.Cookie(GrantCookie); err == nil {
		owner = p.owner(ck.Value, id, port)
	}
	if owner == "" {
		refuse(w, http.StatusForbidden, "This preview needs a valid link: yours has expired or was never opened in "+
			"this browser. Ask your assistant for a new one.")
		return
	}
	rec, err := p.sandboxes.Sandbox(owner, id)
	if err != nil || rec.State == state.StateGone {
		refuse(w, http.StatusNotFound, "No such sandbox (it may have been deleted).")
		return
	}
	c, err := p.clients.Client(r.Context(), owner)
	if err != nil {
		refuse(w, http.StatusBadGateway, "The sandbox cannot be reached: no E2B API key is connected for its owner.")
		return
	}
	token, err := p.trafficToken(r.Context(), c, rec)
	if err != nil {
		p.log.Warn("preview: the sandbox's traffic token", "sandbox", id, "error", err)
		refuse(w, http.StatusBadGateway, "The sandbox cannot be reached now (is it paused or deleted?).")
		return
	}
	p.proxy(w, r, c, rec, port, token)
}

// fromAnotherPreview reports a request that a page of another preview made (another port's, another sandbox's).
// Every preview is under one domain, so browsers take them for one site and send this preview's cookie (SameSite
// does not tell them apart); only a link followed (a GET navigation) is let through, as SameSite=Lax lets one
// through from another site.
func fromAnotherPreview(r *http.Request) bool {
	if r.Header.Get("Sec-Fetch-Site") != "same-site" {
		return false
	}
	return r.Header.Get("Sec-Fetch-Mode") != "navigate" || (r.Method != http.MethodGet && r.Method != http.MethodHead)
}

// crossOriginUpgrade reports a WebSocket handshake a page of another origin than the preview's (self) started.
// The same-origin policy does not hold WebSockets back: a page of any site can open one, and the browser sends it
// the origin's cookies where their SameSite allows (another preview is the same site). Browsers always send
// Origin on a handshake; a program that sends none has only what it holds, the link, and is let through.
func crossOriginUpgrade(r *http.Request, self string) bool {
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		return false
	}
	origin := r.Header.Get("Origin")
	return origin != "" && !strings.EqualFold(origin, self)
}

// trafficToken is the sandbox's traffic access token, from memory or else from E2B's connect (which answers it,
// and resumes the sandbox if it is paused).
func (p *Proxy) trafficToken(ctx context.Context, c *e2b.Client, rec state.SandboxRecord) (string, error) {
	p.mu.Lock()
	token, ok := p.traffic[rec.ID]
	p.mu.Unlock()
	if ok {
		return token, nil
	}
	sb, _, err := c.ConnectSandbox(ctx, rec.ID, max(rec.TimeoutSeconds, 1))
	if err != nil {
		return "", err
	}
	if sb.TrafficAccessToken != nil {
		token = *sb.TrafficAccessToken
	}
	p.mu.Lock()
	p.traffic[rec.ID] = token
	p.mu.Unlock()
	return token, nil
}

// proxy passes the request to the sandbox's port with its traffic token, and the answer back.
func (p *Proxy) proxy(w http.ResponseWriter, r *http.Request, c *e2b.Client, rec state.SandboxRecord,
	port int, token string) {
	domain := rec.Domain
	if domain == "" {
		domain = c.Domain()
	}
	e := c.Envd(e2b.SandboxConn{ID: rec.ID, Domain: domain, EnvdVersion: rec.EnvdVersion})
	target, route := e.PortTarget(port)
	public, _ := url.Parse(e.PortURL(port))
	self := p.scheme + "://" + r.Host
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = target.Host
			for _, h := range []string{"Authorization", "Proxy-Authorization", e2b.TrafficTokenHeader,
				"E2b-Sandbox-Id", "E2b-Sandbox-Port",
				"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto"} {
				pr.Out.Header.Del(h)
			}
			withoutCookie(pr.Out.Header, GrantCookie)
			for k, v := range route {
				pr.Out.Header[k] = v
			}
			if token != "" {
				pr.Out.Header.Set(e2b.TrafficTokenHeader, token)
			}
		},
		Transport: p.transport,
		ModifyResponse: func(resp *http.Response) error {
			resp.Header.Del(e2b.TrafficTokenHeader)
			scopeCookies(resp.Header)
			return sameSandboxRedirect(resp, public, target, self)
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			if errors.Is(err, errLeftSandbox) {
				refuse(w, http.StatusBadGateway, "The previewed app redirected outside its sandbox; the "+
					"redirect was not followed.")
				return
			}
			refuse(w, http.StatusBadGateway, "The sandbox's port could not be reached.")
		},
	}
	rp.ServeHTTP(w, r)
}

// sameSandboxRedirect lets a redirect through only within the previewed port: a path on it, or the port's own
// address (which the app may build from the Host it sees), rewritten to the preview's origin. The Location is
// read as a browser reads it (browserURL): `\\evil.example/` and `\/evil.example/` are `//evil.example/` to a
// browser, another host.
func sameSandboxRedirect(resp *http.Response, public, target *url.URL, self string) error {
	loc := resp.Header.Get("Location")
	if loc == "" {
		return nil
	}
	norm := browserURL(loc)
	u, err := url.Parse(norm)
	if err != nil {
		return errLeftSandbox
	}
	if u.Scheme == "" && u.Host == "" {
		if strings.HasPrefix(norm, "//") || u.Opaque != "" {
			return errLeftSandbox
		}
		return nil
	}
	if !strings.HasPrefix(strings.ToLower(norm), u.Scheme+"://") {
		return errLeftSandbox // http:evil.example: another host to a browser whose page is not http
	}
	if (u.Scheme == "http" || u.Scheme == "https") && (u.Host == public.Host || u.Host == target.Host) {
		resp.Header.Set("Location", self+u.RequestURI())
		return nil
	}
	return errLeftSandbox
}

// browserURL is a redirect's target as a browser parses it (the WHATWG URL standard) before it is checked: no
// leading or trailing C0 control or space, no tab or newline anywhere, and, for a target without a scheme or of
// an http(s) scheme, every backslash before the query a slash.
func browserURL(loc string) string {
	loc = strings.TrimFunc(loc, func(r rune) bool { return r <= ' ' })
	loc = strings.NewReplacer("\t", "", "\n", "", "\r", "").Replace(loc)
	scheme, _, hasScheme := strings.Cut(loc, ":")
	if hasScheme && !isScheme(scheme) {
		hasScheme = false
	}
	if hasScheme && !strings.EqualFold(scheme, "http") && !strings.EqualFold(scheme, "https") {
		return loc
	}
	end := strings.IndexAny(loc, "?#")
	if end < 0 {
		end = len(loc)
	}
	return strings.ReplaceAll(loc[:end], `\`, "/") + loc[end:]
}

// isScheme reports whether s is a URL scheme: a letter, then letters, digits, +, - and dots.
func isScheme(s string) bool {
	for i, r := range s {
		letter := 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z'
		if !letter && (i == 0 || !('0' <= r && r <= '9' || r == '+' || r == '-' || r == '.')) {
			return false
		}
	}
	return s != ""
}

// scopeCookies keeps the previewed app's cookies to its own preview: every preview is under one domain, and a
// cookie whose Domain attribute names it (or a parent) would reach every other preview, another member's too.
// Without Domain a cookie belongs to the host that set it alone. A cookie that would take the place of the
// preview's own grant cookie is dropped.
func scopeCookies(h http.Header) {
	lines := h.Values("Set-Cookie")
	if len(lines) == 0 {
		return
	}
	h.Del("Set-Cookie")
	for _, line := range lines {
		parts := strings.Split(line, ";")
		name, _, _ := strings.Cut(parts[0], "=")
		if strings.TrimSpace(name) == GrantCookie {
			continue
		}
		kept := parts[:1]
		for _, attr := range parts[1:] {
			if n, _, _ := strings.Cut(attr, "="); !strings.EqualFold(strings.TrimSpace(n), "domain") {
				kept = append(kept, attr)
			}
		}
		h.Add("Set-Cookie", strings.Join(kept, ";"))
	}
}

// withoutCookie removes the cookie name from the Cookie headers of h.
func withoutCookie(h http.Header, name string) {
	var keep []string
	for _, line := range h.Values("Cookie") {
		for _, part := range strings.Split(line, ";") {
			if n, _, _ := strings.Cut(strings.TrimSpace(part), "="); n != name && strings.TrimSpace(part) != "" {
				keep = append(keep, strings.TrimSpace(part))
			}
		}
	}
	h.Del("Cookie")
	if len(keep) > 0 {
		h.Set("Cookie", strings.Join(keep, "; "))
	}
}
