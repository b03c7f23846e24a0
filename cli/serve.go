package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/e2b-mcp/e2b-mcp/credentials"
	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/egress"
	"github.com/e2b-mcp/e2b-mcp/lifecycle"
	"github.com/e2b-mcp/e2b-mcp/server"
	"github.com/e2b-mcp/e2b-mcp/server/oauth"
	"github.com/e2b-mcp/e2b-mcp/server/pages"
	"github.com/e2b-mcp/e2b-mcp/state"
	"github.com/e2b-mcp/e2b-mcp/tools"
)

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error {
	if v == "" {
		return errors.New("empty value")
	}
	*l = append(*l, v)
	return nil
}

// positiveDuration is a duration flag that refuses zero and negative values: a zero duration in a server.Config
// means its default, which the flag already shows.
type positiveDuration struct{ d *time.Duration }

func (p positiveDuration) String() string {
	if p.d == nil { // the flag package's zero value, for its own use
		return ""
	}
	return p.d.String()
}

func (p positiveDuration) Set(v string) error {
	d, err := time.ParseDuration(v)
	switch {
	case err != nil:
		return errors.New("want a duration such as 30m or 4h")
	case d <= 0:
		return errors.New("must be positive")
	}
	*p.d = d
	return nil
}

// serveOptions are serve's flags.
type serveOptions struct {
	transport, listen, session, owner string
	loc                               *e2bFlags
	stateDir                          string
	store                             string
	storageRoots                      stringList
	workspaces                        stringList
	resultLimit                       int
	clientProfile                     string
	execForegroundLimit               time.Duration
	policyFile                        string
	lease                             time.Duration
	orphanAction                      string
	onTimeout                         string
	sweepInterval                     time.Duration
	checkpointEvery                   int
	checkpointOnPause                 bool
	backend                           string
	tokensFile                        string
	keys                              *keyStoreFlags
	publicURL                         string
	clientAddressHeader               string
	oauthIssuer, oauthOwnerClaim      string
	oauthScopes                       stringList
	allowOrigins                      stringList
	allowOut, denyOut                 stringList
	noInternet                        bool
	credentials                       string
	oauthClientID                     string
	oauthRequireATJWT                 bool
	noConnectPage                     bool
	privatePreviews                   bool
	previewURL                        string
	egressFile                        string
	logLevel                          *slog.LevelVar
}

