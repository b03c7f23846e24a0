package state

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// The used nonces of the server's single-use tickets (the signed request states of its input requests: an
// approval question, a connect request). A server alone remembers them in its memory (MemoryTicketNonces);
// replicas record them in the database they share (Postgres.TicketNonces), so that a ticket issued by one
// replica is honoured by whichever replica the answer reaches, and by one of them only once.

// TicketNonces records which tickets were used.
type TicketNonces interface {
	// Spend uses the ticket nonce up, until it expires: true the first time, false for every later call (on
	// any replica). An error (the store cannot be reached) means the ticket must not be honoured.
	Spend(nonce string, expires, now time.Time) (bool, error)
}

var (
	_ TicketNonces = (*MemoryTicketNonces)(nil)
	_ TicketNonces = pgTicketNonces{}
)

// MemoryTicketNonces is the TicketNonces of a server alone: its process's memory.
type MemoryTicketNonces struct {
	mu   sync.Mutex
	used map[string]time.Time // nonce → expiry, until expired
}

// NewMemoryTicketNonces starts with no nonce used.
func NewMemoryTicketNonces() *MemoryTicketNonces {
	return &MemoryTicketNonces{used: map[string]time.Time{}}
}

func (m *MemoryTicketNonces) Spend(nonce string, expires, now time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for n, exp := range m.used {
		if !now.Before(exp) {
			delete(m.used, n)
		}
	}
	if _, seen := m.used[nonce]; seen {
		return false, nil
	}
	m.used[nonce] = expires
	return true, nil
}

// ticketSweepGrace is how long past its expiry a used nonce stays in the database. A ticket's expiry is checked
// by the clock of the replica that redeems it; were a nonce swept at the first moment a replica whose clock runs
// ahead saw it expired, a replica whose clock runs behind could still take its ticket as unexpired and unused.
const ticketSweepGrace = time.Hour

// TicketNonces is the TicketNonces of replicas: the table e2b_mcp_ticket_nonces, where using a nonce is one
// INSERT ... ON CONFLICT DO NOTHING, which only one transaction can win.
func (s *Postgres) TicketNonces() TicketNonces { return pgTicketNonces{s} }

type pgTicketNonces struct{ s *Postgres }

func (p pgTicketNonces) Spend(nonce string, expires, now time.Time) (bool, error) {
	var spent bool
	err := p.s.write(func(ctx context.Context, tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "DELETE FROM e2b_mcp_ticket_nonces WHERE expires < $1",
			now.Add(-ticketSweepGrace)); err != nil {
			return p.s.dbError(err)
		}
		tag, err := tx.Exec(ctx, "INSERT INTO e2b_mcp_ticket_nonces (nonce, expires) VALUES ($1, $2) ON CONFLICT DO NOTHING",
			nonce, expires)
		if err != nil {
			return p.s.dbError(err)
		}
		spent = tag.RowsAffected() == 1
		return nil
	})
	return spent && err == nil, err
}
