// Package e2b is a client for E2B's two planes: the control-plane REST API (sandbox lifecycle, snapshots, forks)
// and envd, the daemon inside each sandbox (processes over Connect RPC, filesystem RPC, and /files for content).
// It follows E2B's SDKs on the wire; it knows nothing of MCP.
package e2b

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-retryablehttp"
)

// DefaultDomain is E2B's public cloud.
const DefaultDomain = "e2b.app"

// EnvdPort is the port envd listens on inside every sandbox.
const EnvdPort = 49983

// DefaultUserAgent identifies this client to E2B. envd changes its answers for the exact User-Agent
// "connect-python", so a User-Agent of our own is always sent.
const DefaultUserAgent = "e2b-mcp/dev"

// Config says where E2B is and how to reach it. The zero value plus an API key talks to E2B's cloud.
type Config struct {
	// APIKey is sent as X-API-Key to the control plane and never to envd.
	APIKey string
	// Domain is E2B's base domain: the API lives at https://api.<Domain>, envd at https://49983-<id>.<Domain>.
	Domain string
	// APIURL overrides the control-plane base URL (E2B_API_URL), e.g. for a self-hosted E2B or the emulator.
	APIURL string
	// SandboxURL overrides the envd base URL for every sandbox (E2B_SANDBOX_URL); envd requests then carry the
	// E2b-Sandbox-Id and E2b-Sandbox-Port routing headers so that one host can serve all sandboxes.
	SandboxURL string
	// UserAgent defaults to DefaultUserAgent.
	UserAgent string
	// HTTPClient carries every request; nil means a client with sane timeouts. Share one across Clients so that
	// connections are reused when a Client is made per call (the key is read from the keyring on each call).
	// Whatever its CheckRedirect, a redirect to another origin is refused (ErrForeignRedirect).
	HTTPClient *http.Client
	// RequestTimeout bounds each unary request (not streams). Default 60 s, as in E2B's SDKs.
	RequestTimeout time.Duration
	// MaxRetries bounds retries of idempotent control-plane calls. Default 4; negative disables retries.
	MaxRetries int
	// RetryWaitMin and RetryWaitMax bound the backoff between retries. Defaults 200 ms and 5 s.
	RetryWaitMin, RetryWaitMax time.Duration
	// RedialFor is how long any request whose connection could not be made (refused, DNS, unreachable) is tried
	// again, within its context's deadline: nothing was sent, so no call can happen twice. Default 15 s; a
	// negative MaxRetries turns this off too.
	RedialFor time.Duration
	// Logger receives debug lines about retries; nil discards them. It never receives the API key.
	Logger *slog.Logger
}

// ConfigFromEnv fills the location fields from the variables E2B's SDKs read: E2B_DOMAIN, E2B_API_URL and
// E2B_SANDBOX_URL. The API key is deliberately not read from the environment.
func ConfigFromEnv(getenv func(string) string) Config {
	if getenv == nil {
		getenv = os.Getenv
	}
	return Config{
		Domain:     getenv("E2B_DOMAIN"),
		APIURL:     getenv("E2B_API_URL"),
		SandboxURL: getenv("E2B_SANDBOX_URL"),
	}
}

func (c Config) withDefaults() Config {
	if c.Domain == "" {
		c.Domain = DefaultDomain
	}
	if c.APIURL == "" {
		c.APIURL = "https://api." + c.Domain
	}
	c.APIURL = strings.TrimRight(c.APIURL, "/")
	c.SandboxURL = strings.TrimRight(c.SandboxURL, "/")
	if c.UserAgent == "" {
		c.UserAgent = DefaultUserAgent
	}
	if c.HTTPClient == nil {
		c.HTTPClient = NewHTTPClient()
	}
	c.HTTPClient = withSameOriginRedirects(c.HTTPClient)
	if c.RequestTimeout == 0 {
		c.RequestTimeout = 60 * time.Second
	}
	if c.MaxRetries == 0 {
		c.MaxRetries = 4
	}
	if c.MaxRetries < 0 {
		c.MaxRetries = 0
		c.RedialFor = 0
	} else if c.RedialFor == 0 {
		c.RedialFor = defaultRedialFor
	}
	if c.RetryWaitMin == 0 {
		c.RetryWaitMin = 200 * time.Millisecond
	}
	if c.RetryWaitMax == 0 {
		c.RetryWaitMax = 5 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.RedialFor > 0 {
		c.HTTPClient.Transport = redialing{next: c.HTTPClient.Transport, cfg: c}
	}
	return c
}

// NewHTTPClient returns the HTTP client used when Config.HTTPClient is nil: no overall timeout (streams may run
// for a long time; unary calls get RequestTimeout through their context) and a connection pool of its own.
func NewHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 16
	t.ResponseHeaderTimeout = 0
	return &http.Client{Transport: t}
}

// ErrForeignRedirect is a redirect to another origin (scheme, host or port) than the request's: it is never
// followed, because the request carries the API key or an envd access token, which must reach no one but E2B.
var ErrForeignRedirect = errors.New("refusing a redirect to another host: the API key and envd tokens are " +
	"sent to no one but E2B")

// errRedirectLoop is net/http's limit of ten redirects, which a CheckRedirect of its own has to keep.
var errRedirectLoop = errors.New("stopped after 10 redirects")

// withSameOriginRedirects returns a copy of hc (sharing its transport and connection pool) that follows a
// redirect only within the origin of the first request. net/http itself drops only Authorization and Cookie on a
// redirect to another domain; X-API-Key and X-Access-Token would follow.
func withSameOriginRedirects(hc *http.Client) *http.Client {
	c := *hc
	next := hc.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if first := via[0].URL; req.URL.Scheme != first.Scheme || !strings.EqualFold(req.URL.Host, first.Host) {
			return fmt.Errorf("%w (%s://%s → %s://%s)", ErrForeignRedirect, first.Scheme, first.Host,
				req.URL.Scheme, req.URL.Host)
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errRedirectLoop
		}
		return nil
	}
	return &c
}

// Client talks to one E2B deployment with one API key. It is cheap to make and safe for concurrent use.
type Client struct {
	cfg Config
	// rc carries control-plane calls, with E2B's retry policy (retry.go).
	rc *retryablehttp.Client
	// now is the clock for Retry-After dates.
	now func() time.Time
	// v1Only is set once E2B answered a v2 route of create or connect as a route it does not have (a
	// self-hosted E2B older than them); from then on this client sends the v1 forms.
	v1Only atomic.Bool
}

// NewClient checks cfg and returns a Client. The API key may be empty for envd-only use (envd never sees it),
// but control-plane calls then fail with ErrUnauthorized before any request is sent.
func NewClient(cfg Config) (*Client, error) {
	cfg = cfg.withDefaults()
	for name, u := range map[string]string{"API URL": cfg.APIURL, "sandbox URL": cfg.SandboxURL} {
		if u != "" && !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			return nil, errorf("", ErrInvalidArgument, "%s %q must start with http:// or https://", name, u)
		}
	}
	c := &Client{cfg: cfg, now: time.Now}
	c.rc = newRetryClient(c)
	return c, nil
}

// Domain is the configured base domain, used for sandboxes whose create/connect answer carries none.
func (c *Client) Domain() string { return c.cfg.Domain }
