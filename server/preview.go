package server

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/e2b-mcp/e2b-mcp/internal/loopback"
	"github.com/e2b-mcp/e2b-mcp/server/preview"
	"github.com/e2b-mcp/e2b-mcp/tools"
)

// setUpPreviews makes the preview proxy (server/preview) when previews are private; it listens when the first link
// is made. Replicas that share a database sign the links with a key derived from the data key they share, so that
// any of them opens a link another made.
func (s *Server) setUpPreviews() error {
	if !s.cfg.PrivatePreviews {
		return nil
	}
	key, err := s.linkKey(preview.KeyLabel)
	if err != nil {
		return err
	}
	s.previews, err = preview.New(preview.Options{Key: key, URL: s.cfg.PreviewURL, Sandboxes: s.store,
		Clients: s.clients, Now: s.cfg.Now, Log: s.log})
	return err
}

// checkPreviews checks the preview settings of c and turns private previews on where a preview URL says where
// they are served.
func checkPreviews(c *Config) error {
	if c.PreviewURL == "" {
		if c.PrivatePreviews && c.Transport != TransportStdio && !loopback.Host(listenHost(c.Listen)) {
			return errors.New("--private-previews on a listener others reach needs --preview-url: the proxy's own " +
				"listener is on 127.0.0.1, which the members' browsers cannot reach")
		}
		return nil
	}
	if c.Transport == TransportStdio {
		return errors.New("--preview-url is for HTTP servers: over stdio previews are served on 127.0.0.1")
	}
	if err := checkPublicURL("--preview-url", c.PreviewURL); err != nil {
		return err
	}
	u, _ := url.Parse(c.PreviewURL)
	if u.Path != "" && u.Path != "/" {
		return fmt.Errorf("--preview-url %q: want scheme://domain[:port] and nothing more (each preview is at "+
			"<port>-<sandbox>.domain)", c.PreviewURL)
	}
	preview := strings.ToLower(u.Hostname())
	if pub, err := url.Parse(c.PublicURL); err == nil && c.PublicURL != "" {
		h := strings.ToLower(pub.Hostname())
		if h == preview || strings.HasSuffix(h, "."+preview) || strings.HasSuffix(preview, "."+h) {
			return fmt.Errorf("--preview-url %q shares its domain with --public-url %q: a previewed app's pages would "+
				"be of this server's site (its cookies, its endpoints); use a domain of its own", c.PreviewURL, c.PublicURL)
		}
	}
	c.PrivatePreviews = true
	return nil
}

// listenHost is the host of a listen address ("" for one without).
func listenHost(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return h
}

// toolPreviews is what the tools make preview links with: none (a nil interface) when previews are public.
func (s *Server) toolPreviews() tools.Previews {
	if s.previews == nil {
		return nil
	}
	return s.previews
}
