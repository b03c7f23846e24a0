package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/e2b-mcp/e2b-mcp/credentials"
	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/egress"
	"github.com/e2b-mcp/e2b-mcp/internal/loopback"
	"github.com/e2b-mcp/e2b-mcp/lifecycle"
	"github.com/e2b-mcp/e2b-mcp/server/browsers"
	"github.com/e2b-mcp/e2b-mcp/server/oauth"
	"github.com/e2b-mcp/e2b-mcp/state"
	"github.com/e2b-mcp/e2b-mcp/tools"
)

// Transports.
const (
	TransportStdio = "stdio"
	TransportHTTP  = "http"
	TransportSSE   = "sse"
)

// Defaults of Config.
const (
	DefaultListen        = "127.0.0.1:8931"
	DefaultSession       = "default"
	DefaultLease         = 4 * time.Hour
	DefaultSweepInterval = 5 * time.Minute
)

// Config is everything `e2b-mcp serve` decides. Zero fields take the documented defaults.
type Config struct {
	// Name and Version identify the server to clients.
	Name, Version string
	// Owner is the principal over stdio, and over HTTP when no tokens file is given. Required.
	Owner string
	// Session names the sandboxes' group for stdio callers and for HTTP callers without an X-E2B-MCP-Session
	// header (default "default").
	Session string
	// Transport is stdio (default), http or sse. http and sse serve the same endpoints on one listener.
	Transport string
	// Listen is the HTTP address (default 127.0.0.1:8931). Without TokensFile it must be a loopback address.
	Listen string
	// Backend is where the sandboxes live: E2B{} (the default: E2B's cloud, or the E2B its Location names) or
	// Local{}, the emulator in-process, for trying the server without an account.
	Backend Backend
	// StateDir holds the state store, approvals and audit log. Required.
	StateDir string
	// DefaultStateDir is the state directory `e2b-mcp approve` uses without --state-dir; when StateDir is another,
	// the approval hints given to callers name it.
	DefaultStateDir string
	// Store is a PostgreSQL URL (postgres://...) for records and approvals that replicas share; empty means
	// the embedded store in StateDir. The audit log stays in StateDir either way.
	Store string
	// Tools configures the tools (output budget, storage roots, checkpoint policy, ...).
	Tools tools.Config
	// ClientProfile names the client whose limits results are sized to (tools.ClientProfiles), whatever client
	// calls; empty: each caller's own, by the clientInfo it sends.
	ClientProfile string
	// PolicyFile is the policy; empty means the built-in policy.
	PolicyFile string
	// Lease is how long a session lives without calls before its sandboxes get the orphan action (default 4h).
	Lease time.Duration
	// OrphanAction is what happens to sandboxes of lapsed sessions (default pause).
	OrphanAction lifecycle.OrphanAction
	// SweepInterval is the time between orphan sweeps (default 5m). The first sweep runs at start.
	SweepInterval time.Duration
	// TokensFile holds the HTTP bearer tokens; empty means none.
	TokensFile string
	// PublicURL is the URL clients reach this server at (https://mcp.example.com), behind a proxy; the connect
	// page's links start with it. Without it, an HTTP server on a loopback address uses its listener's address.
	PublicURL string
	// PrivatePreviews creates sandboxes with public traffic off and makes e2b_get_url's links go through this
	// server's preview proxy, on a listener of its own on 127.0.0.1 (see preview.go); off, links are E2B's public
	// address of the port.
	PrivatePreviews bool
	// PreviewURL (scheme://domain[:port]) is where an HTTP server serves private previews, each port of a sandbox at
	// <port>-<id>.domain (wildcard DNS and certificate pointing at this server); setting it turns private previews
	// on. Its domain must not be the public URL's, nor above or below it.
	PreviewURL string
	// NoConnectPage turns the connect page off: members without a key are only told to run `e2b-mcp auth login`.
	NoConnectPage bool
	// OAuth, when set, accepts access tokens of the team's authorization server (MCP authorization). With
	// neither TokensFile nor OAuth there is no authentication, and only a loopback address is served.
	OAuth *oauth.Config
	// ClientAddressHeader names the header a trusted proxy in front of the server sets to the client's address
	// (X-Forwarded-For, X-Real-IP); its last entry, the one the proxy added, is the address that refused tokens are
	// counted and logged by. Empty: the connection's address. Set it only when every request comes through that
	// proxy: a client reaching the server directly could send any address in it.
	ClientAddressHeader string
	// AllowOrigins are the web origins (scheme://host[:port]) besides the server's own whose pages may call the
	// HTTP endpoints, for browser-based MCP clients; a request from any other page is refused.
	AllowOrigins []string
	// Logger receives the server's logs (stderr in the CLI); nil discards them.
	Logger *slog.Logger

	// Egress limits where every sandbox may connect (an allow-list, a deny-list, or no internet); the model
	// cannot change it.
	Egress egress.Limits
	// Credentials names the owner's registered credentials that sandboxes get (see `e2b-mcp credentials`); nil
	// means all of them, empty none.
	Credentials []string
	// EgressScopes are the egress file's owners and sessions whose limits or credentials differ from the above.
	EgressScopes map[string]egress.OwnerScope

	// Secrets is where owners' E2B keys, the credentials sandboxes get and the state store's data key live: the OS
	// keyring (nil means service "e2b-mcp" through a credentials.KeyringCache, which reads an entry again only when
	// the keyring says it changed) or the encrypted key store of a host without one. The local backend reads none
	// of them.
	Secrets credentials.SecretStore
	// Now is the clock of leases, approvals and audit (nil: time.Now).
	Now func() time.Time
}

