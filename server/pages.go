package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/e2b-mcp/e2b-mcp/credentials"
	"github.com/e2b-mcp/e2b-mcp/server/oauth"
	"github.com/e2b-mcp/e2b-mcp/server/pages"
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
	s.connector = c
	var err error
	s.connectTickets, err = s.newTickets("e2b-mcp connect tickets")
	return err
}

// connectLink gives a link to the connect page for owner, and when it expires (see pages.Connect.Link); over stdio
// it starts the local page first.
func (s *Server) connectLink(owner string) (string, time.Time, error) {
	if s.cfg.Transport == TransportStdio {
		if err := s.startLocalPage(); err != nil {
			return "", time.Time{}, err
		}
	}
	return s.connector.Link(owner)
}

// localPage serves a stdio server's browser pages, the connect page and the approval page: an HTTP listener on
// 127.0.0.1 serving nothing else.
type localPage struct {
	srv *http.Server
}

func (p *localPage) close() {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	_ = p.srv.Shutdown(ctx)
}

// startLocalPage starts the stdio server's pages on a free loopback port, once.
func (s *Server) startLocalPage() error {
	s.localPageMu.Lock()
	defer s.localPageMu.Unlock()
	if s.localPage != nil {
		return nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("starting the browser pages on 127.0.0.1: %w", err)
	}
	base := "http://" + ln.Addr().String()
	mux := http.NewServeMux()
	if s.connector != nil {
		mux.Handle(pages.PathConnect, s.connector)
		s.connector.SetBase(base)
	}
	mux.Handle(pages.PathApprove, s.approvalPage)
	s.approvalPage.SetBase(base)
	// The same Host rule as the HTTP listener's: a page of a domain rebound to 127.0.0.1 gets nothing here.
	srv := &http.Server{Handler: s.browserRules().GuardHost(mux), ReadHeaderTimeout: 15 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	s.localPage = &localPage{srv: srv}
	s.log.Info("serving the connect and approval pages", "url", base)
	return nil
}

// setUpApprovalPage makes the page: its links are signed with a key of this process, or, for replicas that
// share a database, one derived from their data key, so that a link made by one works on all of them (the
// approvals are in the database too). A team server's page is at the public URL; an HTTP server on loopback
// serves it on its listener, a stdio server on a listener of its own on 127.0.0.1 (see startLocalPage).
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
	s.approvalPage = pages.NewApproval(o)
	if s.cfg.PublicURL != "" && s.cfg.Transport != TransportStdio {
		s.approvalPage.SetBase(s.cfg.PublicURL) // checked by Config.Check
	}
	return nil
}

// approvalLink is the link to the page for request id; "" when the page has no address (an HTTP server on a
// public interface without --public-url) or its callers cannot prove themselves on it. Over stdio it starts the
// local page first.
func (s *Server) approvalLink(id string) string {
	if !s.approvalPage.Offered() {
		return ""
	}
	if s.cfg.Transport == TransportStdio {
		if err := s.startLocalPage(); err != nil {
			s.log.Warn("no approval page", "error", err)
			return ""
		}
	}
	return s.approvalPage.Link(id)
}