func (a *app) serveFlags() (*flags, *serveOptions) {
	f := newFlags("serve", "[flags]",
		"Run the MCP server. Over stdio (the default) an assistant starts it as a subprocess; with --transport\n"+
			"http or sse it serves streamable HTTP at /mcp, SSE at /sse (+ /message) and /healthz on one listener.\n"+
			"Each owner's E2B API key is read on every call from the OS keyring or, with --master-key-file, from\n"+
			"the encrypted key store (see `e2b-mcp auth login`).")
	o := &serveOptions{}
	f.StringVar(&o.transport, "transport", server.TransportStdio, "stdio, http or sse (http and sse serve both protocols)")
	f.StringVar(&o.listen, "listen", server.DefaultListen, "HTTP listen address; without "+
		"--tokens-file it must be loopback")
	f.StringVar(&o.session, "session", server.DefaultSession, "session that groups this server's sandboxes "+
		"(HTTP callers may send "+server.SessionHeader+")")
	f.StringVar(&o.owner, "owner", "", "owner (principal and keyring account) of stdio calls, and of HTTP calls without "+
		"tokens (default: the OS user)")
	o.loc = a.addE2BFlags(f, true)
	f.StringVar(&o.stateDir, "state-dir", "", "state directory (sessions, sandbox records, approvals, audit log) "+
		"(default $XDG_STATE_HOME/e2b-mcp or the OS's place)")
	f.StringVar(&o.store, "store", "", "postgres:// URL of a PostgreSQL database for the records and approvals that "+
		"replicas share (default: the embedded store in the state directory; the audit log stays there)")
	f.Var(&o.storageRoots, "storage-root", "host directory that upload_files may read from (repeatable; "+
		"none: uploads are off)")
	f.Var(&o.workspaces, "workspace", "directory of this machine that e2b_sync_in may read and e2b_sync_out may write, "+
		"with all below it (repeatable; default over stdio: the working directory, unless it is / or the home "+
		"directory; over HTTP: none)")
	f.IntVar(&o.resultLimit, "result-limit", 0, fmt.Sprintf("characters of a tool result the model reads (each copy on "+
		"its own: the text content, and structuredContent), for every client (at least %d; default: what the client shows "+
		"whole, by --client-profile); longer command output is cut to head and tail and saved whole in the sandbox, "+
		"longer files are read in parts", tools.MinResultLimit))
	f.StringVar(&o.clientProfile, "client-profile", "", "size results and images for this client instead of the one "+
		"its clientInfo names: "+strings.Join(tools.ClientProfiles(), ", "))
	// --output-budget bounded e2b_exec's stdout and stderr alone; --result-limit bounds every whole result.
	a.retire(f, "output-budget", "result-limit")
	o.execForegroundLimit = tools.DefaultExecForegroundLimit
	f.Var(positiveDuration{&o.execForegroundLimit}, "exec-foreground-limit", "how long e2b_exec waits for a command "+
		"before it moves it to the background and answers (running true, e2b_read_output reads on); keep it below the "+
		"client's own time limit for a call (claude.ai's is 60s)")
	f.StringVar(&o.policyFile, "policy", "", "policy file (YAML; default: the built-in policy, shown by 'e2b-mcp policy "+
		"explain builtin TOOL')")
	o.lease = server.DefaultLease
	f.Var(positiveDuration{&o.lease}, "lease", "how long a session lives without calls before its sandboxes "+
		"get the orphan action")
	f.StringVar(&o.orphanAction, "orphan-action", string(lifecycle.OrphanPause), "what happens to sandboxes of lapsed "+
		"sessions: pause, kill or keep")
	f.StringVar(&o.onTimeout, "on-timeout", e2b.OnTimeoutPause, "what E2B does to a sandbox left unused for its "+
		"timeout_seconds: pause (memory and files kept; the next call resumes it) or kill (e2b_create_sandbox on_timeout "+
		"chooses per sandbox)")
	o.sweepInterval = server.DefaultSweepInterval
	f.Var(positiveDuration{&o.sweepInterval}, "sweep-interval", "time between orphan sweeps (one runs at start)")
	f.IntVar(&o.checkpointEvery, "checkpoint-every", 0, "checkpoint a sandbox automatically every N steps (0: off)")
	f.BoolVar(&o.checkpointOnPause, "checkpoint-on-pause", false, "checkpoint a sandbox before pausing it")
	f.StringVar(&o.backend, "backend", server.BackendE2B, "e2b, or local: emulate sandboxes on this machine "+
		"(no E2B account needed)")
	f.StringVar(&o.tokensFile, "tokens-file", "", "bearer tokens of HTTP callers (see 'e2b-mcp tokens'); each token's "+
		"owner is the caller. Beside --oauth-issuer it needs --oauth-owner-claim email, and its owners must "+
		"not be email addresses")
	o.keys = addKeyStoreFlags(f)
	f.StringVar(&o.publicURL, "public-url", "", "the URL clients reach this server at, e.g. https://mcp.example.com "+
		"(behind a TLS proxy); the OAuth resource is PUBLIC_URL"+server.PathMCP)
	f.StringVar(&o.clientAddressHeader, "client-address-header", "", "HTTP servers behind a proxy: the header it sets "+
		"to the client's address (X-Forwarded-For, X-Real-IP), whose last entry refused tokens are counted and logged by; "+
		"only when every request comes through it")
	f.StringVar(&o.oauthIssuer, "oauth-issuer", "", "accept OAuth access tokens of this authorization server (OpenID "+
		"Connect issuer URL); needs --public-url")
	f.StringVar(&o.oauthOwnerClaim, "oauth-owner-claim", oauth.DefaultOwnerClaim, "the access token claim that names "+
		"the owner (sub, email, preferred_username, ...)")
	f.StringVar(&o.oauthClientID, "oauth-client-id", "", "client ID (public, PKCE) at the identity provider for "+
		"members' sign-in on the connect page; its redirect URI is PUBLIC_URL"+pages.PathConnectCallback)
	f.BoolVar(&o.privatePreviews, "private-previews", false, "create sandboxes with public traffic off: e2b_get_url's "+
		"links then go through this server's preview proxy on 127.0.0.1, signed for one sandbox and port, and expire")
	f.StringVar(&o.previewURL, "preview-url", "", "HTTP servers: serve private previews at <port>-<sandbox>.DOMAIN of "+
		"this https://DOMAIN (wildcard DNS and certificate pointing here; a domain of its own, not the public URL's); "+
		"turns private previews on")
	f.BoolVar(&o.noConnectPage, "no-connect-page", false, "no connect page: members without a key are told to run "+
		"`e2b-mcp auth login`")
	f.BoolVar(&o.oauthRequireATJWT, "oauth-require-at-jwt", false, "accept only access tokens whose header typ is "+
		"at+jwt (RFC 9068), for identity providers that mark their access tokens so (default: also tokens typed JWT or "+
		"untyped, unless they carry ID-token claims)")
	f.Var(&o.oauthScopes, "oauth-scope", "a scope clients should ask for, published in the resource metadata (repeatable)")
	f.Var(&o.allowOrigins, "allow-origin", "web origin (scheme://host[:port]) whose pages may call the HTTP endpoints, "+
		"for browser-based clients (repeatable; default: none but the server's own)")
	f.Var(&o.allowOut, "allow-out", "the only destinations sandboxes may reach: domains (github.com, *.example.com), "+
		"IPs or CIDRs (repeatable or comma-separated; default: no allow-list)")
	f.Var(&o.denyOut, "deny-out", "IPs or CIDRs sandboxes may not reach (repeatable or comma-separated)")
	f.BoolVar(&o.noInternet, "no-internet", false, "sandboxes reach nothing but the --allow-out destinations")
	f.StringVar(&o.credentials, "credentials", "all", "the owner's credentials (see 'e2b-mcp credentials') sandboxes "+
		"get: all, none, or NAME,NAME...")
	f.StringVar(&o.egressFile, "egress-file", "", "YAML file of per-owner and per-session egress limits and "+
		"credentials (see README)")
	o.logLevel = logLevelFlag(f)
	return f, o
}

