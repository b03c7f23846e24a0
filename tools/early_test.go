package tools

import (
	"errors"
	"testing"

	"github.com/e2b-mcp/e2b-mcp/egress"
)

// The egress configuration read early for a call is what the call's session takes the first time it resolves
// its egress, when the read succeeded; another owner's or session's call, a second resolve, and one after a failed
// read each read afresh.
func TestEarlyEgressIsTheSessionsFirstOnly(t *testing.T) {
	alice := Caller{Owner: "alice", Session: "s1"}
	early := egress.Config{Summary: egress.Summary{AllowOut: []string{"early.example"}}}
	read := func(err error) *EarlyRead[egress.Config] {
		return StartEarlyRead(func() (egress.Config, error) { return early, err })
	}
	ctx := WithEarlyEgress(t.Context(), alice, read(nil))
	for _, other := range []Caller{{Owner: "bob", Session: "s1"}, {Owner: "alice", Session: "s2"}} {
		if _, ok := earlyEgressOf(ctx, other); ok {
			t.Errorf("%+v took alice's early egress of session s1", other)
		}
	}
	if got, ok := earlyEgressOf(ctx, alice); !ok || len(got.Summary.AllowOut) != 1 {
		t.Fatalf("the first resolve got %+v, %v; want the early read", got, ok)
	}
	if _, ok := earlyEgressOf(ctx, alice); ok {
		t.Error("a second resolve took the early read again; want a fresh read")
	}
	failed := WithEarlyEgress(t.Context(), alice, read(errors.New("the keyring is locked")))
	if _, ok := earlyEgressOf(failed, alice); ok {
		t.Error("a failed early read was taken; want a fresh read")
	}
	if _, ok := earlyEgressOf(t.Context(), alice); ok {
		t.Error("a call with no early read took one")
	}
}
