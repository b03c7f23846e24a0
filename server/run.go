package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/e2b-mcp/e2b-mcp/egress"
	"github.com/e2b-mcp/e2b-mcp/internal/loopback"
	"github.com/e2b-mcp/e2b-mcp/lifecycle"
	"github.com/e2b-mcp/e2b-mcp/tools"
)

// Run serves the configured transport until ctx ends (or, over stdio, until the client closes stdin), with the
// background work around it: the store's reconciliation with E2B for every live session, the orphan sweep (once at
// start, then every SweepInterval) and policy reloads (when the file changes, and at once on SIGHUP). Shutdown is
// graceful and kills no sandbox; Run does not Close the server.
func (s *Server) Run(ctx context.Context, stdin io.Reader, stdout io.Writer) error {
	var ln net.Listener
	if s.cfg.Transport != TransportStdio {
		// Refuse before anything runs in the background.
		if err := checkListen(s.cfg.Listen, s.authenticated()); err != nil {
			return err
		}
		var err error
		if ln, err = net.Listen("tcp", s.cfg.Listen); err != nil {
			return err
		}
	}

	if s.backend.secrets != nil {
		s.log.Info("E2B API keys and the state store's data key are kept in " + s.backend.secrets.String())
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() {
		// Over stdio the session is in use again from now on: its lease starts afresh before reconciliation and the
		// first sweep look at it (a session first seen now has no lease until then, and reconciliation passes over
		// sessions without one). All three run beside the transport, so that a client's initialize does not wait
		// for a synced write or for E2B.
		if ln == nil {
			if _, err := s.store.TouchSession(s.cfg.Owner, s.cfg.Session, s.cfg.Lease); err != nil {
				s.log.Warn("renewing the session lease", "owner", s.cfg.Owner, "session", s.cfg.Session, "error", err)
			}
		}
		s.reconcileAtStart(ctx)
		s.sweeper.Run(ctx, s.cfg.SweepInterval)
	})
	wg.Go(func() { s.budgets.Run(ctx, budgetInterval) })
	wg.Go(func() {
		s.policies.Watch(ctx, policyWatchInterval, func(err error) {
			s.log.Error("policy file not reloaded; the previous policy stays in force", "error", err)
		})
	})
	wg.Go(func() { s.reloadOnSIGHUP(ctx) })

	var err error
	if ln != nil {
		err = s.ServeHTTP(ctx, ln)
	} else {
		err = s.ServeStdio(ctx, stdin, stdout)
	}
	cancel()
	wg.Wait()
	return err
}

// reconcileAtStart brings the store in line with E2B for every session whose lease is live, so that a sandbox a
// crash left unrecorded is adopted, and one that vanished meanwhile is shown gone, before the first call rather
// than at the first list. Lapsed sessions are the sweep's. Owners with no key are passed over.
func (s *Server) reconcileAtStart(ctx context.Context) {
	sessions, err := s.store.Sessions()
	if err != nil {
		s.log.Warn("reconciling the store with E2B at start", "error", err)
		return
	}
	now := s.cfg.Now()
	for _, sess := range sessions {
		if sess.Lapsed || sess.LeaseExpires.Before(now) {
			continue
		}
		c, err := s.clients.Client(ctx, sess.Owner)
		if err != nil {
			s.log.Debug("not reconciling a session at start", "owner", sess.Owner, "session", sess.Name, "error", err)
			continue
		}
		rep, err := lifecycle.Reconcile(ctx, c, s.store, sess.Owner, sess.Name, egress.OnAdopt(c, s.egress, s.log))
		if err != nil {
			s.log.Warn("reconciling a session with E2B at start", "owner", sess.Owner, "session", sess.Name, "error", err)
			continue
		}
		if len(rep.Adopted)+len(rep.Gone) > 0 {
			s.log.Info("reconciled a session with E2B", "owner", sess.Owner, "session", sess.Name,
				"adopted", rep.Adopted, "gone", rep.Gone)
		}
	}
}

// egressLine says what the egress policy is, for the start-up log: the limits and which credentials.
func (s *Server) egressLine() string {
	creds := "all of the owner's credentials"
	switch {
	case s.egress.Store == nil:
		creds = "no credentials"
	case s.cfg.Credentials == nil:
	case len(s.cfg.Credentials) == 0:
		creds = "no credentials (--credentials none)"
	default:
		creds = "credentials " + strings.Join(s.cfg.Credentials, ", ")
	}
	line := s.egress.Limits.Describe() + "; " + creds
	if n := len(s.egress.Owners); n > 0 {
		line += fmt.Sprintf("; %d owners with scopes of their own", n)
	}
	return line
}

