package tickets

import (
	"testing"
	"time"

	"github.com/e2b-mcp/e2b-mcp/policy"
)

// A ticket is redeemed for the call it was issued for alone, once, before it expires, and only by the tickets that
// issued it; anything else is refused.
func TestTickets(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	e, err := New(10*time.Minute, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	a := policy.BindingFor("alice", "s1", "e2b_exec", map[string]any{"command": "ls"})
	b := policy.BindingFor("alice", "s1", "e2b_exec", map[string]any{"command": "rm -rf /"})
	bob := policy.BindingFor("bob", "s1", "e2b_exec", map[string]any{"command": "ls"})

	ta, _ := e.Issue(a)
	if e.Redeem(ta, b) == nil || e.Redeem(ta, bob) == nil {
		t.Fatal("a ticket redeemed for another call")
	}
	if e.Redeem(ta, a) != nil {
		t.Fatal("a fresh ticket was refused")
	}
	if e.Redeem(ta, a) == nil {
		t.Fatal("a ticket redeemed twice")
	}

	other, _ := New(10*time.Minute, func() time.Time { return now })
	tOther, _ := other.Issue(a)
	if e.Redeem(tOther, a) == nil {
		t.Fatal("a ticket of another server instance was accepted")
	}

	late, _ := e.Issue(a)
	now = now.Add(10 * time.Minute)
	if e.Redeem(late, a) == nil {
		t.Fatal("an expired ticket was accepted")
	}
	for _, junk := range []string{"", ".", "x.y", "e30.", late[:len(late)-2]} {
		if e.Redeem(junk, a) == nil {
			t.Errorf("junk ticket %q accepted", junk)
		}
	}
}
