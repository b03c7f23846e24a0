// Package server builds e2b-mcp's MCP server from a checked Config: the mcp-go server with the tools and the
// sandboxes' files as resources; the pipeline every tool call and resource read goes through (govern, in
// pipeline.go: caller → audit reservation → lease → argument check → policy → approval → run → audit record); the
// backend (E2B, with each owner's key read from Config.Secrets, the OS keyring or the encrypted key store, on every
// call; or the in-process emulator of the local backend); the orphan sweeper and the budgets; and what it serves:
// stdio, or one HTTP listener where the server names the caller by a bearer token or OAuth access token
// (server/httpauth, server/oauth), applies the browser rules (server/browsers) and the body limits, and mounts MCP's
// streamable HTTP and SSE transports with their protocol sessions (server/mcphttp), the connect and approval pages
// (server/pages), the preview proxy (server/preview), /metrics and /healthz. On both transports MCP's Tasks
// extension is answered in front of mcp-go (server/tasks), its calls still going through the pipeline.
package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/e2b-mcp/e2b-mcp/audit"
	"github.com/e2b-mcp/e2b-mcp/credentials"
	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/egress"
	"github.com/e2b-mcp/e2b-mcp/lifecycle"
	"github.com/e2b-mcp/e2b-mcp/policy"
	"github.com/e2b-mcp/e2b-mcp/server/httpauth"
	"github.com/e2b-mcp/e2b-mcp/server/mcphttp"
	"github.com/e2b-mcp/e2b-mcp/server/oauth"
	"github.com/e2b-mcp/e2b-mcp/server/preview"
	"github.com/e2b-mcp/e2b-mcp/server/synclink"
	"github.com/e2b-mcp/e2b-mcp/server/tasks"
	"github.com/e2b-mcp/e2b-mcp/server/tickets"
	"github.com/e2b-mcp/e2b-mcp/state"
	"github.com/e2b-mcp/e2b-mcp/tools"
)

const (
	// ApprovalTTL is how long an approval request waits for a human, and how long a granted approval waits for
	// the call it allows. `e2b-mcp approve` opens the approvals with the same value.
	ApprovalTTL = 15 * time.Minute
	// policyWatchInterval is how often the policy file is checked for changes (SIGHUP reloads at once).
	policyWatchInterval = 2 * time.Second
	// shutdownGrace bounds a graceful shutdown: in-flight calls get this long to finish.
	shutdownGrace = 10 * time.Second
)

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
	oauth      *oauth.Verifier     // nil: no OAuth
	bearer     *httpauth.Bearer    // nil: neither tokens nor OAuth, no HTTP caller authenticates
	authServer *oauth.AuthServer   // nil: no OAuth
	pages      *browserPages       // the connect and approval pages
	dataKeys   state.KeySource     // the state store's: replicas derive their tickets' keys from it
	previews   *preview.Proxy      // private previews' proxy; nil when previews are public
	backend    *startedBackend     // nil until started
	elicit     *tickets.Tickets
	sessions   *mcphttp.Sessions
	limits     httpLimits
	sweeper    *lifecycle.Sweeper
	budgets    *lifecycle.Budgets
	// tools are the definitions by name: each tool's argument check, defaults, approval view, whether its calls
	// may become MCP tasks and whether its results may carry images.
	tools   map[string]tools.Tool
	tasks   *tasks.Tasks // the Tasks extension's messages, answered in front of mcp-go
	leases  leaseCache
	metrics *metrics

	// syncLinks make the sync tools' links, signed and spent as syncTickets, which syncHandler serves, on a
	// server that cannot see its users' disks (synclinks.go); nil: none.
	syncLinks   *synclink.Links
	syncTickets *tickets.Tickets
	syncHandler *synclink.Handler

	closeOnce sync.Once
}

// New builds the server: it opens the state store, the policy, the approvals and the audit log, starts the
// emulator of the local backend, and registers every tool behind the middleware chain. It starts nothing that
// runs in the background; Run does.
func New(cfg Config) (*Server, error) {
	cfg, err := cfg.Check()
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger, sessions: mcphttp.NewSessions(ownerOf),
		limits: newHTTPLimits(cfg.Tools), leases: leaseCache{last: map[tools.Caller]time.Time{}}}
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()

	s.metrics = newMetrics()
	if s.backend, err = cfg.Backend.start(cfg, s.metrics); err != nil {
		return nil, err
	}
	if s.store, err = state.OpenAt(s.backend.storeAt, state.Options{Keys: s.backend.keys, Now: cfg.Now}); err != nil {
		return nil, err
	}
	s.dataKeys = s.backend.keys
	s.clients = s.backend.clients
	s.egress = &egress.Policy{Limits: cfg.Egress, Credentials: cfg.Credentials, Store: s.backend.secrets,
		Owners: cfg.EgressScopes}

	if s.policies, err = tools.PolicyTools().NewHolder(cfg.PolicyFile); err != nil {
		return nil, err
	}
	if s.approvals, err = approvalsOf(s.store, cfg.StateDir, cfg.Now); err != nil {
		return nil, err
	}
	s.metrics.watchStore(s.store, s.approvals, cfg.Now, func(err error) { s.log.Warn("reading a metric", "error", err) })
	if s.audit, err = openAudit(cfg); err != nil {
		return nil, err
	}
	if cfg.TokensFile != "" {
		var rules []credentials.OwnerRule
		if cfg.OAuth != nil {
			rule, err := cfg.OAuth.TokensFileRule()
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
		s.authServer = oauth.NewAuthServer(cfg.OAuth.Issuer, e2b.NewHTTPClient(), // not E2B: not counted as E2B's
			cfg.Now)
		s.oauth = oauth.NewVerifier(*cfg.OAuth, s.authServer)
	}
	s.bearer = s.newBearer()
	if s.elicit, err = s.newTickets("e2b-mcp approval tickets", elicitationTTL); err != nil {
		return nil, err
	}
	s.pages = &browserPages{stdio: cfg.Transport == TransportStdio, rules: s.browserRules(), log: s.log}
	if err := s.setUpConnectPage(); err != nil {
		return nil, err
	}
	if err := s.setUpApprovalPage(); err != nil {
		return nil, err
	}
	if err := s.setUpPreviews(); err != nil {
		return nil, err
	}
	if err := s.setUpSyncLinks(); err != nil {
		return nil, err
	}
	s.sweeper = &lifecycle.Sweeper{
		Store:  s.store,
		Client: s.clients.Client,
		Action: cfg.OrphanAction,
		Now:    cfg.Now,
		Logger: cfg.Logger,
	}
	s.budgets = &lifecycle.Budgets{
		Store:  s.store,
		Client: s.clients.Client,
		Limits: func(owner string) policy.Limits { return s.policies.Current().Limits(owner) },
		Now:    cfg.Now,
		Logger: cfg.Logger,
		Paused: s.recordBudgetPause,
	}
	s.mcp = s.buildMCP()
	ok = true
	return s, nil
}

