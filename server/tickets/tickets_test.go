package tickets

import (
	"errors"
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

// A ticket's claims come back as signed; a stale ticket is told apart from a forged one, and opening a ticket
// does not use it up.
func TestTicketClaims(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	e, err := New(10*time.Minute, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	type claims struct{ Sandbox, Dir string }
	b := policy.Binding{Owner: "alice", Session: "s1", Tool: "e2b_sync_in"}
	tk, expires, err := e.IssueWith(b, claims{"sb1", "/home/user/p"})
	if err != nil || !expires.Equal(now.Add(10*time.Minute)) {
		t.Fatalf("IssueWith: %v, expires %v", err, expires)
	}
	var got claims
	o, err := e.Open(tk, &got)
	if err != nil || o.Binding != b || got != (claims{"sb1", "/home/user/p"}) {
		t.Fatalf("Open: %v, %+v, %+v", err, o.Binding, got)
	}
	if _, err := e.Open(tk, &got); err != nil {
		t.Fatal("opening a ticket used it up")
	}
	if err := e.Spend(o); err != nil {
		t.Fatal(err)
	}
	if err := e.Spend(o); !errors.Is(err, ErrUsed) || !errors.Is(err, ErrNotThisCalls) {
		t.Fatalf("a second Spend: %v, want ErrUsed", err)
	}
	late, _, _ := e.IssueWith(b, claims{"sb1", "x"})
	lateOpened, _ := e.Open(late, &got)
	now = now.Add(10 * time.Minute)
	if _, err := e.Open(late, &got); !errors.Is(err, ErrExpired) {
		t.Fatalf("an expired ticket: %v, want ErrExpired", err)
	}
	if err := e.Spend(lateOpened); !errors.Is(err, ErrExpired) {
		t.Fatalf("a ticket spent after it expired: %v, want ErrExpired", err)
	}
	if _, err := e.Open(late[:len(late)-3]+"AAA", &got); errors.Is(err, ErrExpired) || err == nil {
		t.Fatalf("a forged ticket: %v, want ErrNotThisCalls alone", err)
	}
	if _, err := e.Open(late, nil); !errors.Is(err, ErrExpired) {
		t.Fatal(err)
	}
}
