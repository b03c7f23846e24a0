package server

import (
	"crypto/rand"
	"time"

	"github.com/e2b-mcp/e2b-mcp/server/tickets"
	"github.com/e2b-mcp/e2b-mcp/state"
)

// sharedStore is the database the server shares with its replicas, if it has one: a stdio server's requests
// come from its own client only, whatever its store.
func (s *Server) sharedStore() (*state.Postgres, bool) {
	pg, ok := s.store.(*state.Postgres)
	return pg, ok && s.cfg.Transport != TransportStdio
}

// newTickets makes the tickets of one kind of input request, label naming the kind. Replicas that share a
// database sign with a key derived from the data key they share and record the used tickets in the database:
// the repeated call that answers a request (in protocol 2026-07-28 a request of its own, which a load balancer
// may send to any replica) is honoured wherever it lands, and only once between them. Each kind has a key of its
// own, so that one kind's ticket never passes for another's.
func (s *Server) newTickets(label string, ttl time.Duration) (*tickets.Tickets, error) {
	pg, shared := s.sharedStore()
	if !shared {
		return tickets.New(ttl, s.cfg.Now)
	}
	key, err := tickets.SharedKey(s.dataKeys, label)
	if err != nil {
		return nil, err
	}
	return tickets.Shared(key, ttl, s.cfg.Now, pg.TicketNonces()), nil
}

// linkKey is the key that signs label's links (preview links, approval links): this process's own, or for
// replicas that share a database one derived from their data key, so that a link one made works on all of them.
func (s *Server) linkKey(label string) ([]byte, error) {
	if _, shared := s.sharedStore(); shared {
		return tickets.SharedKey(s.dataKeys, label)
	}
	key := make([]byte, 32)
	_, err := rand.Read(key)
	return key, err
}
