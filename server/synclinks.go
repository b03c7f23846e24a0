package server

import (
	"context"
	"net/http"

	"github.com/e2b-mcp/e2b-mcp/server/synclink"
	"github.com/e2b-mcp/e2b-mcp/tools"
)

// setUpSyncLinks decides whether the sync tools answer with a link the user runs `e2b-mcp sync` with
// (server/synclink): on a server reached over HTTP that has no workspace roots, which cannot see its users'
// disks. Replicas share the links' key and their used tickets through the database (newTickets).
func (s *Server) setUpSyncLinks() error {
	if s.cfg.Transport == TransportStdio || len(s.cfg.Tools.Workspaces) > 0 {
		return nil
	}
	var err error
	if s.syncTickets, err = s.newTickets(synclink.KeyLabel, synclink.TTL); err != nil {
		return err
	}
	s.syncLinks = synclink.NewLinks(s.syncTickets)
	if s.cfg.PublicURL != "" {
		s.syncLinks.SetBase(s.cfg.PublicURL) // checked by Config.Check
	}
	return nil
}

// newSyncHandler serves the links' steps for the tools made with deps. Its callers are named by their bearer
// tokens as /mcp's are, or without authentication (a loopback server's) are the configured owner.
func (s *Server) newSyncHandler(deps tools.Deps) *synclink.Handler {
	var owners synclink.Owners = configuredOwner(s.cfg.Owner)
	if s.bearer != nil {
		owners = s.bearer
	}
	return synclink.NewHandler(synclink.Options{Owners: owners, Links: s.syncLinks,
		Transfers: tools.NewSyncTransfers(deps), Record: s.audit.Record, Now: s.cfg.Now, Log: s.log,
		HoldBody: s.limits.holdBody, HoldBytes: func(ctx context.Context, size int64) (func(), error) {
			if release, ok := s.limits.placeFor(ctx, size); ok {
				return release, nil
			}
			return nil, synclink.ErrBusy
		}})
}

// configuredOwner names every caller as the one owner of a server without authentication.
type configuredOwner string

func (o configuredOwner) Owner(http.ResponseWriter, *http.Request) (string, bool) {
	return string(o), true
}
