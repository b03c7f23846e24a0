// Package server builds e2b-mcp's MCP server: the mcp-go server with the tools, the middleware every tool call
// passes through (caller → lease renewal → policy → tool → audit), the E2B client source (the owner's key read
// from the OS keyring on each call, or the in-process emulator of the local backend), the orphan sweeper, and
// the transports: stdio, and streamable HTTP plus SSE with bearer-token authentication on one listener.
package server

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/e2b-mcp/e2b-mcp/audit"
	"github.com/e2b-mcp/e2b-mcp/credentials"
	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/egress"
	"github.com/e2b-mcp/e2b-mcp/lifecycle"
	"github.com/e2b-mcp/e2b-mcp/policy"
	"github.com/e2b-mcp/e2b-mcp/state"
	"github.com/e2b-mcp/e2b-mcp/tools"
)

// Transports.
const (
	TransportStdio = "stdio"
	TransportHTTP  = "http"
	TransportSSE   = "sse"
)

// Backends.
const (
	BackendE2B   = "e2b"
	BackendLocal = "local"
)

// Defaults of Config.
const (
	DefaultListen        = "127.0.0.1:8931"
	DefaultSession       = "default"
	DefaultLease         = 4 * time.Hour
	DefaultSweepInterval = 5 * time.Minute
	// ApprovalTTL is how long an approval request waits for a human, and how long a granted approval waits for
	// the call it allows. `e2b-mcp approve` opens the approvals with the same value.
	ApprovalTTL = 15 * time.Minute
	// policyWatchInterval is how often the policy file is checked for changes (SIGHUP reloads at once).
	policyWatchInterval = 2 * time.Second
	// shutdownGrace bounds a graceful shutdown: in-flight calls get this long to finish.
	shutdownGrace = 10 * time.Second
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
	// E2B locates E2B (Domain, APIURL, SandboxURL); its APIKey and HTTPClient are ignored.
	E2B e2b.Config
	// Backend is e2b (default) or local: the emulator in-process, for trying the server without an account.
	Backend string
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
	// NoConnectPage turns the connect page off: members without a key are only told to run `e2b-mcp auth login`.
	NoConnectPage bool
	// OAuth, when set, accepts access tokens of the team's authorization server (MCP authorization). With
	// neither TokensFile nor OAuth there is no authentication, and only a loopback address is served.
	OAuth *OAuthConfig
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
	// CredentialStore overrides where credentials are read (tests); nil means Secrets for the e2b backend with
	// its own clients, and none for the local backend or overridden Clients.
	CredentialStore credentials.SecretStore

	// Secrets is where owners' E2B keys and the state store's data key live: the OS keyring (nil means
	// credentials.Keyring{}, service "e2b-mcp") or the encrypted key store of a host without one.
	Secrets credentials.SecretStore
	// DataKeys overrides the state store's data key source (tests); nil means the keyring entry.
	DataKeys state.KeySource
	// Clients overrides the source of E2B clients (tests); nil means the keyring, or the emulator for local.
	Clients tools.ClientSource
	// Now is the clock of leases, approvals and audit (nil: time.Now).
	Now func() time.Time
}

func (c Config) withDefaults() (Config, error) {
	if c.Name == "" {
		c.Name = "e2b-mcp"
	}
	if c.Version == "" {
		c.Version = "devel"
	}
	if c.Session == "" {
		c.Session = DefaultSession
	}
	if c.Transport == "" {
		c.Transport = TransportStdio
	}
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.Backend == "" {
		c.Backend = BackendE2B
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
		c.Secrets = credentials.Keyring{}
	}
	switch {
	case !slices.Contains([]string{TransportStdio, TransportHTTP, TransportSSE}, c.Transport):
		return c, fmt.Errorf("unknown transport %q (want stdio, http or sse)", c.Transport)
	case c.Backend != BackendE2B && c.Backend != BackendLocal:
		return c, fmt.Errorf("unknown backend %q (want e2b or local)", c.Backend)
	case c.StateDir == "":
		return c, errors.New("no state directory given")
	case c.Store != "" && !state.IsPostgresURL(c.Store):
		return c, errStoreURL
	case c.Store != "" && c.Backend == BackendLocal:
		return c, errors.New("the local backend keeps its records in a temporary store of its own; it takes no --store")
	case c.Lease < 0:
		return c, fmt.Errorf("the lease must be positive, got %s", c.Lease)
	case c.SweepInterval < 0:
		return c, fmt.Errorf("the sweep interval must be positive, got %s", c.SweepInterval)
	}
	if err := c.Egress.Check(); err != nil {
		return c, err
	}
	if err := credentials.CheckOwner(c.Owner); err != nil {
		return c, fmt.Errorf("owner: %w", err)
	}
	if c.OAuth != nil {
		o, err := c.OAuth.check()
		if err != nil {
			return c, fmt.Errorf("OAuth: %w", err)
		}
		c.OAuth = &o
	}
	if err := checkSessionName(c.Session); err != nil {
		return c, err
	}
	origins := make([]string, 0, len(c.AllowOrigins))
	for _, o := range c.AllowOrigins {
		norm, err := ParseOrigin(o)
		if err != nil {
			return c, fmt.Errorf("allowed origin: %w", err)
		}
		origins = append(origins, norm)
	}
	c.AllowOrigins = origins
	if _, err := lifecycle.ParseOrphanAction(string(c.OrphanAction)); err != nil {
		return c, err
	}
	return c, nil
}