func runServe(ctx context.Context, a *app, args []string) error {
	f, o := a.serveFlags()
	rest, err := a.parse(f, args)
	if err != nil {
		return err
	}
	if err := f.wantArgs(rest, 0, 0); err != nil {
		return err
	}
	cfg, err := a.serveConfig(f, o)
	if err != nil {
		return err
	}
	cfg.Logger = a.logger(o.logLevel)

	ctx, stop := a.signalContext(ctx)
	defer stop()

	if c, ok := cfg.Secrets.(io.Closer); ok {
		defer c.Close() // after the server's Close: the key store in the database
	}
	if cfg.Transport == "" || cfg.Transport == server.TransportStdio {
		// The assistant that started the server waits for its initialize answer: it comes while the server is built.
		return server.RunStdio(ctx, cfg, a.stdin, a.stdout, server.New)
	}
	srv, err := server.New(cfg)
	if err != nil {
		return err
	}
	defer srv.Close()
	return srv.Run(ctx, a.stdin, a.stdout)
}

// workspaceRoots are the --workspace directories, checked; without any, a stdio server (started by an assistant
// in the user's project) takes its working directory, unless that is / or the home directory, which would open
// the whole machine or every dotfile to a sync. An HTTP server takes none: its disk is not its callers'.
func (o *serveOptions) workspaceRoots() ([]string, error) {
	for _, w := range o.workspaces {
		fi, err := os.Stat(w)
		if err != nil {
			return nil, fmt.Errorf("--workspace: %w", err)
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("--workspace %s is not a directory", w)
		}
	}
	if len(o.workspaces) > 0 || o.transport != server.TransportStdio {
		return o.workspaces, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return nil, nil
	}
	home, _ := os.UserHomeDir()
	if wd == string(filepath.Separator) || (home != "" && filepath.Clean(wd) == filepath.Clean(home)) {
		return nil, nil
	}
	return []string{wd}, nil
}