// Check returns c with its defaults filled in, or c's first mistake. This is the one place a Config is checked:
// New checks the Config it is given, and `e2b-mcp serve` checks the one its flags make before it opens anything.
// Each message names the setting as serve's flag of the same meaning does, so that it reads the same either way.
func (c Config) Check() (Config, error) {
	if c.Name == "" {
		c.Name = "e2b-mcp"
	}
	if c.Version == "" {
		c.Version = "devel"
	}
	if c.Session == "" {
		c.Session = DefaultSession
	}
	if _, ok := tools.ClientNamed(c.ClientProfile); c.ClientProfile != "" && !ok {
		return c, fmt.Errorf("--client-profile %q: want one of %s", c.ClientProfile,
			strings.Join(tools.ClientProfiles(), ", "))
	}
	if c.Transport == "" {
		c.Transport = TransportStdio
	}
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.Backend == nil {
		c.Backend = E2B{}
	}
	if c.Lease == 0 {
		c.Lease = DefaultLease
	}
	if c.OrphanAction == "" {
		c.OrphanAction = lifecycle.OrphanPause
	}
	if c.SweepInterval == 0 {
		c.SweepInterval = DefaultSweepInterval
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Secrets == nil {
		c.Secrets = credentials.NewKeyringCache(credentials.Keyring{})
	}
	switch {
	case !slices.Contains([]string{TransportStdio, TransportHTTP, TransportSSE}, c.Transport):
		return c, fmt.Errorf("--transport %q: want stdio, http or sse", c.Transport)
	case c.StateDir == "":
		return c, errors.New("no state directory given")
	case c.Lease < 0:
		return c, errors.New("--lease must be positive")
	case c.SweepInterval < 0:
		return c, errors.New("--sweep-interval must be positive")
	}
	if err := CheckStoreURL(c.Store); err != nil {
		return c, err
	}
	if _, local := c.Backend.(Local); local && c.Store != "" {
		return c, errors.New("--store and --backend local do not go together: the local backend keeps its records in a " +
			"temporary store of its own")
	}
	if _, err := lifecycle.ParseOrphanAction(string(c.OrphanAction)); err != nil {
		return c, fmt.Errorf("--orphan-action: %w", err)
	}
	if t := c.Tools.OnTimeout; t != "" && t != e2b.OnTimeoutPause && t != e2b.OnTimeoutKill {
		return c, fmt.Errorf("--on-timeout %q: want pause or kill", t)
	}
	if l := c.Tools.ExecForegroundLimit; l < 0 || l > tools.MaxExecForegroundLimit {
		return c, fmt.Errorf("--exec-foreground-limit %v: want a duration above 0 and at most %v", l,
			tools.MaxExecForegroundLimit)
	}
	if err := checkSessionName(c.Session); err != nil {
		return c, fmt.Errorf("--session: %w", err)
	}
	if err := credentials.CheckOwner(c.Owner); err != nil {
		return c, fmt.Errorf("--owner: %w", err)
	}
	if err := c.Egress.Check(); err != nil {
		return c, err
	}
	origins := make([]string, 0, len(c.AllowOrigins))
	for _, o := range c.AllowOrigins {
		norm, err := browsers.ParseOrigin(o)
		if err != nil {
			return c, fmt.Errorf("--allow-origin: %w", err)
		}
		origins = append(origins, norm)
	}
	c.AllowOrigins = origins
	if h := c.ClientAddressHeader; h != "" && (!isHeaderName(h) || c.Transport == TransportStdio) {
		return c, fmt.Errorf("--client-address-header %q: want the name of an HTTP header, for an HTTP server", h)
	}
	// Over stdio the pages are served on 127.0.0.1 at an address of their own, whatever the public URL.
	if c.PublicURL != "" && c.Transport != TransportStdio {
		if err := checkPublicURL("--public-url", c.PublicURL); err != nil {
			return c, err
		}
	}
	if err := checkPreviews(&c); err != nil {
		return c, err
	}
	if c.OAuth != nil {
		o, err := checkOAuth(*c.OAuth)
		if err != nil {
			return c, fmt.Errorf("OAuth: %w", err)
		}
		c.OAuth = &o
	}
	return c, nil
}

// checkOAuth checks the URLs of an OAuth configuration and fills in the default owner claim.
func checkOAuth(c oauth.Config) (oauth.Config, error) {
	if c.OwnerClaim == "" {
		c.OwnerClaim = oauth.DefaultOwnerClaim
	}
	if err := checkPublicURL("the OAuth issuer", c.Issuer); err != nil {
		return c, err
	}
	if err := checkPublicURL("the resource URL", c.Resource); err != nil {
		return c, err
	}
	return c, nil
}

// checkPublicURL accepts absolute https URLs without query or fragment, and http ones on a loopback host (for
// trying things on one machine).
func checkPublicURL(what, raw string) error {
	u, err := url.Parse(raw)
	switch {
	case raw == "":
		return fmt.Errorf("%s is not set", what)
	case err != nil:
		return fmt.Errorf("%s %q: %w", what, raw, err)
	case u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil:
		return fmt.Errorf("%s %q must be an absolute URL without user, query or fragment", what, raw)
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && loopback.Host(u.Hostname()):
		return nil
	}
	return fmt.Errorf("%s %q must use https (plain http only on a loopback address)", what, raw)
}

// isHeaderName reports whether h is an HTTP header's name (RFC 9110's token).
func isHeaderName(h string) bool {
	return !strings.ContainsFunc(h, func(r rune) bool {
		return r <= ' ' || r >= 0x7f ||
			strings.ContainsRune(`()<>@,;:\"/[]?={}`, r)
	})
}

// CheckStoreURL refuses a store (--store) that is not a PostgreSQL URL; "" (the embedded store) is fine. The
// value is not quoted back: a URL may carry a password.
func CheckStoreURL(store string) error {
	if store == "" || state.IsPostgresURL(store) {
		return nil
	}
	return errors.New("--store: want a postgres:// URL (postgres://user@host:port/database)")
}
