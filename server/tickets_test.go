package server

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/e2b-mcp/e2b-mcp/audit"
	"github.com/e2b-mcp/e2b-mcp/credentials"
	"github.com/e2b-mcp/e2b-mcp/internal/pgtest"
	"github.com/e2b-mcp/e2b-mcp/policy"
	"github.com/e2b-mcp/e2b-mcp/server/tickets"
	"github.com/e2b-mcp/e2b-mcp/state"
)

// Replicas on one database honour each other's tickets (approval questions and connect requests), so that the
// repeated call that answers a request (a request of its own in protocol 2026-07-28) may reach any of them, and
// only once between them: a replay is refused on either. Servers that share no data key, or no database, do
// not share tickets; one kind of ticket never passes for the other; and a replica that cannot reach the
// database refuses the answer (it cannot tell whether it was used) instead of honouring it.
func TestTicketsOfReplicasAreShared(t *testing.T) {
	_, db := pgtest.Database(t)
	replica := func(dataKey byte, store string) *Server {
		return newConnectFixture(t, func(c *Config) {
			c.Transport, c.Store = TransportHTTP, store
			key := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{dataKey}, state.DataKeySize))
			if err := c.Secrets.SetSecret(credentials.DataKeyAccount, key); err != nil {
				t.Fatal(err)
			}
		}).srv
	}
	r1, r2 := replica(0, db), replica(0, db)
	alone1, alone2 := replica(0, ""), replica(0, "")
	b := policy.BindingFor("alice", "s1", "e2b_manage_sandbox", map[string]any{"sandbox_id": "sbx1", "action": "delete"})
	kinds := map[string]func(*Server) *tickets.Tickets{
		"approval":  func(s *Server) *tickets.Tickets { return s.elicit },
		"connect":   func(s *Server) *tickets.Tickets { return s.pages.connectTickets },
		"sync link": func(s *Server) *tickets.Tickets { return s.syncTickets },
	}
	for name, kind := range kinds {
		t.Run(name, func(t *testing.T) {
			ticket, err := kind(r1).Issue(b)
			if err != nil {
				t.Fatal(err)
			}
			other := policy.BindingFor("alice", "s1", "e2b_manage_sandbox", map[string]any{"sandbox_id": "sbx2", "action": "delete"})
			if err := kind(r2).Redeem(ticket, other); !errors.Is(err, tickets.ErrNotThisCalls) {
				t.Fatalf("a ticket for another call: %v", err)
			}
			if err := kind(r2).Redeem(ticket, b); err != nil {
				t.Fatalf("replica 2 refused replica 1's ticket: %v", err)
			}
			for i, r := range []*Server{r2, r1} {
				if err := kind(r).Redeem(ticket, b); !errors.Is(err, tickets.ErrNotThisCalls) {
					t.Fatalf("a replay on replica %d: %v", 2-i, err)
				}
			}
			for otherName, otherKind := range kinds {
				if otherName == name {
					continue
				}
				if ticket, err = kind(r1).Issue(b); err != nil || otherKind(r2).Redeem(ticket, b) == nil {
					t.Fatalf("a %s ticket passed for a %s ticket (%v)", name, otherName, err)
				}
			}
			if ticket, err = kind(alone1).Issue(b); err != nil || kind(alone2).Redeem(ticket, b) == nil {
				t.Fatalf("a server alone accepted another's ticket (%v)", err)
			}
		})
	}

	// A replica whose database is gone refuses the approval answer with an error, and the call does not run.
	ticket, err := r1.elicit.Issue(b)
	if err != nil {
		t.Fatal(err)
	}
	r2.store.Close()
	var req mcp.CallToolRequest
	req.Params.InputResponses, req.Params.RequestState = acceptAnswer(), ticket
	v := r2.approveByElicitation(t.Context(), req, b, policy.Call{}, policy.Decision{})
	if v.result == nil {
		t.Fatalf("an answer a replica could not check: %+v", v)
	}
	text, _ := json.Marshal(v.result.Content)
	if v.proceed || v.outcome != audit.OutcomeError || !v.result.IsError ||
		!strings.Contains(string(text), "could not be checked, so the call did not run") {
		t.Fatalf("an answer a replica could not check: %+v", v)
	}
	// It was never used, so replica 1 honours it.
	if err := r1.elicit.Redeem(ticket, b); err != nil {
		t.Fatalf("replica 1 after replica 2 failed to check the ticket: %v", err)
	}
}