// reloadOnSIGHUP re-reads the policy file on SIGHUP until ctx ends.
func (s *Server) reloadOnSIGHUP(ctx context.Context) {
	if s.policies.Path() == "" {
		return
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	defer signal.Stop(ch)
	s.reloadOn(ctx, ch)
}

// reloadOn re-reads the policy file whenever ch delivers, until ctx ends. A file that does not parse leaves the
// policy in force as it was.
func (s *Server) reloadOn(ctx context.Context, ch <-chan os.Signal) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-ch:
			if err := s.policies.Reload(); err != nil {
				s.log.Error("policy file not reloaded; the previous policy stays in force", "error", err)
				continue
			}
			s.log.Info("policy reloaded", "file", s.policies.Path())
		}
	}
}

// ServeStdio serves MCP over in and out until ctx ends or in is closed. Nothing but protocol is written to out.
func (s *Server) ServeStdio(ctx context.Context, in io.Reader, out io.Writer) error {
	ss := mcpserver.NewStdioServer(s.mcp)
	ss.SetErrorLogger(slog.NewLogLogger(s.log.Handler(), slog.LevelError))
	stdout := &stdioOut{w: out}
	// The front (stdio.go) reads the client's lines and hands them to mcp-go's handler on the context mcp-go gives
	// its own calls, which it makes once, as it starts listening; mcp-go's transport reads what the front passes
	// on to it, and writes the server's requests and notifications.
	toMCP, fromFront := io.Pipe()
	front := newStdioFront(s, stdout, fromFront)
	var served sync.WaitGroup
	defer served.Wait()
	ss.SetContextFunc(func(ctx context.Context) context.Context {
		ctx = tools.WithNotifier(ctx, stdout.notify)
		served.Go(func() { front.serve(ctx, in) })
		return ctx
	})
	s.log.Info("serving MCP over stdio", "owner", s.cfg.Owner, "session", s.cfg.Session, "backend", s.cfg.Backend,
		"egress", s.egressLine())
	listening, stop := context.WithCancel(ctx)
	err := ss.Listen(listening, toMCP, stdout)
	stop() // the front stops, and waits for its requests
	toMCP.Close()
	if ctx.Err() != nil || errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// ServeHTTP serves the HTTP transport on ln until ctx ends, then shuts down gracefully: open streams are closed
// and in-flight calls get a grace period to finish.
func (s *Server) ServeHTTP(ctx context.Context, ln net.Listener) error {
	t := s.newHTTPTransport()
	srv := &http.Server{
		Handler:           t.handler,
		ReadHeaderTimeout: s.limits.readHeader,
		IdleTimeout:       s.limits.idleConn,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	var auths []string
	if s.tokens != nil {
		auths = append(auths, "bearer tokens from "+s.tokens.Path())
	}
	if o := s.cfg.OAuth; o != nil {
		kind := "OAuth access tokens"
		if o.RequireAccessTokenType {
			kind += " typed at+jwt"
		}
		auths = append(auths, fmt.Sprintf("%s of %s for %s (owner claim %q)", kind, o.Issuer, o.Resource, o.OwnerClaim))
	}
	auth := "none (loopback only)"
	if len(auths) > 0 {
		auth = strings.Join(auths, "; ")
	}
	s.log.Info("serving MCP over HTTP", "url", "http://"+ln.Addr().String()+PathMCP,
		"sse", "http://"+ln.Addr().String()+PathSSE, "auth", auth, "backend", s.cfg.Backend, "egress", s.egressLine())

	if s.cfg.PublicURL == "" {
		if host, _, _ := net.SplitHostPort(ln.Addr().String()); loopback.Host(host) {
			s.pages.setBase("http://" + ln.Addr().String())
			if s.syncLinks != nil {
				s.syncLinks.SetBase("http://" + ln.Addr().String())
			}
		} else {
			s.log.Warn("the connect and approval pages have no address to give members: set --public-url")
		}
	}

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.log.Info("shutting down; sandboxes are left as they are")
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	errs := []error{t.mcp.Shutdown(shutdownCtx), srv.Shutdown(shutdownCtx)}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