// Server is a configured e2b-mcp server. Serve it with Run (or ServeStdio / Handler), then Close it.
type Server struct {
	cfg        Config
	log        *slog.Logger
	mcp        *mcpserver.MCPServer
	store      state.Store
	clients    tools.ClientSource
	egress     *egress.Policy
	policies   *policy.Holder
	approvals  *policy.Approvals
	audit      *audit.Log
	tokens     *credentials.Tokens // nil: no bearer tokens file
	oauth      *oauthVerifier      // nil: no OAuth
	refusals   *refusals           // refused bearer tokens per remote address
	authServer *authServer         // nil: no OAuth
	// connector is the connect page (nil: none); connectTickets sign the request states of its input requests,
	// with a key of their own so that they never pass for approvals (elicit's).
	connector      *connector
	connectTickets *elicitations
	dataKeys       state.KeySource // the state store's: replicas derive their tickets' keys from it
	approvalPage   *approvalPage   // where a human answers an approval the client did not ask about
	localPage      *localPage      // stdio: the connect and approval pages on 127.0.0.1, started when first needed
	localPageMu    sync.Mutex
	local          *localBackend // nil unless Backend is local
	elicit         *elicitations
	sessions       *sessionOwners
	modern         *modernCalls // calls of protocol 2026-07-28 over streamable HTTP, for their cancels
	limits         httpLimits
	sweeper        *lifecycle.Sweeper
	shapes         map[string]*argShape // tool name → the argument names its schema declares
	leases         leaseCache
	metrics        *metrics

	closeOnce sync.Once
}

// New builds the server: it opens the state store, the policy, the approvals and the audit log, starts the
// emulator of the local backend, and registers every tool behind the middleware chain. It starts nothing that
// runs in the background; Run does.
func New(cfg Config) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger, sessions: newSessionOwners(), modern: newModernCalls(), limits: newHTTPLimits(cfg.Tools), leases: leaseCache{last: map[tools.Caller]time.Time{}}}
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()

	storeAt, keys := cfg.StateDir, cfg.DataKeys
	if cfg.Store != "" {
		storeAt = cfg.Store
	}
	if cfg.Backend == BackendLocal {
		if s.local, err = startLocalBackend(cfg.Logger); err != nil {
			return nil, err
		}
		// Emulated sandboxes vanish with the process, and so do their records: a store of its own in a
		// temporary directory, sealed with a key that lives only in memory, so that the local backend needs
		// no keyring at all and never mixes its records with those of real sandboxes.
		storeAt = s.local.storeDir()
		if keys == nil {
			key := make([]byte, state.DataKeySize)
			if _, err := rand.Read(key); err != nil {
				return nil, err
			}
			keys = state.StaticKeySource(key)
		}
	}
	if keys == nil {
		keys = credentials.StateKeys(cfg.Secrets)
	}
	s.metrics = newMetrics()
	if s.store, err = state.OpenAt(storeAt, state.Options{Keys: keys, Now: cfg.Now}); err != nil {
		return nil, err
	}
	s.dataKeys = keys

	switch {
	case cfg.Clients != nil:
		s.clients = cfg.Clients
	case s.local != nil:
		s.clients = s.local.clients(s.metrics)
	default:
		s.clients = newStoredKeyClients(cfg.Secrets, cfg.E2B, cfg.Logger, s.metrics)
	}
	s.egress = &egress.Policy{Limits: cfg.Egress, Credentials: cfg.Credentials, Store: cfg.CredentialStore, Owners: cfg.EgressScopes}
	if s.egress.Store == nil && cfg.Clients == nil && s.local == nil {
		s.egress.Store = cfg.Secrets
	}

	if s.policies, err = policy.NewHolder(cfg.PolicyFile); err != nil {
		return nil, err
	}
	if s.approvals, err = approvalsOf(s.store, cfg.StateDir, cfg.Now); err != nil {
		return nil, err
	}
	s.metrics.watchStore(s.store, s.approvals, func(err error) { s.log.Warn("reading a metric", "error", err) })
	if s.audit, err = openAudit(cfg); err != nil {
		return nil, err
	}
	s.refusals = newRefusals(cfg.Now)
	if cfg.TokensFile != "" {
		var rules []credentials.OwnerRule
		if cfg.OAuth != nil {
			rule, err := cfg.OAuth.tokensFileRule()
			if err != nil {
				return nil, err
			}
			rules = append(rules, rule)
		}
		if s.tokens, err = credentials.OpenTokens(cfg.TokensFile, rules...); err != nil {
			return nil, err
		}
		s.tokens.OnReloadError = func(err error) { s.log.Error("tokens file", "error", err) }
	}
	if cfg.OAuth != nil {
		s.authServer = &authServer{issuer: cfg.OAuth.Issuer, client: e2b.NewHTTPClient(), now: cfg.Now} // not E2B: not counted as E2B's
		s.oauth = newOAuthVerifier(*cfg.OAuth, s.authServer)
	}
	if s.elicit, err = s.newTickets("e2b-mcp approval tickets"); err != nil {
		return nil, err
	}
	if err := s.setUpConnectPage(); err != nil {
		return nil, err
	}
	if err := s.setUpApprovalPage(); err != nil {
		return nil, err
	}
	s.sweeper = &lifecycle.Sweeper{
		Store:  s.store,
		Client: s.clients.Client,
		Action: cfg.OrphanAction,
		Now:    cfg.Now,
		Logger: cfg.Logger,
	}
	s.mcp = s.buildMCP()
	ok = true
	return s, nil
}