// serveConfig turns serve's flags into a server.Config, checked (by Config.Check, whose mistakes are usage errors
// here) before anything is opened. Only what a Config cannot tell is checked here: an empty flag value, where an
// empty Config field means its default, the backend's name, and the tools' settings.
func (a *app) serveConfig(f *flags, o *serveOptions) (server.Config, error) {
	switch {
	case o.session == "":
		return server.Config{}, f.usageErrorf("--session must not be empty")
	case o.resultLimit != 0 && o.resultLimit < tools.MinResultLimit:
		return server.Config{}, f.usageErrorf("--result-limit must be at least %d characters: a result needs room for its "+
			"fields and for a useful part of the output", tools.MinResultLimit)
	case o.checkpointEvery < 0:
		return server.Config{}, f.usageErrorf("--checkpoint-every must not be negative")
	}
	for _, root := range o.storageRoots {
		fi, err := os.Stat(root)
		if err != nil {
			return server.Config{}, fmt.Errorf("--storage-root: %w", err)
		}
		if !fi.IsDir() {
			return server.Config{}, fmt.Errorf("--storage-root %s is not a directory", root)
		}
	}
	workspaces, err := o.workspaceRoots()
	if err != nil {
		return server.Config{}, err
	}
	var backend server.Backend
	switch o.backend {
	case server.BackendE2B:
		backend = server.E2B{Location: o.loc.config()}
	case server.BackendLocal:
		backend = server.Local{}
	default:
		return server.Config{}, f.usageErrorf("--backend %q: want e2b or local", o.backend)
	}
	creds, err := credentialChoice(o.credentials)
	if err != nil {
		return server.Config{}, f.usageErrorf("%v", err)
	}
	owner, err := a.owner(o.owner)
	if err != nil {
		return server.Config{}, err
	}
	stateDir, err := a.stateDir(o.stateDir)
	if err != nil {
		return server.Config{}, err
	}
	oauth, err := o.oauthConfig(f)
	if err != nil {
		return server.Config{}, err
	}
	// Where `e2b-mcp approve` looks without --state-dir; an error just means it needs the flag.
	defaultDir, _ := a.defaultStateDir()
	cfg, err := server.Config{
		Name:            "e2b-mcp",
		Version:         Version(),
		Owner:           owner,
		Session:         o.session,
		Transport:       o.transport,
		Listen:          o.listen,
		Backend:         backend,
		StateDir:        stateDir,
		DefaultStateDir: defaultDir,
		Store:           o.store,
		PolicyFile:      o.policyFile,
		Lease:           o.lease,
		OrphanAction:    lifecycle.OrphanAction(o.orphanAction),
		SweepInterval:   o.sweepInterval,
		TokensFile:      o.tokensFile,
		OAuth:           oauth,
		AllowOrigins:    o.allowOrigins,
		Egress: egress.Limits{AllowOut: splitList(o.allowOut), DenyOut: splitList(o.denyOut),
			NoInternet: o.noInternet},
		Credentials:         creds,
		PublicURL:           o.publicURL,
		ClientAddressHeader: o.clientAddressHeader,
		NoConnectPage:       o.noConnectPage,
		PrivatePreviews:     o.privatePreviews,
		PreviewURL:          o.previewURL,
		ClientProfile:       o.clientProfile,
		Tools: tools.Config{
			ResultLimit:         o.resultLimit,
			OnTimeout:           o.onTimeout,
			ExecForegroundLimit: o.execForegroundLimit,
			StorageRoots:        o.storageRoots,
			Workspaces:          workspaces,
			Checkpoints:         state.CheckpointPolicy{EverySteps: o.checkpointEvery, OnPause: o.checkpointOnPause},
		},
		Now: a.now,
	}.Check()
	if err != nil {
		return cfg, f.usageErrorf("%v", err)
	}
	if o.egressFile != "" {
		if cfg.EgressScopes, err = egress.LoadScopes(o.egressFile); err != nil {
			return cfg, err
		}
	}
	if cfg.Secrets, err = o.keys.open(f, stateDir, o.store); err != nil {
		return cfg, err
	}
	if db, ok := cfg.Secrets.(*credentials.DatabaseStore); ok {
		if err := a.importKeyStoreFile(db, filepath.Join(stateDir, DefaultKeyStoreFile)); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

// importKeyStoreFile moves a key store file left in the state directory (by a version that kept the keys of
// replicas in a file on each host) into the key store in the database: entries the database lacks are copied as
// they are sealed, and the operator is told that the file is read no more.
func (a *app) importKeyStoreFile(db *credentials.DatabaseStore, path string) error {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	added, err := db.ImportFile(path)
	if err != nil {
		return fmt.Errorf("moving the key store file %s into the database: %w", path, err)
	}
	if len(added) > 0 {
		fmt.Fprintf(a.stderr, "e2b-mcp: copied the entries %s of the key store file %s into the database; the file is "+
			"not read any more (remove it once every replica runs this version)\n", strings.Join(added, ", "), path)
	}
	return nil
}

// oauthConfig is the OAuth resource server's configuration, nil without --oauth-issuer.
func (o *serveOptions) oauthConfig(f *flags) (*oauth.Config, error) {
	if o.oauthIssuer == "" {
		if len(o.oauthScopes) > 0 || o.oauthClientID != "" || o.oauthRequireATJWT {
			return nil, f.usageErrorf("--oauth-scope, --oauth-client-id and --oauth-require-at-jwt need --oauth-issuer")
		}
		return nil, nil
	}
	if o.transport == server.TransportStdio {
		return nil, f.usageErrorf("--oauth-issuer is for --transport http or sse")
	}
	if o.publicURL == "" {
		return nil, f.usageErrorf("--oauth-issuer needs --public-url: the access tokens' audience is this server's URL")
	}
	return &oauth.Config{
		Issuer:                 o.oauthIssuer,
		Resource:               strings.TrimSuffix(o.publicURL, "/") + server.PathMCP,
		OwnerClaim:             o.oauthOwnerClaim,
		Scopes:                 o.oauthScopes,
		ClientID:               o.oauthClientID,
		RequireAccessTokenType: o.oauthRequireATJWT,
	}, nil
}

// signalContext ends ctx on SIGINT or SIGTERM. After the first signal the default handling is restored, so a
// second one stops a shutdown that hangs.
func (a *app) signalContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if a.notifySignals != nil {
		return a.notifySignals(ctx)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	return ctx, stop
}

// splitList splits the comma-separated entries of a repeatable flag.
func splitList(l stringList) []string {
	var out []string
	for _, v := range l {
		for _, part := range strings.Split(v, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
	}
	return out
}

// credentialChoice reads --credentials: all (nil), none (empty) or a list of names.
func credentialChoice(v string) ([]string, error) {
	switch v {
	case "all":
		return nil, nil
	case "none":
		return []string{}, nil
	}
	names := splitList(stringList{v})
	if len(names) == 0 {
		return nil, errors.New("--credentials: want all, none or a comma-separated list of names")
	}
	return names, nil
}
