package e2btest

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"
)

// EdgeProxy is a reverse proxy in front of envd, as E2B's edge is one: net/http/httputil's ReverseProxy with an
// HTTP/1.1 transport, streaming answers through as they come. It carries a hazard of that kind of proxy
// (golang/go#40747): having forwarded a request body of declared length, the transport reads the body once more
// to check that nothing follows, but once the answer has begun the proxy's own server has closed that body; the
// read fails, the transport drops its connection to envd, and the answer is cut short. Which comes first is a
// matter of scheduling; EdgeProxyOptions.BodyLag makes it certain.
type EdgeProxy struct {
	srv *httptest.Server
}

// EdgeProxyOptions configure an EdgeProxy.
type EdgeProxyOptions struct {
	// Target is the envd behind the proxy: the emulator's URL, or a real envd's.
	Target string
	// AccessToken, when set, replaces the X-Access-Token of each request for which it returns ok: it maps the
	// token a sandbox record holds to the one a real envd was booted with, as routing to it from the emulator's
	// control plane needs. A request whose token it refuses goes through unchanged (and envd refuses it).
	AccessToken func(sandboxID, token string) (string, bool)
	// BodyLag delays every read of a request body after its first, as a proxy whose host is busy at that moment
	// would; it widens the window in which the hazard above cuts an answer.
	BodyLag time.Duration
}

// NewEdgeProxy starts an EdgeProxy on a loopback port. Close it when done.
func NewEdgeProxy(o EdgeProxyOptions) (*EdgeProxy, error) {
	target, err := url.Parse(o.Target)
	if err != nil {
		return nil, err
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host
			if o.AccessToken != nil {
				if tok, ok := o.AccessToken(pr.In.Header.Get("E2b-Sandbox-Id"), pr.In.Header.Get("X-Access-Token")); ok {
					pr.Out.Header.Set("X-Access-Token", tok)
				}
			}
			if o.BodyLag > 0 && pr.Out.Body != nil {
				pr.Out.Body = &laggingBody{ReadCloser: pr.Out.Body, lag: o.BodyLag}
			}
		},
		Transport:     &http.Transport{MaxIdleConnsPerHost: 16, DisableCompression: true},
		FlushInterval: -1,
		ErrorLog:      log.New(io.Discard, "", 0), // a cut answer shows at the client
	}
	return &EdgeProxy{srv: httptest.NewServer(rp)}, nil
}

// URL is the proxy's base URL: a SandboxURL for clients (it routes by the E2b-Sandbox-Id header as the
// emulator does).
func (p *EdgeProxy) URL() string { return p.srv.URL }

// Close stops the proxy and drops its connections.
func (p *EdgeProxy) Close() {
	p.srv.CloseClientConnections()
	p.srv.Close()
}

// laggingBody delays each read after the first.
type laggingBody struct {
	io.ReadCloser
	lag  time.Duration
	mu   sync.Mutex
	read bool
}

func (b *laggingBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	lag := b.read
	b.read = true
	b.mu.Unlock()
	if lag {
		time.Sleep(b.lag)
	}
	return b.ReadCloser.Read(p)
}