func (s *Server) buildMCP() *mcpserver.MCPServer {
	hooks := &mcpserver.Hooks{}
	hooks.AddOnUnregisterSession(func(_ context.Context, cs mcpserver.ClientSession) {
		s.sessions.forget(cs.SessionID())
	})
	hooks.AddAfterListResources(s.listSandboxFiles)
	m := mcpserver.NewMCPServer(s.cfg.Name, s.cfg.Version,
		mcpserver.WithRecovery(),
		mcpserver.WithToolCapabilities(false),
		mcpserver.WithHooks(hooks),
		mcpserver.WithInstructions(instructions),
		mcpserver.WithToolHandlerMiddleware(s.governCall),
		mcpserver.WithResourceRecovery(),
		mcpserver.WithResourceCapabilities(false, false),
		mcpserver.WithResourceHandlerMiddleware(s.governRead),
	)
	deps := tools.Deps{
		Clients: keyProbe{s.clients},
		Egress:  s.egress,
		Store:   s.store,
		Config:  s.cfg.Tools,
		Logger:  s.log,
		Now:     s.cfg.Now,
	}
	all := tools.All(deps)
	s.shapes = make(map[string]*argShape, len(all))
	for _, t := range all {
		s.shapes[t.Tool.Name] = shapeOfTool(t.Tool)
	}
	m.AddTools(all...)
	m.AddResourceTemplates(tools.ResourceTemplates(deps)...)
	return m
}

const instructions = "e2b-mcp runs code in E2B cloud sandboxes (isolated Linux VMs). Create a sandbox with " +
	"e2b_create_sandbox, then run commands with e2b_exec and move files with e2b_read_file and e2b_write_file. " +
	"Sandboxes belong to this session and survive restarts of the server; pause them when idle and delete them " +
	"when done. Some calls may need a human's approval, as the policy decides."

// MCP is the underlying mcp-go server (for in-process clients and tests).
func (s *Server) MCP() *mcpserver.MCPServer { return s.mcp }

// Store is the state store.
func (s *Server) Store() state.Store { return s.store }

// Approvals are the approval requests of calls that need a human.
func (s *Server) Approvals() *policy.Approvals { return s.approvals }

// Policies holds the policy in force.
func (s *Server) Policies() *policy.Holder { return s.policies }

// LocalURL is the address of the local backend's emulator, "" for the e2b backend.
func (s *Server) LocalURL() string {
	if s.local == nil {
		return ""
	}
	return s.local.url
}

// Close releases the store and stops the local backend's emulator. It kills no E2B sandbox.
func (s *Server) Close() error {
	var errs []error
	s.closeOnce.Do(func() {
		if s.audit != nil {
			errs = append(errs, s.audit.Close())
		}
		if s.store != nil {
			errs = append(errs, s.store.Close())
		}
		if s.local != nil {
			s.local.close()
		}
		if s.localPage != nil {
			s.localPage.close()
		}
	})
	return errors.Join(errs...)
}

// newSharedHTTPClient is the one HTTP client of every E2B client a source makes, so connections are reused
// across calls even though a client is made per call (the key is read from the keyring each time). E2B's error
// answers through it are counted in m.
func newSharedHTTPClient(m *metrics) *http.Client { return m.httpClient(e2b.NewHTTPClient()) }

func openAudit(cfg Config) (*audit.Log, error) { return audit.Open(cfg.StateDir, audit.Options{}) }
