package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/e2b-mcp/e2b-mcp/credentials"
	"github.com/e2b-mcp/e2b-mcp/server/browsers"
	"github.com/e2b-mcp/e2b-mcp/server/oauth"
	"github.com/e2b-mcp/e2b-mcp/server/pages"
	"github.com/e2b-mcp/e2b-mcp/server/tickets"
	"github.com/e2b-mcp/e2b-mcp/state"
)

// The server's browser pages (server/pages): whether there are any, what they are made with, and where they are
// served.

// setUpConnectPage decides whether there is a connect page and how it knows its members (see pages.Connect). There
// is none for the local backend (it needs no key), when the operator turned it off, or under OAuth without a
// client for the members' sign-in.
func (s *Server) setUpConnectPage() error {
	e2bAt, withKeys := s.cfg.Backend.(E2B)
	if s.cfg.NoConnectPage || !withKeys {
		return nil
	}
	prove := pages.ProveLocal
	switch {
	case s.cfg.Transport == TransportStdio:
	case s.cfg.OAuth != nil && s.cfg.OAuth.ClientID != "":
		prove = pages.ProveSignIn
	case s.cfg.OAuth != nil:
		s.log.Info("the connect page is off: give the identity provider client of its sign-in (--oauth-client-id)")
		return nil
	case s.tokens != nil:
		prove = pages.ProveToken
	}
	verify := func(ctx context.Context, key string) error {
		cfg := e2bAt.Location
		cfg.APIKey = key
		cfg.HTTPClient = newSharedHTTPClient(s.metrics)
		return credentials.VerifyAPIKey(ctx, cfg)
	}
	// Replicas share the links and sessions through their database, so that the page works whichever replica
	// the member's browser reaches; a stdio server's page on 127.0.0.1 is its own.
	var connects state.ConnectStore = state.NewMemoryConnects(pages.ConnectLimits)
	if pg, shared := s.sharedStore(); shared {
		connects = pg.Connects(pages.ConnectLimits)
	}
	o := pages.ConnectOptions{Prove: prove, Secrets: s.cfg.Secrets, Verify: verify, Now: s.cfg.Now, Store: connects,
		Log: s.log}
	switch prove {
	case pages.ProveToken:
		o.Tokens = s.tokens
	case pages.ProveSignIn:
		if s.cfg.PublicURL == "" {
			return errors.New("the connect page's sign-in needs the public URL (--public-url)")
		}
		o.SignIn = oauth.NewSignIn(s.authServer, s.cfg.OAuth.ClientID,
			strings.TrimSuffix(s.cfg.PublicURL, "/")+pages.PathConnectCallback, s.cfg.OAuth.OwnerClaim)
	}
	c := pages.NewConnect(o)
	if s.cfg.PublicURL != "" && s.cfg.Transport != TransportStdio {
		c.SetBase(s.cfg.PublicURL) // checked by Config.Check
	}
	s.pages.connect = c
	var err error
	s.pages.connectTickets, err = s.newTickets("e2b-mcp connect tickets", elicitationTTL)
	return err
}

// browserPages are the server's pages for people's browsers (server/pages): the connect page, the approval page
// and, over stdio, the listener on 127.0.0.1 that serves them.
type browserPages struct {
	// connect is the connect page (nil: none); connectTickets sign the request states of its input requests, with
	// a key of their own so that they never pass for approvals (elicit's).
	connect        *pages.Connect
	connectTickets *tickets.Tickets
	approval       *pages.Approval // where a human answers an approval the client did not ask about
	// stdio: the pages are served on a listener of their own on 127.0.0.1 (local), started when first needed,
	// behind the same Host rule as the HTTP listener's.
	stdio bool
	rules browsers.Rules
	log   *slog.Logger

	localMu sync.Mutex
	local   *http.Server
}

// connectLink gives a link to the connect page for owner, and when it expires (see pages.Connect.Link); over stdio
// it starts the local page first.
func (p *browserPages) connectLink(owner string) (string, time.Time, error) {
	if p.stdio {
		if err := p.startLocal(); err != nil {
			return "", time.Time{}, err
		}
	}
	return p.connect.Link(owner)
}

// handle gives handle the pages and their paths.
func (p *browserPages) handle(handle func(pattern string, h http.Handler)) {
	if p.connect != nil {
		handle(pages.PathConnect, p.connect) // members' browsers carry no bearer token: the page checks who they are
	}
	// A human's browser: the page checks its link, the POST's origin and CSRF token.
	handle(pages.PathApprove, p.approval)
}

// setBase makes base the address of the pages' links.
func (p *browserPages) setBase(base string) {
	if p.connect != nil {
		p.connect.SetBase(base)
	}
	p.approval.SetBase(base)
}

// startLocal starts the stdio server's pages on a free loopback port, once.
func (p *browserPages) startLocal() error {
	p.localMu.Lock()
	defer p.localMu.Unlock()
	if p.local != nil {
		return nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("starting the browser pages on 127.0.0.1: %w", err)
	}
	base := "http://" + ln.Addr().String()
	mux := http.NewServeMux()
	p.handle(func(pattern string, h http.Handler) { mux.Handle(pattern, h) })
	p.setBase(base)
	// The same Host rule as the HTTP listener's: a page of a domain rebound to 127.0.0.1 gets nothing here.
	srv := &http.Server{Handler: p.rules.GuardHost(mux), ReadHeaderTimeout: 15 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	p.local = srv
	p.log.Info("serving the connect and approval pages", "url", base)
	return nil
}

// close stops the local pages' listener, if it was started.
func (p *browserPages) close() {
	p.localMu.Lock()
	defer p.localMu.Unlock()
	if p.local == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	_ = p.local.Shutdown(ctx)
}

// setUpApprovalPage makes the page: its links are signed with a key of this process, or, for replicas that
// share a database, one derived from their data key, so that a link made by one works on all of them (the
// approvals are in the database too). A team server's page is at the public URL; an HTTP server on loopback
// serves it on its listener, a stdio server on a listener of its own on 127.0.0.1 (see browserPages.startLocal).
func (s *Server) setUpApprovalPage() error {
	key, err := s.linkKey(pages.ApprovalKeyLabel)
	if err != nil {
		return err
	}
	o := pages.ApprovalOptions{Approvals: s.approvals, Key: key, TTL: ApprovalTTL, Fields: callFields, Log: s.log}
	if s.authenticated() && s.cfg.Transport != TransportStdio {
		if s.tokens != nil {
			o.Owners = s.tokens
		}
		o.Unprovable = s.tokens == nil
	}
	s.pages.approval = pages.NewApproval(o)
	if s.cfg.PublicURL != "" && s.cfg.Transport != TransportStdio {
		s.pages.approval.SetBase(s.cfg.PublicURL) // checked by Config.Check
	}
	return nil
}

// approvalLink is the link to the page for request id; "" when the page has no address (an HTTP server on a
// public interface without --public-url) or its callers cannot prove themselves on it. Over stdio it starts the
// local page first.
func (p *browserPages) approvalLink(id string) string {
	if !p.approval.Offered() {
		return ""
	}
	if p.stdio {
		if err := p.startLocal(); err != nil {
			p.log.Warn("no approval page", "error", err)
			return ""
		}
	}
	return p.approval.Link(id)
}