// newBearer is what names HTTP callers by their tokens: nil when they have none (no tokens file, no OAuth).
func (s *Server) newBearer() *httpauth.Bearer {
	if !s.authenticated() {
		return nil
	}
	o := httpauth.Options{ClientAddressHeader: s.cfg.ClientAddressHeader, Now: s.cfg.Now, Log: s.log}
	if s.tokens != nil {
		o.Tokens = s.tokens
	}
	if s.oauth != nil {
		o.OAuth, o.Challenge = s.oauth, s.cfg.OAuth.Challenge
	}
	return httpauth.New(o)
}

func (s *Server) buildMCP() *mcpserver.MCPServer {
	hooks := &mcpserver.Hooks{}
	hooks.AddOnUnregisterSession(func(_ context.Context, cs mcpserver.ClientSession) {
		s.sessions.Forget(cs.SessionID())
	})
	hooks.AddAfterListResources(s.listSandboxFiles)
	m := mcpserver.NewMCPServer(s.cfg.Name, s.cfg.Version, append(identityOptions(),
		mcpserver.WithHooks(hooks),
		mcpserver.WithToolHandlerMiddleware(s.governTools),
		mcpserver.WithToolFilter(s.toolsFor),
		mcpserver.WithResourceHandlerMiddleware(s.governResources),
	)...)
	deps := tools.Deps{
		Clients:  keyProbe{withEarlyClient{s.clients}},
		Egress:   s.egress,
		Store:    s.store,
		Previews: s.toolPreviews(),
		Config:   s.cfg.Tools,
		Limits:   func(owner string) policy.Limits { return s.policies.Current().Limits(owner) },
		Logger:   s.log,
		Now:      s.cfg.Now,
	}
	if s.syncLinks != nil {
		deps.SyncLinks = s.syncLinks
		s.syncHandler = s.newSyncHandler(deps)
	}
	all := tools.All(deps)
	s.tools = make(map[string]tools.Tool, len(all))
	for _, t := range all {
		s.tools[t.Tool.Name] = t
	}
	s.tasks = tasks.New(tasks.Options{
		Calls:    m,
		Records:  s.store,
		Commands: tools.NewTaskCommands(deps),
		Kind:     func(tool string) tools.TaskKind { return s.tools[tool].Tasks },
		Caller:   s.callerFor,
		Client:   s.client,
		Wait:     s.cfg.Tools.TaskWait,
		Now:      s.cfg.Now,
		Log:      s.log,
	})
	m.AddTools(tools.ServerTools(all)...)
	m.AddResourceTemplates(tools.ResourceTemplates(deps)...)
	return m
}

const instructions = "e2b-mcp runs code in E2B cloud sandboxes (isolated Linux VMs). Create a sandbox with " +
	"e2b_create_sandbox, then run commands with e2b_exec and move files with e2b_read_file and e2b_write_file. " +
	"Sandboxes belong to this session and survive restarts of the server; pause them when idle and delete them " +
	"when done. Some calls may need a human's approval, as the policy decides."

// Store is the state store.
func (s *Server) Store() state.Store { return s.store }

// Approvals are the approval requests of calls that need a human.
func (s *Server) Approvals() *policy.Approvals { return s.approvals }

// Policies holds the policy in force.
func (s *Server) Policies() *policy.Holder { return s.policies }

// LocalURL is the address of the local backend's emulator, "" for the e2b backend.
func (s *Server) LocalURL() string {
	if s.backend.local == nil {
		return ""
	}
	return s.backend.local.url
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
		if s.backend != nil {
			s.backend.close()
		}
		if s.pages != nil {
			s.pages.close()
		}
		if s.previews != nil {
			s.previews.Close()
		}
	})
	return errors.Join(errs...)
}

// newSharedHTTPClient is the one HTTP client of every E2B client a source makes, so connections are reused
// across calls even though a client is made per call (the key is read from the keyring each time). E2B's error
// answers through it are counted in m.
func newSharedHTTPClient(m *metrics) *http.Client { return m.httpClient(e2b.NewHTTPClient()) }

func openAudit(cfg Config) (*audit.Log, error) { return audit.Open(cfg.StateDir, audit.Options{}) }
