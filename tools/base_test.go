package tools

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"strings"
	"syscall"
	"testing"

	"github.com/e2b-mcp/e2b-mcp/e2b"
	"github.com/e2b-mcp/e2b-mcp/state"
)

func TestErrorText(t *testing.T) {
	t.Parallel()
	b := newBase(Deps{})
	call := Caller{Owner: "alice", Session: "main"}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	client, err := e2b.NewClient(e2b.Config{})
	if err != nil {
		t.Fatal(err)
	}
	_, clientFailure := client.Envd(e2b.SandboxConn{ID: "sbx1"}).ListDir(context.Background(), "/", -1)
	for _, c := range []struct {
		name string
		ctx  context.Context
		err  error
		want string
	}{
		{"tool error", context.Background(), userErrorf("Missing required parameter: path"), "Missing required parameter: path"},
		{"no key", context.Background(), fmt.Errorf("keyring: %w", ErrNoAPIKey), ConnectionRequired("alice")},
		{"api error", context.Background(), fmt.Errorf("wrapped: %w", &e2b.APIError{Op: "create sandbox", Status: 429, Message: "too many"}),
			"E2B API error (create sandbox: 429): too many"},
		{"cancelled", cancelled, fmt.Errorf("e2b: envd Start: %w", context.Canceled), "The call was cancelled before it finished."},
		{"no answer", context.Background(), &url.Error{Op: "Post", URL: "https://49983-x.e2b.app/files?path=a&signature=v1_secret", Err: errors.New("connection reset")},
			"E2B API error (no answer from Post: https://49983-x.e2b.app/files): connection reset"},
		{"client failure", context.Background(), clientFailure,
			"E2B API error (no usable answer from E2B): envd ListDir: invalid depth -1"},
		{"wrapped client failure", context.Background(), fmt.Errorf("listing at E2B: %w", clientFailure),
			"E2B API error (no usable answer from E2B): listing at E2B: e2b: envd ListDir: invalid depth -1"},
		// Only the E2B client's own errors are E2B's: one that merely reads like them is this server's.
		{"text like a client failure", context.Background(), errors.New("e2b: envd Start: the stream ended without the process's end event"),
			"Internal error in e2b_exec: e2b: envd Start: the stream ended without the process's end event"},
		{"store", context.Background(), fmt.Errorf("x: %w", state.ErrBusy), "e2b-mcp's state store failed (on this server, not at E2B): x: state store is busy"},
		{"full disk", context.Background(), &fs.PathError{Op: "write", Path: "state.db", Err: syscall.ENOSPC},
			"e2b-mcp's state store failed (on this server, not at E2B): write state.db: no space left on device"},
		{"other", context.Background(), errors.New("boom"), "Internal error in e2b_exec: boom"},
	} {
		if got := b.errorText(c.ctx, call, "e2b_exec", c.err); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}

type failingClients struct{ err error }

func (f failingClients) Client(context.Context, string) (*e2b.Client, error) { return nil, f.err }

// TestClientSourceFailure: a keyring that cannot be read is not "no key": the model is told what failed.
func TestClientSourceFailure(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	deps := e.deps
	deps.Clients = failingClients{err: errors.New("secret service is locked")}
	s := connectDeps(t, deps, eras[0], Caller{Owner: "alice", Session: "main"})
	got := s.fail(t, "e2b_list_sandboxes", nil)
	if got != "Could not get the E2B API key of alice: secret service is locked" {
		t.Fatalf("got %q", got)
	}
	deps.Clients = nil
	s = connectDeps(t, deps, eras[0], Caller{Owner: "alice", Session: "main"})
	if got := s.fail(t, "e2b_create_sandbox", nil); !strings.HasPrefix(got, "No E2B API key is connected for alice.") {
		t.Fatalf("no client source: %q", got)
	}
}
