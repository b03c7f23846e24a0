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
	"github.com/e2b-mcp/e2b-mcp/state"
)

// setUpConnectPage decides whether there is a connect page and how it knows its members (see connector). There
// is none for the local backend (it needs no key), when the operator turned it off, or under OAuth without a
// client for the members' sign-in.
func (s *Server) setUpConnectPage() error {
	e2bAt, withKeys := s.cfg.Backend.(E2B)
	if s.cfg.NoConnectPage || !withKeys {
		return nil
	}
	prove := proveLocal
	switch {
	case s.cfg.Transport == TransportStdio:
	case s.cfg.OAuth != nil && s.cfg.OAuth.ClientID != "":
		prove = proveSignIn
	case s.cfg.OAuth != nil:
		s.log.Info("the connect page is off: give the identity provider client of its sign-in (--oauth-client-id)")
		return nil
	case s.tokens != nil:
		prove = proveToken
	}
	verify := func(ctx context.Context, key string) error {
		cfg := e2bAt.Location
		cfg.APIKey = key
		cfg.HTTPClient = newSharedHTTPClient(s.metrics)
		return credentials.VerifyAPIKey(ctx, cfg)
	}
	// Replicas share the links and sessions through their database, so that the page works whichever replica
	// the member's browser reaches; a stdio server's page on 127.0.0.1 is its own.
	var connects state.ConnectStore = state.NewMemoryConnects(connectLimits)
	if pg, shared := s.sharedStore(); shared {
		connects = pg.Connects(connectLimits)
	}
	c := newConnector(prove, s.cfg.Secrets, verify, s.cfg.Now, connects, s.log)
	c.tokens = s.tokens
	if prove == proveSignIn {
		if s.cfg.PublicURL == "" {
			return errors.New("the connect page's sign-in needs the public URL (--public-url)")
		}
		c.signIn = oauth.NewSignIn(s.authServer, s.cfg.OAuth.ClientID,
			strings.TrimSuffix(s.cfg.PublicURL, "/")+pathConnectCallback, s.cfg.OAuth.OwnerClaim)
	}
	if s.cfg.PublicURL != "" && s.cfg.Transport != TransportStdio {
		c.setBase(s.cfg.PublicURL) // checked by Config.Check
	}
	s.connector = c
	var err error
	s.connectTickets, err = s.newTickets("e2b-mcp connect tickets")
	return err
}

// connectLink gives a link to the connect page for owner, and when it expires (see connector.link); over stdio
// it starts the local page first.
func (s *Server) connectLink(owner string) (string, time.Time, error) {
	if s.cfg.Transport == TransportStdio {
		if err := s.startLocalPage(); err != nil {
			return "", time.Time{}, err
		}
	}
	return s.connector.link(owner)
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
		mux.Handle(PathConnect, s.connector)
		s.connector.setBase(base)
	}
	mux.Handle(PathApprove, s.approvalPage)
	s.approvalPage.setBase(base)
	// The same Host rule as the HTTP listener's: a page of a domain rebound to 127.0.0.1 gets nothing here.
	srv := &http.Server{Handler: s.browserRules().guardHost(mux), ReadHeaderTimeout: 15 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	s.localPage = &localPage{srv: srv}
	s.log.Info("serving the connect and approval pages", "url", base)
	return nil
}
